// rocetune-fabricsim --agents over mutual TLS (issue 28 item 9: the simulated
// path forced plaintext, where the controller enforces no roles): every
// simulated agent presents its own certificate (CN = its host id) to a
// controller that accepts TLS only, and a missing certificate stops the
// simulator at start, naming the file.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "tests/integration/subprocess.h"

namespace rocetune {
namespace {

using ::rocetune::testing::BuiltBinary;
using ::rocetune::testing::ControllerLaunch;
using ::rocetune::testing::ControllerProcess;
using ::rocetune::testing::MakeTempDir;
using ::rocetune::testing::RunCommand;
using ::rocetune::testing::Subprocess;

constexpr int kHosts = 3;  // the scenario: a sender, a victim, a receiver

bool MakePki(const std::string& dir, const std::string& args) {
  const std::string cmd = absl::StrCat(ROCETUNE_SOURCE_DIR, "/deploy/pki/make-dev-pki.sh -o ", dir,
                                       " ", args, " >/dev/null");
  return std::system(cmd.c_str()) == 0;
}

std::vector<std::string> FabricArgs(int port, const std::string& dir, const std::string& pki) {
  return {absl::StrCat("--scenario=", ROCETUNE_SOURCE_DIR,
                       "/sim/scenarios/dcqcn_paper_40g_2flows.textproto"),
          "--agents",
          absl::StrCat("--controller=127.0.0.1:", port),
          "--pace=0.05",
          "--duration=100000s",
          "--sample_interval=250ms",
          "--switch_agents=false",
          "--output=none",
          absl::StrCat("--state_dir=", dir, "/agents"),
          absl::StrCat("--tls_dir=", pki),
          absl::StrCat("--tls_ca=", pki, "/ca.pem"),
          "--tls_server_name=localhost"};
}

TEST(FabricsimTlsTest, EverySimulatedAgentConnectsWithItsOwnCertificate) {
  const std::string dir = MakeTempDir("fabtls");
  const std::string pki = dir + "/pki";
  ASSERT_TRUE(MakePki(pki, "-a h0 -a h1 -a h2 -u carol:viewer"));
  ControllerProcess controller(ControllerLaunch{
      .dir = dir,
      .flags = {absl::StrCat("--tls_cert=", pki, "/controller.pem"),
                absl::StrCat("--tls_key=", pki, "/controller.key"),
                absl::StrCat("--tls_ca=", pki, "/ca.pem"),
                absl::StrCat("--roles_file=", pki, "/roles.textproto"), "--window=1s"}});
  ASSERT_TRUE(controller.Start()) << controller.Log();
  Subprocess fabric(BuiltBinary("sim/rocetune-fabricsim"),
                    FabricArgs(controller.grpc_port(), dir, pki), dir + "/fabricsim.log");
  ASSERT_TRUE(fabric.Start());
  // carol (viewer, over mTLS) lists the hosts until all are connected.
  const std::vector<std::string> ctl = {
      absl::StrCat("--controller=127.0.0.1:", controller.grpc_port()),
      absl::StrCat("--tls_cert=", pki, "/user-carol.pem"),
      absl::StrCat("--tls_key=", pki, "/user-carol.key"),
      absl::StrCat("--tls_ca=", pki, "/ca.pem"),
      "--tls_server_name=localhost",
      "hosts",
      "-o",
      "json"};
  std::string out;
  int connected = 0;
  ::rocetune::testing::Eventually(
      [&] {
        if (!fabric.Running() || RunCommand(BuiltBinary("cli/rocetunectl"), ctl, &out) != 0) {
          return true;  // checked below, with the logs
        }
        connected = 0;
        for (absl::string_view l : absl::StrSplit(out, '\n')) {
          connected += absl::StrContains(l, "HOST_CONNECTED") ? 1 : 0;
        }
        return connected == kHosts;
      },
      absl::Seconds(30), absl::Milliseconds(200));
  EXPECT_EQ(connected, kHosts) << out << fabric.Log() << controller.Log();
  EXPECT_TRUE(fabric.Running()) << fabric.Log();
  // With TLS files the controller serves TLS only (the launcher's
  // --insecure_loopback then has no effect) and admits a host only under its
  // certificate's CN: connected means each agent presented its own
  // agent-<id>.pem.
}

TEST(FabricsimTlsTest, AMissingCertificateStopsTheSimulatorNamingTheFile) {
  const std::string dir = MakeTempDir("fabtls");
  const std::string pki = dir + "/pki";
  ASSERT_TRUE(MakePki(pki, "-a h0 -a h1"));  // none for h2
  std::string out;
  const int rc = RunCommand(BuiltBinary("sim/rocetune-fabricsim"), FabricArgs(1, dir, pki), &out);
  EXPECT_EQ(rc, 2) << out;
  EXPECT_TRUE(absl::StrContains(out, "agent-h2.pem")) << out;
}

}  // namespace
}  // namespace rocetune
