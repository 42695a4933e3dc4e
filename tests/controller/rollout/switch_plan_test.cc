// The rack planner of switch-knob changes (controller/rollout/switch_plan.h):
// whole racks canary or control, switches get the switch knobs, hosts below
// are measured (or, in a joint policy, get the host knobs), deterministic per
// seed, refused with fewer than two judgeable racks.
#include "controller/rollout/switch_plan.h"

#include <algorithm>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace rocetune::controller {
namespace {

using ::testing::HasSubstr;

constexpr char kKmin[] = "ecn.AZURE_LOSSLESS.green_min_threshold";
constexpr char kKmax[] = "ecn.AZURE_LOSSLESS.green_max_threshold";
constexpr char kPfcEnable[] = "pfc.Ethernet0.pfc_enable";

StoredHost Switch(int rack, int64_t buffer = 2000000) {
  StoredHost s;
  s.info.set_host_id(absl::StrCat("sim-tor", rack));
  (*s.info.mutable_labels())["role"] = "switch";
  (*s.info.mutable_labels())["tor"] = absl::StrCat(rack);
  v1::NicDevice* d = s.info.add_devices();
  d->set_name("switch");
  d->set_switch_buffer_bytes(static_cast<uint64_t>(buffer));
  v1::DeviceParameters* p = s.info.mutable_current_parameters()->add_devices();
  p->set_device("switch");
  (*p->mutable_dcqcn())[kKmin] = 400000;
  (*p->mutable_dcqcn())[kKmax] = 1600000;
  (*p->mutable_dcqcn())["ecn.AZURE_LOSSLESS.green_drop_probability"] = 20;
  (*p->mutable_dcqcn())[kPfcEnable] = 8;
  return s;
}

StoredHost Host(int rack, int i) {
  StoredHost h;
  h.info.set_host_id(absl::StrCat("h", rack, "-", i));
  (*h.info.mutable_labels())["role"] = "trainer";
  (*h.info.mutable_labels())["tor"] = absl::StrCat(rack);
  v1::NicDevice* d = h.info.add_devices();
  d->set_name("mlx5_0");
  d->set_cc_param_layout("ofed_sysfs");
  d->add_ports()->set_speed_mbps(100000);
  v1::DeviceParameters* p = h.info.mutable_current_parameters()->add_devices();
  p->set_device("mlx5_0");
  (*p->mutable_dcqcn())["rpg_time_reset"] = 300;
  return h;
}

v1::Policy RackPolicy() {
  v1::Policy p;
  p.mutable_rollout()->set_canary_fraction(0.25);
  p.mutable_rollout()->set_min_canary_hosts(8);
  p.mutable_rollout()->add_stages(0.5);
  p.mutable_rollout()->add_stages(1.0);
  p.mutable_rollout()->set_rack_label("tor");
  return p;
}

struct Fleet {
  std::vector<StoredHost> switches, hosts;
};

Fleet MakeFleet(int racks, int hosts_per_rack) {
  Fleet f;
  for (int r = 0; r < racks; ++r) {
    f.switches.push_back(Switch(r));
    for (int i = 0; i < hosts_per_rack; ++i) f.hosts.push_back(Host(r, i));
  }
  return f;
}

int64_t Value(const v1::ParameterSet& set, const std::string& name) {
  for (const auto& d : set.devices()) {
    auto it = d.dcqcn().find(name);
    if (it != d.dcqcn().end()) return it->second;
  }
  return -1;
}

std::set<std::string> CanaryRacks(const std::vector<v1::HostTarget>& plan) {
  std::set<std::string> out;
  for (const auto& t : plan) {
    if (t.role() == v1::HostTarget::CANARY) out.insert(t.rack());
  }
  return out;
}

TEST(SwitchPlanTest, SwitchOnlyChangeCanariesWholeRacksAndMeasuresTheHostsBelow) {
  Fleet f = MakeFleet(8, 4);
  auto plan = PlanRacks(RackPolicy(), f.switches, f.hosts, {{kKmin, 100000}}, "c-1");
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->size(), 40u);
  // rack -> (role, stage), the same for every member of the rack.
  std::map<std::string, std::pair<v1::HostTarget::Role, uint32_t>> racks;
  int switches = 0;
  for (const v1::HostTarget& t : *plan) {
    auto [it, inserted] = racks.emplace(t.rack(), std::make_pair(t.role(), t.stage()));
    EXPECT_EQ(it->second, std::make_pair(t.role(), t.stage())) << t.host_id() << " in " << t.rack();
    if (IsSwitchTarget(t)) {
      ++switches;
      EXPECT_EQ(Value(t.target(), kKmin), 100000) << t.host_id();
      EXPECT_EQ(Value(t.target(), kKmax), 1600000) << "carried over: " << t.host_id();
      EXPECT_EQ(Value(t.target(), kPfcEnable), 8) << "carried over: " << t.host_id();
      EXPECT_EQ(Value(t.previous(), kKmin), 400000) << t.host_id();
      EXPECT_FALSE(IsMeasuredOnly(t));
    } else {
      EXPECT_TRUE(IsMeasuredOnly(t)) << "a switch-only change never pushes host " << t.host_id();
    }
  }
  EXPECT_EQ(switches, 8);
  int canary = 0, control = 0;
  std::map<uint32_t, int> stages;
  for (const auto& [rack, rs] : racks) {
    canary += rs.first == v1::HostTarget::CANARY;
    control += rs.first == v1::HostTarget::CONTROL;
    if (rs.first == v1::HostTarget::CANARY) {
      EXPECT_EQ(rs.second, 0u);
    } else {
      ++stages[rs.second];
    }
  }
  // 25% of 8 racks, 8 canary hosts: 2 racks; the other 6 control racks.
  EXPECT_EQ(canary, 2);
  EXPECT_EQ(control, 6);
  // Stage 1 up to half the racks (2 more), stage 2 the last 4.
  EXPECT_EQ(stages[1], 2);
  EXPECT_EQ(stages[2], 4);
}

