#ifndef ROCETUNE_CONTROLLER_ADMIN_ADMIN_SERVICE_H_
#define ROCETUNE_CONTROLLER_ADMIN_ADMIN_SERVICE_H_

#include <string>

#include "controller/controller_metrics.h"
#include "controller/cq_tag.h"
#include "controller/fleet/event_bus.h"
#include "controller/fleet/fleet.h"
#include "controller/store/store.h"
#include "controller/telemetry/telemetry_store.h"
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
  size_t max_watch_queue = 256;
};

// AdminService on gRPC's async API, on one of the agent streams' completion
// queues (see AgentService for why not the callback API). Every method is
// requested, so that none waits unanswered: policy and change RPCs belong to
// later issues and answer UNIMPLEMENTED. Handlers are short and run on the
// queue's thread.
//
// Order: RegisterService(this) before BuildAndStart; Start() after it, before
// the queue's thread runs. The queue's owner shuts it down only after every
// call counted in `calls` has ended.
class AdminService final : public v1::AdminService::AsyncService {
 public:
  explicit AdminService(const AdminDeps& deps) : deps_(deps) {}

  // Requests the first call of every method on `cq`.
  void Start(grpc::ServerCompletionQueue* cq, CallTracker* calls);

  const AdminDeps& deps() const { return deps_; }

 private:
  // The unary handlers, run on the queue's thread by the calls Start puts up.
  grpc::Status ListHosts(const v1::ListHostsRequest& req, v1::ListHostsResponse* resp);
  grpc::Status GetHost(const v1::GetHostRequest& req, v1::HostInfo* resp);
  grpc::Status FleetSummary(const v1::FleetSummaryRequest& req, v1::FleetSummaryResponse* resp);
  grpc::Status ListAudit(const v1::ListAuditRequest& req, v1::ListAuditResponse* resp);
  grpc::Status SetDesiredState(const v1::SetDesiredStateRequest& req,
                               v1::SetDesiredStateResponse* resp);

  const AdminDeps deps_;
};

}  // namespace rocetune::controller

#endif  // ROCETUNE_CONTROLLER_ADMIN_ADMIN_SERVICE_H_
