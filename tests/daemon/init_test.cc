#include "daemon/init.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/time/time.h"
#include "rocetune/v1/config.pb.h"
#include "tests/testing/test_support.h"

ABSL_FLAG(std::string, controller, "127.0.0.1:7070", "test flag");
ABSL_FLAG(std::string, sample_interval, "1s", "test flag");
ABSL_FLAG(bool, insecure_loopback, false, "test flag");

namespace rocetune {
namespace {

std::string WriteTemp(const std::string& text) {
  // One directory for the suite, removed at exit.
  static const ::rocetune::testing::TempDir dir("init-test");
  std::string path = dir.path() + "/cfg_" +
                     ::testing::UnitTest::GetInstance()->current_test_info()->name() + ".textproto";
  std::ofstream(path) << text;
  return path;
}

class ConfigFileTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    // As a daemon's main() would: the command line sets sample_interval.
    static char arg0[] = "init_test";
    static char arg1[] = "--sample_interval=2s";
    static char* argv[] = {arg0, arg1};
    absl::ParseCommandLine(2, argv);
  }
};

TEST_F(ConfigFileTest, AppliesFieldsToSameNamedFlagsCommandLineWins) {
  v1::AgentConfig cfg;
  ASSERT_TRUE(ReadTextProtoFile(WriteTemp("# comment\ncontroller: \"127.0.0.2:9000\"\n"
                                          "sample_interval: \"250ms\"\ninsecure_loopback: true\n"),
                                &cfg)
                  .ok());
  ASSERT_TRUE(ApplyConfigToFlags(cfg).ok());
  EXPECT_EQ(absl::GetFlag(FLAGS_controller), "127.0.0.2:9000");
  // Given on the command line, so the file does not override it.
  EXPECT_EQ(absl::GetFlag(FLAGS_sample_interval), "2s");
  EXPECT_TRUE(absl::GetFlag(FLAGS_insecure_loopback));
}

TEST_F(ConfigFileTest, SyntaxErrorNamesFileLineAndColumn) {
  v1::AgentConfig cfg;
  std::string path = WriteTemp("controller: \"x\"\nbogus_field: 3\n");
  absl::Status s = ReadTextProtoFile(path, &cfg);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find(path), std::string::npos) << s;
  EXPECT_NE(s.message().find("line 2"), std::string::npos) << s;
  EXPECT_NE(s.message().find("bogus_field"), std::string::npos) << s;
}

TEST_F(ConfigFileTest, MissingFileIsNotFound) {
  v1::AgentConfig cfg;
  EXPECT_EQ(ReadTextProtoFile("/nonexistent/rocetune.textproto", &cfg).code(),
            absl::StatusCode::kNotFound);
}

TEST_F(ConfigFileTest, FieldWithoutFlagIsRejected) {
  // ControllerConfig.window has no flag in this test binary.
  v1::ControllerConfig cfg;
  cfg.set_window("10s");
  absl::Status s = ApplyConfigToFlags(cfg);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("window"), std::string::npos);
}

TEST(LabelsTest, ParsesAndRejects) {
  std::vector<std::pair<std::string, std::string>> out;
  ASSERT_TRUE(ParseLabels("rack=r1, pod=p2,role=", &out).ok());
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0], (std::pair<std::string, std::string>{"rack", "r1"}));
  EXPECT_EQ(out[1], (std::pair<std::string, std::string>{"pod", "p2"}));
  EXPECT_EQ(out[2].second, "");
  EXPECT_EQ(ParseLabels("rack", &out).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseLabels("=v", &out).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(ParseLabels("", &out).ok());
  EXPECT_TRUE(out.empty());
}

}  // namespace
}  // namespace rocetune
