#ifndef ROCETUNE_TESTS_CONTROLLER_TEST_AGENT_H_
#define ROCETUNE_TESTS_CONTROLLER_TEST_AGENT_H_

#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "grpcpp/grpcpp.h"
#include "rocetune/v1/admin.grpc.pb.h"
#include "rocetune/v1/agent.grpc.pb.h"

namespace rocetune::controller::testing {

// A real gRPC client playing one agent on its own channel. A reader thread
// collects the controller's messages.
class TestAgent {
 public:
  explicit TestAgent(int port) {
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);  // one connection per agent
    channel_ = grpc::CreateCustomChannel(absl::StrCat("127.0.0.1:", port),
                                         grpc::InsecureChannelCredentials(), args);
    stub_ = v1::AgentService::NewStub(channel_);
    stream_ = stub_->Connect(&ctx_);
    reader_ = std::thread([this] {
      v1::ControllerMessage m;
      while (stream_->Read(&m)) {
        absl::MutexLock lock(&mu_);
        // Probe plans arrive whenever the fleet changes; they have their own inbox.
        (m.has_probe_plan() ? plans_ : inbox_).push_back(m);
      }
      absl::MutexLock lock(&mu_);
      ended_ = true;
    });
  }
  ~TestAgent() { Finish(); }

  bool Send(const v1::AgentMessage& m) { return stream_->Write(m); }
  bool Hello(const std::string& host_id, std::map<std::string, std::string> labels = {},
             const std::string& current_version = "", const std::string& udp_endpoint = "") {
    v1::AgentMessage m;
    m.mutable_hello()->mutable_probe_endpoint()->set_udp_address(udp_endpoint);
    m.mutable_hello()->set_host_id(host_id);
    m.mutable_hello()->set_hostname(host_id + ".example");
    for (auto& [k, v] : labels) (*m.mutable_hello()->mutable_labels())[k] = v;
    m.mutable_hello()->set_current_version(current_version);
    // One RDMA device, so the controller accepts parameter sets for it.
    v1::NicDevice* dev = m.mutable_hello()->add_devices();
    dev->set_name("mlx5_0");
    dev->set_cc_param_layout("ofed_sysfs");
    return Send(m);
  }

  // Next ProbePlan from the controller, or nullopt after `timeout` / stream end.
  std::optional<v1::ProbePlan> NextProbePlan(absl::Duration timeout = absl::Seconds(5)) {
    absl::MutexLock lock(&mu_);
    auto ready = [this]() { return !plans_.empty() || ended_; };
    mu_.AwaitWithTimeout(absl::Condition(&ready), timeout);
    if (plans_.empty()) return std::nullopt;
    v1::ProbePlan p = plans_.front().probe_plan();
    plans_.pop_front();
    return p;
  }

  // Next message other than a ProbePlan, or nullopt after `timeout` / stream end.
  std::optional<v1::ControllerMessage> Next(absl::Duration timeout = absl::Seconds(5)) {
    absl::MutexLock lock(&mu_);
    auto ready = [this]() { return !inbox_.empty() || ended_; };
    mu_.AwaitWithTimeout(absl::Condition(&ready), timeout);
    if (inbox_.empty()) return std::nullopt;
    v1::ControllerMessage m = inbox_.front();
    inbox_.pop_front();
    return m;
  }

  // Waits until the controller ends the stream; returns its status.
  grpc::Status AwaitEnd(absl::Duration timeout = absl::Seconds(5)) {
    {
      absl::MutexLock lock(&mu_);
      auto ended = [this]() { return ended_; };
      if (!mu_.AwaitWithTimeout(absl::Condition(&ended), timeout)) {
        return grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, "test: stream did not end");
      }
    }
    return Finish();
  }

  // Half-closes, waits for the end and returns the final status.
  grpc::Status Finish() {
    if (finished_) return status_;
    finished_ = true;
    stream_->WritesDone();
    if (reader_.joinable()) reader_.join();
    status_ = stream_->Finish();
    return status_;
  }

  void Cancel() { ctx_.TryCancel(); }

 private:
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::AgentService::Stub> stub_;
  grpc::ClientContext ctx_;
  std::unique_ptr<grpc::ClientReaderWriter<v1::AgentMessage, v1::ControllerMessage>> stream_;
  std::thread reader_;
  absl::Mutex mu_;
  std::deque<v1::ControllerMessage> inbox_ ABSL_GUARDED_BY(mu_);
  std::deque<v1::ControllerMessage> plans_ ABSL_GUARDED_BY(mu_);
  bool ended_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ = false;
  grpc::Status status_;
};

inline std::unique_ptr<v1::AdminService::Stub> AdminStub(int port) {
  return v1::AdminService::NewStub(
      grpc::CreateChannel(absl::StrCat("127.0.0.1:", port), grpc::InsecureChannelCredentials()));
}

}  // namespace rocetune::controller::testing

#endif  // ROCETUNE_TESTS_CONTROLLER_TEST_AGENT_H_
