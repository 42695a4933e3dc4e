// rocetunectl as a subprocess: exit codes, usage, and the calls it makes
// against a fake AdminService.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <regex>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "tests/cli/fake_admin.h"
#include "tests/integration/subprocess.h"

namespace rocetune::cli {
namespace {

using ::rocetune::testing::BuiltBinary;
using ::rocetune::testing::MakeTempDir;
using ::rocetune::testing::RunCommand;
using ::rocetune::testing::Subprocess;
using ::testing::HasSubstr;
using ::testing::Not;

struct Result {
  int rc;
  std::string out;
};

Result RunCtl(std::vector<std::string> args) {
  Result r;
  r.rc = RunCommand(BuiltBinary("cli/rocetunectl"), args, &r.out);
  return r;
}

std::string WriteFile(const std::string& name, const std::string& text) {
  std::string path = absl::StrCat(MakeTempDir("cli"), "/", name);
  std::ofstream(path) << text;
  return path;
}

size_t Count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(RocetunectlUsageTest, HelpExitsZeroAndListsCommands) {
  for (std::vector<std::string> args : {std::vector<std::string>{"--help"}, {"help"}, {"-h"}}) {
    Result r = RunCtl(args);
    EXPECT_EQ(r.rc, 0) << args[0];
    for (const char* cmd : {"policy validate", "change show", "tuning start", "audit verify",
                            "push", "watch", "hosts", "--dry-run", "--actor", "--output"}) {
      EXPECT_THAT(r.out, HasSubstr(cmd)) << args[0];
    }
  }
  Result r = RunCtl({"help", "tuning"});
  EXPECT_EQ(r.rc, 0);
  EXPECT_THAT(r.out, HasSubstr("tuning stop"));
  EXPECT_THAT(r.out, Not(HasSubstr("policy validate")));
}

// Issue 28 item 9: there was no `rocetunectl --version`.
TEST(RocetunectlUsageTest, VersionPrintsTheVersionAndRevision) {
  Result r = RunCtl({"--version"});
  EXPECT_EQ(r.rc, 0) << r.out;
  EXPECT_THAT(r.out,
              ::testing::MatchesRegex(
                  "rocetunectl [0-9]+\\.[0-9]+\\.[0-9]+ \\(revision ([0-9a-f]+|unknown)\\)\n"));
}

TEST(RocetunectlUsageTest, UsageErrorsExitTwo) {
  struct Case {
    std::vector<std::string> args;
    const char* says;
  };
  for (const Case& c : std::vector<Case>{
           {{}, "no command given"},
           {{"frobnicate"}, "unknown command"},
           {{"policy", "frob"}, "unknown command"},
           {{"hosts", "--no_such_flag=1"}, "no_such_flag"},
           {{"hosts", "--reason=x"}, "does not apply"},
           {{"status", "--dry-run"}, "does not apply"},
           {{"host"}, "missing arguments"},
           {{"host", "a", "b"}, "unexpected argument"},
           {{"hosts", "--output=xml"}, "table, wide, json or yaml"},
           {{"hosts", "--timeout=soon"}, "--timeout"},
           {{"change", "approve", "c-1"}, "--reason is required"},
           {{"change", "propose", "base", "rpg_ai_rate", "--reason=x"}, "KNOB=INTEGER"},
           {{"change", "list", "--state=SIDEWAYS"}, "unknown state"},
           {{"change", "rehearse", "c-1"}, "--scenario"},
           {{"push", "h1", "mlx5_0", "rpg_ai_rate=fast"}, "NAME=INTEGER"},
           {{"push", "h1", "mlx5_0", "rpg_ai_rate=10", "rpg_hai_rate=50", "rpg_ai_rate=11"},
            "mlx5_0: parameter rpg_ai_rate given twice (\"rpg_ai_rate=10\" and "
            "\"rpg_ai_rate=11\")"},
           {{"change", "propose", "base", "rpg_ai_rate=10", "rpg_ai_rate=11", "--reason=x"},
            "knob rpg_ai_rate given twice (\"rpg_ai_rate=10\" and \"rpg_ai_rate=11\")"},
           {{"audit", "--since=yesterday"}, "--since"},
           {{"hosts"}, "--insecure_loopback"},
           {{"hosts", "--insecure_loopback", "--controller=10.0.0.1:7070"}, "loopback"},
       }) {
    Result r = RunCtl(c.args);
    EXPECT_EQ(r.rc, 2) << absl::StrJoin(c.args, " ") << "\n" << r.out;
    EXPECT_THAT(r.out, HasSubstr(c.says)) << absl::StrJoin(c.args, " ");
  }
  // An unknown command prints the usage.
  EXPECT_THAT(RunCtl({"frobnicate"}).out, HasSubstr("commands:"));
}

TEST(RocetunectlUsageTest, UnreachableControllerExitsOneWithCodeName) {
  // Port 1 on loopback: nothing listens there.
  Result r = RunCtl({"--insecure_loopback", "--controller=127.0.0.1:1", "--timeout=2s", "status"});
  EXPECT_EQ(r.rc, 1) << r.out;
  EXPECT_THAT(r.out, HasSubstr("FleetSummary"));
  EXPECT_THAT(r.out, HasSubstr("UNAVAILABLE"));
}

constexpr char kValidPolicy[] = R"(# a small policy
name: "base"
objective { metric: PROBE_RTT_P99 }
knobs { parameter: "rpg_ai_rate" min: 1 max: 100 step: 5 }
knobs { parameter: "rpg_time_reset" min: 50 max: 1000 step: 25 }
tuner { kind: COORDINATE_DESCENT }
rollout { canary_fraction: 0.25 bake_seconds: 300 stages: [0.5, 1.0] }
guard { max_p99_regression: 0.05 }
)";

TEST(RocetunectlPolicyTest, ValidateWorksOffline) {
  std::string good = WriteFile("good.textproto", kValidPolicy);
  std::string bad_text = kValidPolicy;
  bad_text.replace(bad_text.find("min: 1 max: 100"), 15, "min: 100 max: 1");
  std::string bad = WriteFile("bad.textproto", bad_text);
  // No --insecure_loopback, no controller: validate never connects.
  Result r = RunCtl({"policy", "validate", good});
  EXPECT_EQ(r.rc, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("ok"));
  r = RunCtl({"policy", "validate", good, bad});
  EXPECT_EQ(r.rc, 1) << r.out;
  std::regex error_line(std::regex_replace(bad, std::regex("[.]"), "\\.") +
                        ":[0-9]+:[0-9]+: .+ \\[[a-z_]+\\]");
  EXPECT_TRUE(std::regex_search(r.out, error_line)) << r.out;
  r = RunCtl({"policy", "validate", "-o", "json", bad});
  EXPECT_EQ(r.rc, 1);
  EXPECT_THAT(r.out, HasSubstr("\"valid\": false"));
  std::string syntax = WriteFile("syntax.textproto", "name: \"x\"\nknobs { parameter: }\n");
  r = RunCtl({"policy", "validate", syntax});
  EXPECT_EQ(r.rc, 1) << r.out;
  std::regex syntax_line(std::regex_replace(syntax, std::regex("[.]"), "\\.") +
                         ":[0-9]+:[0-9]+: .+ \\[syntax\\]");
  EXPECT_TRUE(std::regex_search(r.out, syntax_line)) << r.out;
  EXPECT_THAT(r.out, Not(HasSubstr("[syntax] [syntax]")));
  // A byte-order mark and invalid UTF-8 are named with their position, once.
  std::string bom = WriteFile("bom.textproto", std::string("\xEF\xBB\xBF") + kValidPolicy);
  r = RunCtl({"policy", "validate", bom});
  EXPECT_EQ(r.rc, 1) << r.out;
  EXPECT_THAT(r.out, HasSubstr(bom + ":1:1: the file starts with a UTF-8 byte-order mark"));
  EXPECT_THAT(r.out, HasSubstr("[encoding]\n"));
  EXPECT_THAT(r.out, Not(HasSubstr("[syntax]")));
  std::string latin1 = WriteFile("latin1.textproto", "name: \"x\"\n# caf\xE9\n");
  r = RunCtl({"policy", "validate", latin1});
  EXPECT_EQ(r.rc, 1) << r.out;
  EXPECT_THAT(r.out, HasSubstr(latin1 + ":2:6: byte 0xE9 is not valid UTF-8"));
  // diff -f checks the file before it connects.
  r = RunCtl({"diff", "-f", bad});
  EXPECT_EQ(r.rc, 1) << r.out;
  EXPECT_THAT(r.out, HasSubstr("invalid policy (apply would refuse it)"));
  r = RunCtl({"policy", "validate", "/nonexistent/p.textproto"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_THAT(r.out, HasSubstr("/nonexistent/p.textproto"));
}

class RocetunectlServerTest : public ::testing::Test {
 protected:
  void SetUp() override { server_ = testing::FakeServer::Start(&fake_); }
  void TearDown() override { server_.Stop(); }
  Result Ctl(std::vector<std::string> args) {
    args.insert(args.begin(),
                {"--insecure_loopback", absl::StrCat("--controller=127.0.0.1:", server_.port)});
    return RunCtl(args);
  }
  testing::FakeAdmin fake_;
  testing::FakeServer server_;
};

// Issue 25 item 5: policy validate --controller checks the file offline and
// then against the controller (a dry-run apply that stores nothing), printing
// what the controller says about its fleet. Without --controller it never
// connects (ValidateWorksOffline).
TEST_F(RocetunectlServerTest, ValidateWithControllerAsksTheControllerForADryRun) {
  std::string good = WriteFile("good-live.textproto", kValidPolicy);
  Result r = Ctl({"policy", "validate", good});
  EXPECT_EQ(r.rc, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr(good + ": ok (policy base)"));
  EXPECT_THAT(r.out, HasSubstr(good + ": ok against the controller (identical to version 3)"));
  EXPECT_THAT(r.out, HasSubstr("\n  selects 4 connected host(s)"));
  EXPECT_TRUE(fake_.last_apply().dry_run());
  EXPECT_EQ(fake_.last_apply().file_name(), good);
  // The controller's notes are text: -o json with --controller is refused.
  r = Ctl({"policy", "validate", "-o", "json", good});
  EXPECT_EQ(r.rc, 1) << r.out;
  EXPECT_THAT(r.out, HasSubstr("drop -o json"));
  // An invalid file is refused offline; the controller is not asked.
  std::string bad_text = kValidPolicy;
  bad_text.replace(bad_text.find("min: 1 max: 100"), 15, "min: 100 max: 1");
  std::string bad = WriteFile("bad-live.textproto", bad_text);
  r = Ctl({"policy", "validate", bad});
  EXPECT_EQ(r.rc, 1) << r.out;
  EXPECT_THAT(r.out, Not(HasSubstr("against the controller")));
  EXPECT_EQ(fake_.last_apply().file_name(), good);
}

TEST_F(RocetunectlServerTest, HostsPagesThroughALargeFleet) {
  Result r = Ctl({"hosts", "--actor=alice"});
  ASSERT_EQ(r.rc, 0) << r.out.substr(0, 2000);
  EXPECT_EQ(fake_.list_hosts_calls(), 5);
  EXPECT_THAT(r.out, HasSubstr("2500 host(s)"));
  EXPECT_THAT(r.out, HasSubstr("host-10000"));
  EXPECT_THAT(r.out, HasSubstr("host-12499"));
  EXPECT_EQ(fake_.last_actor(), "alice");
  r = Ctl({"hosts", "-o", "json", "--page_size=1000"});
  ASSERT_EQ(r.rc, 0);
  EXPECT_EQ(Count(r.out, "\"host_id\""), 2500u);
}

TEST_F(RocetunectlServerTest, ActorDefaultsToUser) {
  ASSERT_EQ(Ctl({"hosts"}).rc, 0);
  const char* user = std::getenv("USER");
  EXPECT_EQ(fake_.last_actor(), user == nullptr || *user == '\0' ? "unknown" : user);
}

TEST_F(RocetunectlServerTest, PushWaitAckNackAndTimeout) {
  Result r = Ctl({"push", "h1", "mlx5_0", "rpg_ai_rate=20", "--wait", "--reason=test"});
  EXPECT_EQ(r.rc, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("h1 acked v-h1"));
  r = Ctl({"push", "bad", "mlx5_0", "dce_tcp_g=2000", "--wait"});
  EXPECT_EQ(r.rc, 1) << r.out;
  EXPECT_THAT(r.out, HasSubstr("dce_tcp_g=2000 outside 0..1023"));
  r = Ctl({"push", "slow", "mlx5_0", "rpg_ai_rate=20", "--wait", "--timeout=500ms"});
  EXPECT_EQ(r.rc, 1) << r.out;
  EXPECT_THAT(r.out, HasSubstr("timed out"));
}

TEST_F(RocetunectlServerTest, DryRunAndReasonReachTheRequest) {
  Result r = Ctl({"change", "approve", "c-1", "--reason=ok by me", "--dry-run"});
  EXPECT_EQ(r.rc, 0) << r.out;
  EXPECT_TRUE(fake_.last_action().dry_run());
  EXPECT_EQ(fake_.last_action().reason(), "ok by me");
  EXPECT_THAT(r.out, HasSubstr("dry run"));
  r = Ctl({"change", "approve", "c-1", "--reason", "go"});
  EXPECT_EQ(r.rc, 0);
  EXPECT_FALSE(fake_.last_action().dry_run());

  std::string file = WriteFile("base.textproto", kValidPolicy);
  r = Ctl({"policy", "apply", file, "--dry-run"});
  EXPECT_EQ(r.rc, 0) << r.out;
  EXPECT_TRUE(fake_.last_apply().dry_run());
  EXPECT_EQ(fake_.last_apply().text(), kValidPolicy);
  EXPECT_EQ(fake_.last_apply().file_name(), file);
  EXPECT_THAT(r.out, HasSubstr("unchanged: identical to version 3"));

  r = Ctl({"change", "propose", "base@2", "rpg_ai_rate=20", "rpg_time_reset=100",
           "--reason=faster recovery"});
  EXPECT_EQ(r.rc, 0) << r.out;
  v1::ProposeChangeRequest p = fake_.last_propose();
  EXPECT_EQ(p.policy_name(), "base");
  EXPECT_EQ(p.policy_version(), "2");
  EXPECT_EQ(p.knobs().at("rpg_ai_rate"), 20);
  EXPECT_EQ(p.knobs().at("rpg_time_reset"), 100);
  EXPECT_FALSE(p.dry_run());
}

TEST_F(RocetunectlServerTest, RefusedCallExitsOneWithCodeName) {
  Result r = Ctl({"change", "approve", "c-2", "--reason=mine"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_THAT(r.out, HasSubstr("PERMISSION_DENIED: a proposer cannot approve"));
  r = Ctl({"change", "show", "c-404"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_THAT(r.out, HasSubstr("NOT_FOUND"));
}

TEST_F(RocetunectlServerTest, ChangeShowDrawsCanaryAndControl) {
  Result r = Ctl({"change", "show", "c-1"});
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("HOLD"));
  EXPECT_THAT(r.out, HasSubstr("rule min_samples"));
  EXPECT_THAT(r.out, HasSubstr("canary (n=100)"));
  EXPECT_THAT(r.out, HasSubstr("control (n=100)"));
  EXPECT_THAT(r.out, HasSubstr("█"));
  r = Ctl({"change", "show", "c-1", "--output=json"});
  ASSERT_EQ(r.rc, 0);
  EXPECT_THAT(r.out, HasSubstr("\"policy_name\": \"base\""));
}

TEST_F(RocetunectlServerTest, KubectlVerbsRunTheResourceCommands) {
  // get hosts = hosts (every page, its flags), -o wide adds columns.
  Result r = Ctl({"get", "hosts", "--page_size=1000", "-o", "wide"});
  ASSERT_EQ(r.rc, 0) << r.out.substr(0, 2000);
  EXPECT_EQ(fake_.list_hosts_calls(), 5);  // the fake caps pages at 500
  EXPECT_THAT(r.out, HasSubstr("2500 host(s)"));
  EXPECT_THAT(r.out, HasSubstr("CONNECTED"));
  EXPECT_THAT(Ctl({"hosts"}).out, Not(HasSubstr("CONNECTED")));
  // describe change ID = change show ID; -o yaml is the same document.
  r = Ctl({"describe", "change", "c-1"});
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("rule min_samples"));
  r = Ctl({"describe", "change", "c-1", "-o", "yaml"});
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("policy_name: base\n"));
  EXPECT_THAT(r.out, Not(HasSubstr("{")));
  // apply -f FILE = policy apply FILE, with --reason and --dry-run.
  std::string file = WriteFile("apply.textproto", kValidPolicy);
  r = Ctl({"apply", "-f", file, "--reason=from a file", "--dry-run"});
  EXPECT_EQ(r.rc, 0) << r.out;
  EXPECT_EQ(fake_.last_apply().file_name(), file);
  EXPECT_EQ(fake_.last_apply().reason(), "from a file");
  EXPECT_TRUE(fake_.last_apply().dry_run());
  // Usage errors: a missing -f, an unknown kind, an argument get does not take.
  EXPECT_EQ(Ctl({"apply"}).rc, 2);
  EXPECT_EQ(Ctl({"get", "widgets"}).rc, 2);
  EXPECT_EQ(Ctl({"get", "changes", "c-1"}).rc, 2);
  EXPECT_EQ(Ctl({"describe", "change"}).rc, 2);
  EXPECT_EQ(Ctl({"hosts", "-o", "xml"}).rc, 2);
  // Every alias, singular and plural, reaches its command's call (the fake
  // serves some; the rest answer UNIMPLEMENTED, naming the call).
  for (const auto& [args, call] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"get", "host"}, "host(s)"},
           {{"get", "policies"}, "ListPolicies"},
           {{"get", "policy"}, "ListPolicies"},
           {{"get", "changes"}, "ListChanges"},
           {{"get", "change"}, "ListChanges"},
           {{"get", "campaigns"}, "ListCampaigns"},
           {{"get", "campaign"}, "ListCampaigns"},
           {{"host", "rp-off"},
            "not in effect: mlx5_0 rpg_time_reset: the DCQCN reaction point is off"},
           {{"describe", "host", "host-10000"}, "host-10000"},
           {{"describe", "hosts", "host-10000"}, "host-10000"},
           {{"describe", "policy", "base"}, "GetPolicy"},
           {{"describe", "policies", "base"}, "GetPolicy"},
           {{"describe", "changes", "c-1"}, "min_samples"},
           {{"describe", "campaign", "t-1"}, "GetCampaign"},
           {{"describe", "campaigns", "t-1"}, "GetCampaign"}}) {
    r = Ctl(args);
    EXPECT_NE(r.rc, 2) << absl::StrJoin(args, " ") << ": " << r.out;
    EXPECT_THAT(r.out, HasSubstr(call)) << absl::StrJoin(args, " ");
  }
}

TEST_F(RocetunectlServerTest, WatchSurvivesAControllerRestart) {
  fake_.watch_kinds = {"before_restart", "second"};
  std::string log = absl::StrCat(MakeTempDir("watch"), "/out.log");
  Subprocess watch(BuiltBinary("cli/rocetunectl"),
                   {"--insecure_loopback", absl::StrCat("--controller=127.0.0.1:", server_.port),
                    "watch", "-o", "json"},
                   log);
  ASSERT_TRUE(watch.Start());
  auto wait_for = [&](const std::string& text) {
    for (int i = 0; i < 500 && watch.Log().find(text) == std::string::npos; ++i) {
      absl::SleepFor(absl::Milliseconds(20));
    }
    return watch.Log().find(text) != std::string::npos;
  };
  ASSERT_TRUE(wait_for("before_restart")) << watch.Log();
  int port = server_.port;
  server_.Stop();
  fake_.watch_kinds = {"after_restart"};
  server_ = testing::FakeServer::Start(&fake_, port);
  ASSERT_NE(server_.server, nullptr);
  ASSERT_TRUE(wait_for("after_restart")) << watch.Log();
  EXPECT_TRUE(watch.Running());
  // The reconnect resumed after the last event seen (boot 42, seq 2).
  EXPECT_EQ(fake_.last_watch().after_boot_unix_nanos(), 42);
  EXPECT_EQ(fake_.last_watch().after_seq(), 2u);
  std::string out = watch.Log();
  EXPECT_THAT(out, HasSubstr("reconnecting"));
  // One JSON event per line.
  for (absl::string_view line : absl::StrSplit(out, '\n')) {
    if (line.find("_restart") == absl::string_view::npos) continue;
    EXPECT_EQ(line.front(), '{') << line;
    EXPECT_EQ(line.back(), '}') << line;
  }
}

}  // namespace
}  // namespace rocetune::cli
