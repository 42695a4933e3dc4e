// Every binary documents its own flags in --help (exit 0) and refuses a usage
// error (unknown flag, bad value, missing value) with a message and exit 2.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "google/protobuf/descriptor.h"
#include "rocetune/v1/config.pb.h"
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

// The flags `binary` defines itself (--helpfull's sections from its own
// sources: agent/, controller/, daemon/), not Abseil's or gRPC's.
std::set<std::string> OwnFlags(const std::string& binary) {
  std::string out;
  EXPECT_EQ(RunCommand(BuiltBinary(binary), {"--helpfull"}, &out), 0) << out;
  std::set<std::string> flags;
  bool own = false;
  for (absl::string_view line : absl::StrSplit(out, '\n')) {
    if (absl::StartsWith(line, "  Flags from ")) {
      const absl::string_view file = line.substr(13);
      own = absl::StartsWith(file, "agent/") || absl::StartsWith(file, "controller/") ||
            absl::StartsWith(file, "daemon/");
      continue;
    }
    if (!own || !absl::StartsWith(line, "    --")) continue;
    const absl::string_view rest = line.substr(6);
    flags.insert(std::string(rest.substr(0, rest.find_first_of(" ("))));
  }
  return flags;
}

// A daemon run from its config file (--config, as the systemd units and
// deploy/examples do) can set every flag an operator sets: each of its own
// flags has a config field of the same name, but for `cli_only`; and no field
// names a flag the daemon lacks (ApplyConfigToFlags would refuse the file).
void ExpectConfigCoversFlags(const std::string& binary, const google::protobuf::Descriptor* config,
                             const std::set<std::string>& cli_only) {
  const std::set<std::string> flags = OwnFlags(binary);
  ASSERT_GT(flags.size(), 10u) << binary << ": --helpfull not parsed";
  std::set<std::string> fields;
  for (int i = 0; i < config->field_count(); ++i) fields.insert(config->field(i)->name());
  for (const std::string& flag : flags) {
    if (cli_only.count(flag) != 0) continue;
    EXPECT_EQ(fields.count(flag), 1u)
        << binary << " --" << flag << " has no " << config->name() << " field";
  }
  for (const std::string& field : fields) {
    EXPECT_EQ(flags.count(field), 1u)
        << config->name() << "." << field << " names no flag of " << binary;
  }
}

TEST(DaemonConfigTest, EveryFlagAnOperatorSetsHasAConfigField) {
  ExpectConfigCoversFlags("agent/rocetune-agent", v1::AgentConfig::descriptor(),
                          {"config", "once", "output", "fault_write_delay"});
  ExpectConfigCoversFlags("controller/rocetune-controller", v1::ControllerConfig::descriptor(),
                          {"config"});
}

// Startup failures: a configuration error exits 2 on both daemons (the units'
// RestartPreventExitStatus=2: a restart cannot fix it), anything a restart
// may fix (a port in use) exits 1.
TEST(DaemonExitCodesTest, ConfigurationErrorsExitTwoAndAPortInUseExitsOne) {
  const std::vector<std::string> tls = {"--tls_cert=/nonexistent/c.pem",
                                        "--tls_key=/nonexistent/k.pem",
                                        "--tls_ca=/nonexistent/ca.pem"};
  for (const char* daemon : {"agent/rocetune-agent", "controller/rocetune-controller"}) {
    std::vector<std::string> args = tls;
    args.push_back("--metrics_address=127.0.0.1:0");
    if (std::string(daemon) == "agent/rocetune-agent") {
      args.push_back("--controller=127.0.0.1:1");
    } else {
      args.push_back("--listen=127.0.0.1:0");
    }
    std::string out;
    EXPECT_EQ(RunCommand(BuiltBinary(daemon), args, &out), 2) << daemon << ":\n" << out;
    EXPECT_NE(out.find("--tls_cert=/nonexistent/c.pem"), std::string::npos) << daemon << out;
  }
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(listen(fd, 1), 0);
  socklen_t len = sizeof(addr);
  ASSERT_EQ(getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  std::string out;
  const int rc = RunCommand(BuiltBinary("controller/rocetune-controller"),
                            {"--insecure_loopback", "--metrics_address=127.0.0.1:0",
                             "--listen=127.0.0.1:" + std::to_string(ntohs(addr.sin_port))},
                            &out);
  close(fd);
  EXPECT_EQ(rc, 1) << out;
  EXPECT_NE(out.find("cannot listen"), std::string::npos) << out;
}

// fabricsim --controller_of: a malformed pair or a host the scenario does not
// have is a usage error naming it (exit 2), before any agent connects.
TEST(FabricsimFlagsTest, ControllerOfRefusesAMalformedPairAndAnUnknownHost) {
  const std::string scenario =
      std::string(ROCETUNE_SOURCE_DIR) + "/sim/scenarios/incast_background_32_hosts.textproto";
  std::string out;
  for (const auto& [pair, says] : std::vector<std::pair<std::string, std::string>>{
           {"h3", "--controller_of=h3: want host=host:port"},
           {"h99=127.0.0.5:1", "--controller_of: h99 is not a host of the scenario"}}) {
    const int rc = RunCommand(BuiltBinary("sim/rocetune-fabricsim"),
                              {"--scenario=" + scenario, "--agents", "--controller=127.0.0.1:1",
                               "--controller_of=" + pair, "--duration=1s", "--output=none"},
                              &out);
    EXPECT_EQ(rc, 2) << pair << ":\n" << out;
    EXPECT_NE(out.find(says), std::string::npos) << out;
  }
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
        BinaryCase{"sim/rocetune-fabricsim", {"scenario", "set", "controller_of"}, "--pace=fast"},
        BinaryCase{"agent/probe/rocetune-probe",
                   {"mode", "transport", "listen", "peers", "rate", "log_level"},
                   "--rate=many"}));

}  // namespace
}  // namespace rocetune