TEST(SwitchPlanTest, CanaryTorsAreDeterministicPerSeedAndIgnoreInputOrder) {
  Fleet f = MakeFleet(8, 4);
  auto a = PlanRacks(RackPolicy(), f.switches, f.hosts, {{kKmin, 100000}}, "t-7");
  ASSERT_TRUE(a.ok()) << a.status();
  std::mt19937 rng(3);
  Fleet g = f;
  std::shuffle(g.switches.begin(), g.switches.end(), rng);
  std::shuffle(g.hosts.begin(), g.hosts.end(), rng);
  auto b = PlanRacks(RackPolicy(), g.switches, g.hosts, {{kKmin, 100000}}, "t-7");
  ASSERT_TRUE(b.ok()) << b.status();
  ASSERT_EQ(a->size(), b->size());
  for (size_t i = 0; i < a->size(); ++i) {
    EXPECT_EQ((*a)[i].host_id(), (*b)[i].host_id());
    EXPECT_EQ((*a)[i].role(), (*b)[i].role()) << (*a)[i].host_id();
    EXPECT_EQ((*a)[i].stage(), (*b)[i].stage()) << (*a)[i].host_id();
  }
  // Other seeds pick other ToRs.
  std::set<std::set<std::string>> seen;
  for (int s = 0; s < 6; ++s) {
    auto p = PlanRacks(RackPolicy(), f.switches, f.hosts, {{kKmin, 100000}}, absl::StrCat("c-", s));
    ASSERT_TRUE(p.ok());
    seen.insert(CanaryRacks(*p));
  }
  EXPECT_GT(seen.size(), 1u);
}

// Issue 24 item 4: a confirmation's canary racks avoid the racks whose members
// were canaries of the trial it confirms: with every rack in the search, the
// search's control racks become the canary racks.
TEST(SwitchPlanTest, AConfirmationsCanaryRacksAreFreshWhereThereAreEnough) {
  Fleet f = MakeFleet(8, 4);
  auto search = PlanRacks(RackPolicy(), f.switches, f.hosts, {{kKmin, 100000}}, "t-7");
  ASSERT_TRUE(search.ok()) << search.status();
  PlanAvoid avoid;
  for (const v1::HostTarget& t : *search) {
    if (t.role() == v1::HostTarget::CANARY) avoid[t.host_id()] = 2;
    if (t.role() == v1::HostTarget::CONTROL) avoid[t.host_id()] = 1;
  }
  const std::set<std::string> searched = CanaryRacks(*search);
  ASSERT_FALSE(searched.empty());
  auto confirm =
      PlanRacks(RackPolicy(), f.switches, f.hosts, {{kKmin, 100000}}, "t-7/confirmation", avoid);
  ASSERT_TRUE(confirm.ok()) << confirm.status();
  const std::set<std::string> fresh = CanaryRacks(*confirm);
  EXPECT_EQ(fresh.size(), searched.size());
  for (const std::string& r : fresh) EXPECT_FALSE(searched.contains(r)) << r;
}

TEST(SwitchPlanTest, JointChangeGivesACanaryRackBothItsSwitchAndHostKnobs) {
  Fleet f = MakeFleet(6, 3);
  auto plan = PlanRacks(RackPolicy(), f.switches, f.hosts,
                        {{kKmin, 200000}, {"rpg_time_reset", 600}}, "c-2");
  ASSERT_TRUE(plan.ok()) << plan.status();
  const std::set<std::string> canary = CanaryRacks(*plan);
  EXPECT_EQ(canary.size(), 3u) << "min_canary_hosts 8 with 3 hosts a rack, at most half";
  for (const v1::HostTarget& t : *plan) {
    if (IsSwitchTarget(t)) {
      EXPECT_EQ(Value(t.target(), kKmin), 200000) << t.host_id();
      EXPECT_EQ(Value(t.target(), "rpg_time_reset"), -1)
          << "no host knob on switch " << t.host_id();
    } else {
      EXPECT_FALSE(IsMeasuredOnly(t)) << t.host_id();
      EXPECT_EQ(Value(t.target(), "rpg_time_reset"), 600) << t.host_id();
      EXPECT_EQ(Value(t.previous(), "rpg_time_reset"), 300) << t.host_id();
      EXPECT_EQ(Value(t.target(), kKmin), -1) << "no switch knob on host " << t.host_id();
    }
    EXPECT_EQ(t.role() == v1::HostTarget::CANARY, canary.contains(t.rack())) << t.host_id();
  }
}

