// rocetune-fabricsim --agents: one rocetune agent per simulated host connects
// to a controller over gRPC and reports the simulated NIC's counters and probes.
#include <sys/wait.h>

#include <cstdio>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "model/quantile_sketch.h"
#include "rocetune/v1/agent.grpc.pb.h"

namespace {

// Records what agents send; answers each Hello with a probe plan that makes
// the host probe every other host.
class FakeController final : public rocetune::v1::AgentService::Service {
 public:
  grpc::Status Connect(grpc::ServerContext*,
                       grpc::ServerReaderWriter<rocetune::v1::ControllerMessage,
                                                rocetune::v1::AgentMessage>* stream) override {
    rocetune::v1::AgentMessage m;
    std::string host;
    while (stream->Read(&m)) {
      absl::MutexLock lock(&mu_);
      if (m.has_hello()) {
        host = m.hello().host_id();
        hellos_[host] = m.hello();
        rocetune::v1::ControllerMessage plan;
        auto* p = plan.mutable_probe_plan();
        p->set_version("plan-1");
        p->set_nonce("n1");
        p->set_probes_per_second(2000);
        p->set_timeout_ms(100);
        for (const char* peer : {"h0", "h1", "h2"}) {
          if (host == peer) continue;
          auto* pp = p->add_peers();
          pp->set_host_id(peer);
          pp->set_peer_class("intra_tor");
        }
        stream->Write(plan);
      } else if (m.has_report()) {
        reports_[host].push_back(m.report());
      } else if (m.has_ack()) {
        acks_.insert(host + "/" + m.ack().version());
      } else if (m.has_nack()) {
        nacks_.push_back(host + ": " + m.nack().error());
      }
    }
    return grpc::Status::OK;
  }

  absl::Mutex mu_;
  std::map<std::string, rocetune::v1::Hello> hellos_;
  std::map<std::string, std::vector<rocetune::v1::Report>> reports_;
  std::set<std::string> acks_;
  std::vector<std::string> nacks_;
};

uint64_t CounterTotal(const std::vector<rocetune::v1::Report>& reports, const std::string& name) {
  uint64_t sum = 0;
  for (const auto& r : reports) {
    for (const auto& c : r.counters()) {
      if (c.name() == name) sum += c.delta();
    }
  }
  return sum;
}

TEST(FabricsimAgentsTest, AgentsReportSimulatedCountersAndProbes) {
  FakeController controller;
  int port = 0;
  grpc::ServerBuilder builder;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&controller);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  ASSERT_NE(server, nullptr);
  ASSERT_GT(port, 0);

  const std::string cmd =
      std::string(ROCETUNE_BINARY_DIR) +
      "/sim/rocetune-fabricsim --scenario=" + ROCETUNE_SOURCE_DIR +
      "/tests/sim/testdata/agents_incast.textproto --agents "
      "--controller=127.0.0.1:" +
      std::to_string(port) +
      " --duration=2s --pace=1 --sample_interval=200ms --output=none --switch_agents=false "
      "--log_level=warning 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
  const int status = pclose(p);
  server->Shutdown();
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << out;

  absl::MutexLock lock(&controller.mu_);
  ASSERT_EQ(controller.hellos_.size(), 3u) << out;
  for (const char* h : {"h0", "h1", "h2"}) {
    const rocetune::v1::Hello& hello = controller.hellos_[h];
    ASSERT_EQ(hello.devices_size(), 1) << h;
    EXPECT_EQ(hello.devices(0).name(), "mlx5_0");
    EXPECT_EQ(hello.devices(0).counter_source(), "sim");
    EXPECT_EQ(hello.labels().at("tor"), "0");
    EXPECT_EQ(hello.labels().at("sim"), "1");
    EXPECT_TRUE(controller.acks_.count(std::string(h) + "/plan-1")) << h;
    EXPECT_GE(controller.reports_[h].size(), 3u) << h;
  }
  EXPECT_TRUE(controller.nacks_.empty()) << controller.nacks_[0];
  EXPECT_GT(CounterTotal(controller.reports_["h1"], "tx_bytes"), 0u);
  EXPECT_GT(CounterTotal(controller.reports_["h0"], "rx_bytes"), 0u);
  EXPECT_GT(CounterTotal(controller.reports_["h0"], "cnp_sent"), 0u);
  EXPECT_GT(CounterTotal(controller.reports_["h1"], "cnp_handled"), 0u);
  uint64_t probes = 0;
  for (const auto& r : controller.reports_["h0"]) {
    for (const auto& w : r.latency()) {
      EXPECT_EQ(w.peer_class(), "intra_tor");
      auto sketch = rocetune::QuantileSketch::FromProto(w.network_rtt_seconds());
      ASSERT_TRUE(sketch.ok());
      probes += sketch->count();
      if (sketch->count() > 0) {
        EXPECT_GT(sketch->Quantile(0.5), 3e-6);
      }
    }
  }
  EXPECT_GT(probes, 100u);
}

}  // namespace
