// Every binary documents its flags in --help and refuses a bad flag with a
// message and a non-zero exit.
#include <gtest/gtest.h>

#include <string>

#include "tests/integration/subprocess.h"

namespace rocetune {
namespace {

using ::rocetune::testing::BuiltBinary;
using ::rocetune::testing::RunCommand;

struct BinaryCase {
  const char* path;
  std::vector<const char*> flags;  // flags that --help must document
};

class BinariesTest : public ::testing::TestWithParam<BinaryCase> {};

TEST_P(BinariesTest, HelpListsFlagsAndBadFlagFails) {
  const BinaryCase& c = GetParam();
  std::string out;
  int rc = RunCommand(BuiltBinary(c.path), {"--help"}, &out);
  // absl exits 1 after --help; what matters is that every flag is documented.
  EXPECT_GE(rc, 0) << out;
  for (const char* flag : c.flags) {
    EXPECT_NE(out.find(std::string("--") + flag), std::string::npos)
        << c.path << " --help does not document --" << flag << ":\n"
        << out;
  }
  EXPECT_EQ(out.find("absl/"), std::string::npos) << "help leaks Abseil's own flags";
  rc = RunCommand(BuiltBinary(c.path), {"--no_such_flag=1"}, &out);
  EXPECT_NE(rc, 0);
  EXPECT_NE(out.find("no_such_flag"), std::string::npos) << out;
}

INSTANTIATE_TEST_SUITE_P(
    All, BinariesTest,
    ::testing::Values(BinaryCase{"agent/rocetune-agent",
                                 {"host_id", "controller", "metrics_address", "sysfs_root",
                                  "debugfs_root", "state_dir", "labels", "sample_interval", "once",
                                  "output", "config", "log_level"}},
                      BinaryCase{"controller/rocetune-controller",
                                 {"listen", "metrics_address", "state_dir", "insecure_loopback",
                                  "config", "log_level", "ready_file"}},
                      BinaryCase{"cli/rocetunectl", {"controller", "output", "selector"}},
                      BinaryCase{"sim/rocetune-fabricsim", {"scenario", "set"}}));

}  // namespace
}  // namespace rocetune
