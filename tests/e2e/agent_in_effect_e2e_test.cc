// End to end (issue 25 item 8): applied is not always in effect. The hosts of
// ToR 0 of rocetune-fabricsim --agents start with the DCQCN reaction point off
// on every priority (--rp_disabled_tors=0, a NIC left misconfigured; the
// simulated fabric then ignores CNPs on their flows). A change to
// rpg_time_reset, a reaction-point value, is proposed and approved through
// rocetunectl against the real rocetune-controller: ToR 0's canary host
// applies it and says it is not in effect; `rocetunectl host` and `change
// show` show it; the canary verdict leaves that host out as not changed,
// naming why, and judges the other racks.
#include <set>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/e2e/campaign_flow.h"
#include "tests/e2e/e2e_env.h"
#include "tests/e2e/fault_checks.h"

namespace rocetune::e2e {
namespace {

using ::testing::HasSubstr;

TEST(AgentInEffectE2E, AHostWhoseReactionPointIsOffIsNotCountedAsChanged) {
  EnvOptions opt = SmallFleetOptions();
  opt.fabricsim_flags.push_back("--rp_disabled_tors=0");
  Env env(opt);
  ASSERT_TRUE(env.Start()) << env.ControllerLog() << env.FabricLog();
  std::string out;
  ASSERT_EQ(env.Ctl({"policy", "apply",
                     env.WriteFile("ineffect.textproto", SmallFleetPolicy("ineffect", 8))},
                    "alice", &out),
            0)
      << out;
  std::set<std::string> tor0;
  for (const v1::HostInfo& h : env.Hosts()) {
    auto tor = h.labels().find("tor");
    if (tor != h.labels().end() && tor->second == "0") tor0.insert(h.host_id());
  }
  ASSERT_EQ(tor0.size(), 2u);
  ASSERT_EQ(
      env.Ctl({"change", "propose", "ineffect", "rpg_time_reset=700", "--reason=in-effect e2e"},
              "alice", &out),
      0)
      << out;
  const std::string id = IdIn(out, "c-");
  ASSERT_EQ(env.Ctl({"change", "approve", id, "--reason=in-effect e2e"}, "bob", &out), 0) << out;

  // The canary's first verdict (one look at the end of an 8 s bake).
  v1::Change c;
  ASSERT_TRUE(env.WaitFor(
      [&] {
        absl::StatusOr<v1::Change> got = env.GetChange(id);
        if (!got.ok()) return false;
        c = *got;
        return c.verdicts_size() > 0;
      },
      absl::Seconds(90)))
      << env.ControllerLog().substr(0, 4000);

  std::string off;  // ToR 0's canary host
  for (const v1::HostTarget& t : c.hosts()) {
    if (t.role() != v1::HostTarget::CANARY) continue;
    if (tor0.contains(t.host_id())) {
      off = t.host_id();
      ASSERT_EQ(t.not_in_effect_size(), 1) << t.DebugString();
      EXPECT_EQ(t.not_in_effect(0).parameter(), "rpg_time_reset");
      EXPECT_THAT(t.not_in_effect(0).reason(), HasSubstr("the DCQCN reaction point is off"));
    } else {
      EXPECT_EQ(t.not_in_effect_size(), 0) << t.DebugString();
    }
  }
  ASSERT_FALSE(off.empty()) << "ToR 0 has a canary host: " << c.DebugString().substr(0, 3000);
  bool dropped = false;
  for (const std::string& d : c.verdicts(0).dropped_hosts()) {
    dropped |= d.rfind(absl::StrCat(off, ": not changed: rpg_time_reset on "), 0) == 0;
  }
  EXPECT_TRUE(dropped) << c.verdicts(0).DebugString();

  ASSERT_EQ(env.Ctl({"host", off}, "carol", &out), 0) << out;
  EXPECT_THAT(out, HasSubstr("not in effect: "));
  EXPECT_THAT(out, HasSubstr("rpg_time_reset: the DCQCN reaction point is off"));
  ASSERT_EQ(env.Ctl({"change", "show", id}, "carol", &out), 0) << out;
  EXPECT_THAT(out, HasSubstr(absl::StrCat("not changed on ", off, ": rpg_time_reset on ")));
  ASSERT_EQ(env.Ctl({"hosts"}, "carol", &out), 0) << out;
  EXPECT_THAT(out, HasSubstr(" not in effect)"));  // every reaction-point value of the set
}

}  // namespace
}  // namespace rocetune::e2e
