// Every binary documents its own flags in --help (exit 0) and refuses a usage
// error (unknown flag, bad value, missing value) with a message and exit 2.
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
  const char* bad_value;           // a flag=value the binary must refuse as a usage error
};

class BinariesTest : public ::testing::TestWithParam<BinaryCase> {};

TEST_P(BinariesTest, HelpListsFlagsAndBadFlagFails) {
  const BinaryCase& c = GetParam();
  std::string out;
  int rc = RunCommand(BuiltBinary(c.path), {"--help"}, &out);
  EXPECT_EQ(rc, 0) << c.path << " --help:\n" << out;
  for (const char* flag : c.flags) {
    EXPECT_NE(out.find(std::string("--") + flag), std::string::npos)
        << c.path << " --help does not document --" << flag << ":\n"
        << out;
  }
  EXPECT_EQ(out.find("absl/"), std::string::npos) << "help leaks Abseil's own flags";
  EXPECT_EQ(out.find("No flags matched"), std::string::npos) << out;
  rc = RunCommand(BuiltBinary(c.path), {"--no_such_flag=1"}, &out);
  EXPECT_EQ(rc, 2) << out;
  EXPECT_NE(out.find("no_such_flag"), std::string::npos) << out;
  const std::string bad = c.bad_value;
  rc = RunCommand(BuiltBinary(c.path), {bad}, &out);
  EXPECT_EQ(rc, 2) << c.path << " " << bad << ":\n" << out;
  const std::string name = bad.substr(0, bad.find('='));
  EXPECT_NE(out.find(name), std::string::npos) << "the message names " << name << ":\n" << out;
}

INSTANTIATE_TEST_SUITE_P(
    All, BinariesTest,
    ::testing::Values(
        BinaryCase{
            "agent/rocetune-agent",
            {"host_id", "controller", "metrics_address", "sysfs_root", "debugfs_root", "state_dir",
             "labels", "sample_interval", "once", "output", "config", "log_level"},
            "--tls_refresh=soon"},
        BinaryCase{"agent/rocetune-agent",
                   {"drift_interval", "probe", "kernel_netdevs"},
                   "--log_level=loud"},
        BinaryCase{"controller/rocetune-controller",
                   {"listen", "metrics_address", "state_dir", "insecure_loopback", "config",
                    "log_level", "ready_file"},
                   "--window=forever"},
        BinaryCase{"controller/rocetune-controller",
                   {"observe_only", "rollout_tick"},
                   "--max_message_bytes=lots"},
        BinaryCase{"cli/rocetunectl", {"controller", "output", "selector"}, "--timeout=never"},
        BinaryCase{"sim/rocetune-fabricsim", {"scenario", "set"}, "--pace=fast"},
        BinaryCase{"agent/probe/rocetune-probe",
                   {"mode", "transport", "listen", "peers", "rate", "log_level"},
                   "--rate=many"}));

}  // namespace
}  // namespace rocetune
