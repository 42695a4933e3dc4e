// The rocetune-fabricsim command line: flags, errors and the JSON summary.
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/test_support.h"

namespace {

using ::testing::HasSubstr;

struct Result {
  int exit_code = -1;
  std::string output;  // stdout and stderr
};

Result RunSim(const std::string& args) {
  Result r;
  r.exit_code = rocetune::testing::RunShell(
      std::string(ROCETUNE_BINARY_DIR) + "/sim/rocetune-fabricsim " + args, &r.output);
  return r;
}

std::string Scenario(const std::string& name) {
  return std::string(ROCETUNE_SOURCE_DIR) + "/sim/scenarios/" + name + ".textproto";
}

TEST(FabricsimCliTest, HelpDocumentsEveryFlag) {
  Result r = RunSim("--help");
  for (const char* flag :
       {"--scenario", "--set", "--output", "--agents", "--controller", "--pace", "--duration",
        "--sample_interval", "--labels", "--job_signal", "--job_name"}) {
    EXPECT_THAT(r.output, HasSubstr(flag)) << flag;
  }
}

// A --state_dir so deep that a host's job socket cannot be bound: refused at
// start, naming the path and the ways out, before any agent runs.
TEST(FabricsimCliTest, AJobSocketPathTooLongIsRefusedAtStart) {
  rocetune::testing::TempDir dir("fabricsim-cli");
  const std::string deep = dir.path() + "/" + std::string(100, 'd');
  Result r = RunSim("--scenario=" + Scenario("victim_flow") +
                    " --agents --controller=127.0.0.1:1 --duration=10ms --output=none "
                    "--switch_agents=false --state_dir=" +
                    deep);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr("longer than a Unix socket path may be (107)"));
  EXPECT_THAT(r.output, HasSubstr("--job_signal=false"));
}

TEST(FabricsimCliTest, UnknownFlagAndMissingScenarioFail) {
  EXPECT_NE(RunSim("--no_such_flag").exit_code, 0);
  Result r = RunSim("");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.output, HasSubstr("--scenario"));
}

TEST(FabricsimCliTest, PrintsJsonSummaryWithOverridesApplied) {
  Result r = RunSim("--scenario=" + Scenario("dcqcn_paper_40g_2flows") +
                    " --set=duration_ms=5 --set=warmup_ms=1 --set=name=overridden");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const char* key : {"\"scenario\": \"overridden\"", "\"queues\"", "\"mean_bytes\"",
                          "\"p99_bytes\"", "\"max_bytes\"", "\"utilization\"",
                          "\"throughput_gbps\"", "\"fct_slowdown\"", "\"probe_rtt_us\"", "\"p999\"",
                          "\"cnp_sent\"", "\"pfc_pause_frames\"", "\"sim_seconds\": 0.005"}) {
    EXPECT_THAT(r.output, HasSubstr(key)) << key;
  }
}

TEST(FabricsimCliTest, BadSetExitsNonZeroNamingThePath) {
  Result r =
      RunSim("--scenario=" + Scenario("dcqcn_paper_40g_2flows") + " --set=dcqcn.rpg_ai_rat=20");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.output, HasSubstr("dcqcn.rpg_ai_rat"));
  r = RunSim("--scenario=" + Scenario("dcqcn_paper_40g_2flows") + " --set=dcqcn.dce_tcp_g=4000");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.output, HasSubstr("dce_tcp_g=4000"));
}

TEST(FabricsimCliTest, PaceMustBeAFiniteNonNegativeNumber) {
  for (const char* pace : {"inf", "nan", "-1"}) {
    Result r = RunSim("--scenario=" + Scenario("dcqcn_paper_40g_2flows") + " --pace=" + pace);
    EXPECT_EQ(r.exit_code, 2) << pace << ": " << r.output;
    EXPECT_THAT(r.output, HasSubstr("--pace=")) << pace;
  }
}

TEST(FabricsimCliTest, BadScenarioFileReportsLineAndColumn) {
  const ::rocetune::testing::TempDir dir("fabricsim-cli");
  const std::string path = dir.path() + "/broken.textproto";
  FILE* f = fopen(path.c_str(), "w");
  ASSERT_NE(f, nullptr);
  fputs("name: \"x\"\nseed: banana\n", f);
  fclose(f);
  Result r = RunSim("--scenario=" + path);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.output, HasSubstr("line 2, column 7"));
}

}  // namespace
