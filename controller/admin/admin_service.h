#ifndef ROCETUNE_CONTROLLER_ADMIN_ADMIN_SERVICE_H_
#define ROCETUNE_CONTROLLER_ADMIN_ADMIN_SERVICE_H_

#include <atomic>
#include <chrono>
#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "controller/admin/authorizer.h"
#include "controller/admin/identity.h"
#include "controller/controller_metrics.h"
#include "controller/fleet/event_bus.h"
#include "controller/fleet/fleet.h"
#include "controller/rollout/executor.h"
#include "controller/rollout/rollout_manager.h"
#include "controller/store/store.h"
#include "controller/telemetry/telemetry_store.h"
#include "controller/transport/cq_tag.h"
#include "daemon/clock.h"
#include "grpcpp/grpcpp.h"
#include "rocetune/v1/admin.grpc.pb.h"

namespace rocetune::controller {

struct AdminDeps {
  Fleet* fleet;
  TelemetryStore* telemetry;
  Store* store;  // may be null: ListAudit then fails with kFailedPrecondition
  EventBus* events;
  ControllerMetrics* metrics;
  Clock* clock;
  RolloutManager* rollout;  // policies, changes, campaigns
  size_t max_watch_queue = 256;
  // Largest admin request accepted (--max_message_bytes).
  size_t max_message_bytes = 1 << 20;
  // Roles; null when they are not enforced (plaintext on loopback).
  const Authorizer* authorizer = nullptr;
};

// AdminService on gRPC's async API, on one of the agent streams' completion
// queues (see AgentService for why not the callback API). Every method is
// requested, so that none waits unanswered. Read-only fleet calls are short
// and answered on the queue's thread; policy, change and campaign calls (and
// manual pushes) run on the rollout manager's executor and answer from there,
// so no SQLite write runs on a queue thread; rehearsals run the simulator on a
// thread of their own.
//
// Order: RegisterService(this) before BuildAndStart; Start() after it, before
// the queue's thread runs. The queue's owner shuts it down only after every
// call counted in `calls` has ended.
class AdminService final : public v1::AdminService::AsyncService {
 public:
  explicit AdminService(const AdminDeps& deps) : deps_(deps) {}
  ~AdminService() override;

  // Requests the first call of every method on `cq`.
  void Start(grpc::ServerCompletionQueue* cq, CallTracker* calls);

  const AdminDeps& deps() const { return deps_; }

  // Whether the caller of `ctx` may call `method` (an AdminService method
  // name): OK when roles are not enforced; else the authorizer's decision,
  // and with roles enforced every call, allowed or denied, is appended to the
  // audit log (on the control loop when there is one).
  grpc::Status Authorize(const grpc::ServerContext& ctx, const char* method);
  // With roles enforced, appends the outcome of an allowed call to the audit log.
  void AuditOutcome(const grpc::ServerContext& ctx, const char* method,
                    const grpc::Status& outcome);

  // Runs `op` on the control loop and answers with its result from there
  // (UNAVAILABLE when the controller is stopping).
  template <typename Resp>
  void OnExecutor(std::function<absl::StatusOr<Resp>()> op,
                  std::function<void(grpc::Status, Resp)> done);
  // Runs the change's rehearsal: knobs from the control loop, the simulator on
  // the rehearsal thread, the result recorded on the control loop. The
  // simulation stops (and the call fails) when the call's `deadline` passes,
  // after kMaxRehearsal of wall time, or when StopRehearsals is called.
  void Rehearse(const v1::RehearseChangeRequest& req, const Identity& who,
                std::chrono::system_clock::time_point deadline,
                std::function<void(grpc::Status, v1::Rehearsal)> done);
  // Stops every rehearsal running or queued within a millisecond of simulated
  // time (the controller's shutdown, before it waits for calls to end).
  void StopRehearsals() { stopping_rehearsals_.store(true); }
  // The longest a rehearsal may run, whatever the caller's deadline.
  static constexpr absl::Duration kMaxRehearsal = absl::Minutes(5);

 private:
  // The unary fleet handlers, run on the queue's thread.
  grpc::Status ListHosts(const v1::ListHostsRequest& req, v1::ListHostsResponse* resp);
  grpc::Status GetHost(const v1::GetHostRequest& req, v1::HostInfo* resp);
  grpc::Status FleetSummary(const v1::FleetSummaryRequest& req, v1::FleetSummaryResponse* resp);
  grpc::Status ListAudit(const v1::ListAuditRequest& req, v1::ListAuditResponse* resp);
  grpc::Status VerifyAudit(const v1::VerifyAuditRequest& req, v1::VerifyAuditResponse* resp);

  // One audit row: "admin_denied" for PERMISSION_DENIED, else "admin_call",
  // with the method as subject and the outcome as detail.
  void AuditCall(const Identity& who, const std::string& method, const grpc::Status& outcome);

  const AdminDeps deps_;
  std::atomic<bool> stopping_rehearsals_{false};
  Executor rehearsals_;
};

}  // namespace rocetune::controller

#endif  // ROCETUNE_CONTROLLER_ADMIN_ADMIN_SERVICE_H_
