#ifndef ROCETUNE_TESTS_CLI_FAKE_ADMIN_H_
#define ROCETUNE_TESTS_CLI_FAKE_ADMIN_H_

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "grpcpp/grpcpp.h"
#include "rocetune/v1/admin.grpc.pb.h"

namespace rocetune::cli::testing {

// An AdminService with canned answers that records what the CLI sent.
class FakeAdmin final : public v1::AdminService::Service {
 public:
  int hosts = 2500;                      // ListHosts fleet size, 8 NICs each
  uint32_t max_page = 500;               // ListHosts page cap
  int acks_after_polls = 2;              // GetHost reports the ack after this many polls
  std::vector<std::string> watch_kinds;  // events Watch sends, then it waits to be cancelled
  int64_t watch_boot = 42;               // the boot its events carry (seq 1, 2, ...)

  grpc::Status ListHosts(grpc::ServerContext* ctx, const v1::ListHostsRequest* req,
                         v1::ListHostsResponse* resp) override;
  grpc::Status GetHost(grpc::ServerContext* ctx, const v1::GetHostRequest* req,
                       v1::HostInfo* resp) override;
  grpc::Status SetDesiredState(grpc::ServerContext* ctx, const v1::SetDesiredStateRequest* req,
                               v1::SetDesiredStateResponse* resp) override;
  grpc::Status ApplyPolicy(grpc::ServerContext* ctx, const v1::ApplyPolicyRequest* req,
                           v1::ApplyPolicyResponse* resp) override;
  grpc::Status GetChange(grpc::ServerContext* ctx, const v1::GetChangeRequest* req,
                         v1::Change* resp) override;
  grpc::Status Approve(grpc::ServerContext* ctx, const v1::ChangeActionRequest* req,
                       v1::Change* resp) override;
  grpc::Status ProposeChange(grpc::ServerContext* ctx, const v1::ProposeChangeRequest* req,
                             v1::Change* resp) override;
  grpc::Status Watch(grpc::ServerContext* ctx, const v1::WatchRequest* req,
                     grpc::ServerWriter<v1::Event>* writer) override;

  // What the last calls carried.
  std::string last_actor() const;
  int list_hosts_calls() const { return list_hosts_calls_; }
  v1::ChangeActionRequest last_action() const;
  v1::ApplyPolicyRequest last_apply() const;
  v1::ProposeChangeRequest last_propose() const;
  v1::WatchRequest last_watch() const;

 private:
  void Record(grpc::ServerContext* ctx);
  mutable absl::Mutex mu_;
  std::string actor_;
  v1::ChangeActionRequest action_;
  v1::ApplyPolicyRequest apply_;
  v1::ProposeChangeRequest propose_;
  v1::WatchRequest watch_;
  std::atomic<int> list_hosts_calls_{0};
  std::atomic<int> get_host_calls_{0};
};

// A server on 127.0.0.1 (port 0 picks one) running `service`.
struct FakeServer {
  std::unique_ptr<grpc::Server> server;
  int port = 0;
  static FakeServer Start(FakeAdmin* service, int port = 0);
  void Stop();  // cancels running calls within 100 ms
};

}  // namespace rocetune::cli::testing

#endif  // ROCETUNE_TESTS_CLI_FAKE_ADMIN_H_
