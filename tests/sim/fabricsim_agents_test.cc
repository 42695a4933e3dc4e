// rocetune-fabricsim --agents: one rocetune agent per simulated host connects
// to a controller over gRPC and reports the simulated NIC's counters and probes.
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "model/quantile_sketch.h"
#include "rocetune/v1/agent.grpc.pb.h"
#include "tests/testing/test_support.h"

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

// Runs rocetune-fabricsim --agents on tests/sim/testdata/<scenario>.textproto
// for 2 s of simulated time at real pace against `controller`, with `flags`
// added; its exit code (-1 when it could not run) and output.
int RunFabricsim(FakeController& controller, const std::string& scenario, const std::string& flags,
                 std::string* out) {
  int port = 0;
  grpc::ServerBuilder builder;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&controller);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || port <= 0) return -1;
  const int code = rocetune::testing::RunShell(
      absl::StrCat(ROCETUNE_BINARY_DIR, "/sim/rocetune-fabricsim --scenario=", ROCETUNE_SOURCE_DIR,
                   "/tests/sim/testdata/", scenario,
                   ".textproto --agents --controller=127.0.0.1:", port,
                   " --duration=2s --pace=1 --sample_interval=200ms --output=none "
                   "--switch_agents=false ",
                   flags),
      out);
  server->Shutdown();
  return code;
}

TEST(FabricsimAgentsTest, AgentsReportSimulatedCountersAndProbes) {
  FakeController controller;
  std::string out;
  ASSERT_EQ(RunFabricsim(controller, "agents_incast", "--log_level=warning", &out), 0) << out;

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
  for (const auto& [host, reports] : controller.reports_) {
    for (const auto& r : reports) EXPECT_EQ(r.jobs_size(), 0) << host << ": no job runs there";
  }
}

// Issue 24: the simulated job's exchanges reach the controller the way a real
// job's would: through each host's agent socket (the C client), in the
// agents' reports. Every event fabricsim sent is reported (it waits two
// rounds at the scenario's end for the last ones), every ring host reports
// every step, each over its 64 KB chunk, and no step is faster than the chunk
// takes at line rate.
TEST(FabricsimAgentsTest, TheSimulatedJobReportsThroughTheAgentsJobSockets) {
  FakeController controller;
  std::string out;
  ASSERT_EQ(
      RunFabricsim(controller, "agents_allreduce", "--log_level=info --job_name=sim/ring", &out), 0)
      << out;
  absl::MutexLock lock(&controller.mu_);
  ASSERT_EQ(controller.reports_.size(), 3u) << out;
  std::map<std::string, uint64_t> events;
  for (const auto& [host, reports] : controller.reports_) {
    for (const auto& r : reports) {
      for (const auto& j : r.jobs()) {
        EXPECT_EQ(j.job(), "sim/ring");
        EXPECT_EQ(j.op(), "allreduce");
        auto sketch = rocetune::QuantileSketch::FromProto(j.seconds());
        ASSERT_TRUE(sketch.ok()) << sketch.status();
        events[host] += sketch->count();
        EXPECT_EQ(j.bytes(), 65536 * sketch->count());
        // 64 KB at 25 Gb/s: 21 us.
        EXPECT_GT(sketch->min(), 20e-6) << host;
      }
    }
  }
  ASSERT_EQ(events.size(), 3u) << out;
  // A step takes at least its 21 us of transfer and then 1 ms of compute:
  // at most 1958 steps in 2 s of simulated time; each host reports each.
  EXPECT_GT(events["h0"], 1000u);
  EXPECT_LE(events["h0"], 1958u);
  EXPECT_EQ(events["h1"], events["h0"]);
  EXPECT_EQ(events["h2"], events["h0"]);
  EXPECT_NE(out.find(absl::StrCat("events_sent=", 3 * events["h0"], " events_dropped=0")),
            std::string::npos)
      << "every event sent, none dropped, all reported: " << out;
}

}  // namespace
