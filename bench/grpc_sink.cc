// grpc_sink: the bare AgentService baseline for controller_load_bench. Built
// from the same proto, on gRPC's callback API (the controller serves agent streams
// on the async API over several completion queues); it accepts
// every Connect stream, reads messages and only counts Reports and their delay
// (receipt time minus the report's end timestamp), exposed on /metrics with the
// same histogram buckets as the controller's rocetune_controller_report_delay_seconds.
#include <climits>
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "controller/controller_metrics.h"
#include "daemon/metrics_exposer.h"
#include "daemon/shutdown.h"
#include "grpcpp/grpcpp.h"
#include "prometheus/counter.h"
#include "prometheus/histogram.h"
#include "rocetune/v1/agent.grpc.pb.h"

ABSL_FLAG(std::string, listen, "127.0.0.1:0", "gRPC address; port 0 picks a free port.");
ABSL_FLAG(std::string, metrics_address, "127.0.0.1:0", "/metrics address.");
ABSL_FLAG(std::string, ready_file, "", "Writes {\"grpc_port\":N,\"metrics_port\":M} here.");

namespace {

using rocetune::v1::AgentMessage;
using rocetune::v1::ControllerMessage;

struct SinkMetrics {
  prometheus::Counter* received;
  prometheus::Histogram* delay;
};

class SinkStream final : public grpc::ServerBidiReactor<AgentMessage, ControllerMessage> {
 public:
  explicit SinkStream(SinkMetrics m) : m_(m) { StartRead(&in_); }
  void OnReadDone(bool ok) override {
    if (!ok) {
      Finish(grpc::Status::OK);
      return;
    }
    if (in_.has_report()) {
      m_.received->Increment();
      double delay =
          absl::ToDoubleSeconds(absl::Now() - absl::FromUnixNanos(in_.report().end_unix_nanos()));
      m_.delay->Observe(delay < 0 ? 0 : delay);
    }
    StartRead(&in_);
  }
  void OnDone() override { delete this; }

 private:
  SinkMetrics m_;
  AgentMessage in_;
};

class SinkService final : public rocetune::v1::AgentService::CallbackService {
 public:
  explicit SinkService(SinkMetrics m) : m_(m) {}
  grpc::ServerBidiReactor<AgentMessage, ControllerMessage>* Connect(
      grpc::CallbackServerContext*) override {
    return new SinkStream(m_);
  }

 private:
  SinkMetrics m_;
};

}  // namespace

int main(int argc, char** argv) {
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);  // as the controller
  rocetune::Shutdown::Install();
  absl::ParseCommandLine(argc, argv);
  auto registry = std::make_shared<prometheus::Registry>();
  SinkMetrics m;
  m.received = &prometheus::BuildCounter()
                    .Name("rocetune_sink_reports_received_total")
                    .Help("Reports read.")
                    .Register(*registry)
                    .Add({});
  m.delay = &prometheus::BuildHistogram()
                 .Name("rocetune_sink_report_delay_seconds")
                 .Help("Receipt time minus the report's end timestamp.")
                 .Register(*registry)
                 .Add({}, rocetune::controller::ReportDelayBuckets());
  SinkService service(m);
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(absl::GetFlag(FLAGS_listen), grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&service);
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  // The controller's transport settings, so that the two differ in their work
  // only: no HTTP/2 keepalive pings (gRPC's server default, every 2 hours,
  // re-arms a timer on every read) and no BDP probing (a PING answered by the
  // agent every few Reports).
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, INT_MAX);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_BDP_PROBE, 0);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || port == 0) {
    std::fprintf(stderr, "grpc_sink: cannot listen on %s\n", absl::GetFlag(FLAGS_listen).c_str());
    return 1;
  }
  auto exposer = rocetune::MetricsExposer::Start(absl::GetFlag(FLAGS_metrics_address), registry);
  if (!exposer.ok()) {
    std::fprintf(stderr, "grpc_sink: %s\n", std::string(exposer.status().message()).c_str());
    return 1;
  }
  std::string ready = absl::GetFlag(FLAGS_ready_file);
  if (!ready.empty()) {
    std::string tmp = ready + ".tmp";
    {
      std::ofstream out(tmp);
      out << "{\"grpc_port\":" << port << ",\"metrics_port\":" << (*exposer)->port() << "}\n";
    }
    std::rename(tmp.c_str(), ready.c_str());
  }
  rocetune::Shutdown::Wait();
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(500));
  server->Wait();
  return 0;
}
