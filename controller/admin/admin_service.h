#ifndef ROCETUNE_CONTROLLER_ADMIN_ADMIN_SERVICE_H_
#define ROCETUNE_CONTROLLER_ADMIN_ADMIN_SERVICE_H_

#include "controller/controller_metrics.h"
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

// AdminService on the callback API. Policy and change RPCs belong to later
// issues and answer UNIMPLEMENTED.
class AdminService final : public v1::AdminService::CallbackService {
 public:
  explicit AdminService(const AdminDeps& deps) : deps_(deps) {}

  grpc::ServerUnaryReactor* ListHosts(grpc::CallbackServerContext* ctx,
                                      const v1::ListHostsRequest* req,
                                      v1::ListHostsResponse* resp) override;
  grpc::ServerUnaryReactor* GetHost(grpc::CallbackServerContext* ctx, const v1::GetHostRequest* req,
                                    v1::HostInfo* resp) override;
  grpc::ServerUnaryReactor* FleetSummary(grpc::CallbackServerContext* ctx,
                                         const v1::FleetSummaryRequest* req,
                                         v1::FleetSummaryResponse* resp) override;
  grpc::ServerUnaryReactor* ListAudit(grpc::CallbackServerContext* ctx,
                                      const v1::ListAuditRequest* req,
                                      v1::ListAuditResponse* resp) override;
  grpc::ServerUnaryReactor* SetDesiredState(grpc::CallbackServerContext* ctx,
                                            const v1::SetDesiredStateRequest* req,
                                            v1::SetDesiredStateResponse* resp) override;
  grpc::ServerWriteReactor<v1::Event>* Watch(grpc::CallbackServerContext* ctx,
                                             const v1::WatchRequest* req) override;

 private:
  const AdminDeps deps_;
};

}  // namespace rocetune::controller

#endif  // ROCETUNE_CONTROLLER_ADMIN_ADMIN_SERVICE_H_