TEST(SwitchPlanTest, FewerThanTwoJudgeableRacksIsRefused) {
  Fleet f = MakeFleet(1, 4);
  f.switches.push_back(Switch(1));  // a ToR with no host below it
  auto plan = PlanRacks(RackPolicy(), f.switches, f.hosts, {{kKmin, 100000}}, "c-1");
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(plan.status().message(), HasSubstr("at least 2 racks (label \"tor\")"));
  EXPECT_THAT(plan.status().message(), HasSubstr("found 1"));
  EXPECT_THAT(plan.status().message(), HasSubstr("tor=1 (1 switch, 0 hosts)"));
}

TEST(SwitchPlanTest, TwoRacksGiveOneCanaryAndOneControl) {
  Fleet f = MakeFleet(2, 2);
  auto plan = PlanRacks(RackPolicy(), f.switches, f.hosts, {{kKmin, 100000}}, "c-1");
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(CanaryRacks(*plan).size(), 1u);
}

TEST(SwitchPlanTest, SwitchWithoutRackLabelIsRefused) {
  Fleet f = MakeFleet(3, 2);
  f.switches[1].info.mutable_labels()->erase("tor");
  auto plan = PlanRacks(RackPolicy(), f.switches, f.hosts, {{kKmin, 100000}}, "c-1");
  ASSERT_FALSE(plan.ok());
  EXPECT_THAT(plan.status().message(), HasSubstr("switch sim-tor1 has no label \"tor\""));
}

TEST(SwitchPlanTest, ThresholdAboveTheSwitchBufferIsRefused) {
  Fleet f = MakeFleet(4, 2);
  f.switches[2] = Switch(2, /*buffer=*/1000000);
  auto plan = PlanRacks(RackPolicy(), f.switches, f.hosts, {{kKmax, 1500000}}, "c-1");
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(plan.status().message(), HasSubstr("sim-tor2"));
  EXPECT_THAT(plan.status().message(), HasSubstr("exceeds the buffer (1000000 bytes)"));
}

TEST(ApplyKnobsTest, SwitchKnobsGoToTheSwitchDeviceAndNeverToAHost) {
  // pfc.<port>.pfc_enable is a switch knob, not the host's PFC settings.
  StoredHost sw = Switch(0);
  auto t = ApplyKnobs(sw, PreviousParameters(sw), {{kPfcEnable, 24}, {kKmin, 100000}});
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(Value(*t, kPfcEnable), 24);
  EXPECT_EQ(Value(*t, kKmin), 100000);
  StoredHost h = Host(0, 0);
  auto bad = ApplyKnobs(h, PreviousParameters(h), {{kPfcEnable, 24}});
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("is a switch knob; the host is not a switch"));
  auto wrong = ApplyKnobs(sw, PreviousParameters(sw), {{"rpg_time_reset", 5}});
  ASSERT_FALSE(wrong.ok());
  EXPECT_THAT(wrong.status().message(), HasSubstr("is a host knob, not a switch knob"));
  // Kmin not below Kmax after the write is refused.
  auto inverted = ApplyKnobs(sw, PreviousParameters(sw), {{kKmin, 1700000}});
  ASSERT_FALSE(inverted.ok());
  EXPECT_THAT(inverted.status().message(), HasSubstr("is not below"));
  // Host knobs on a host still work as before.
  auto host = ApplyKnobs(h, PreviousParameters(h), {{"rpg_time_reset", 50}});
  ASSERT_TRUE(host.ok()) << host.status();
  EXPECT_EQ(Value(*host, "rpg_time_reset"), 50);
}

TEST(SwitchPlanTest, SplitKnobsAndPolicyKind) {
  SplitKnobValues s = SplitKnobs({{kKmin, 1}, {kPfcEnable, 8}, {"pfc.delay", 3}, {"rpg_gd", 4}});
  EXPECT_EQ(s.sw.size(), 2u);
  EXPECT_EQ(s.host.size(), 2u);
  EXPECT_TRUE(s.host.contains("pfc.delay"));
  v1::Policy p;
  p.add_knobs()->set_parameter("rpg_gd");
  EXPECT_FALSE(HasSwitchKnobs(p));
  p.add_knobs()->set_parameter(kKmax);
  EXPECT_TRUE(HasSwitchKnobs(p));
}

}  // namespace
}  // namespace rocetune::controller
