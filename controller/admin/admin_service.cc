#include "controller/admin/admin_service.h"

#include <map>
#include <string>

#include "absl/strings/str_cat.h"
#include "controller/admin/watch_stream.h"

namespace rocetune::controller {
namespace {

grpc::Status ToGrpc(const absl::Status& s) {
  return grpc::Status(static_cast<grpc::StatusCode>(s.code()), std::string(s.message()));
}

std::map<std::string, std::string> ToMap(const google::protobuf::Map<std::string, std::string>& m) {
  return std::map<std::string, std::string>(m.begin(), m.end());
}

grpc::ServerUnaryReactor* Done(grpc::CallbackServerContext* ctx, const grpc::Status& s) {
  grpc::ServerUnaryReactor* r = ctx->DefaultReactor();
  r->Finish(s);
  return r;
}

}  // namespace

grpc::ServerUnaryReactor* AdminService::ListHosts(grpc::CallbackServerContext* ctx,
                                                  const v1::ListHostsRequest* req,
                                                  v1::ListHostsResponse* resp) {
  for (v1::HostInfo& h : deps_.fleet->ListHosts(ToMap(req->selector()))) {
    *resp->add_hosts() = std::move(h);
  }
  return Done(ctx, grpc::Status::OK);
}

grpc::ServerUnaryReactor* AdminService::GetHost(grpc::CallbackServerContext* ctx,
                                                const v1::GetHostRequest* req, v1::HostInfo* resp) {
  if (req->host_id().empty()) {
    return Done(ctx, grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "host_id is empty"));
  }
  absl::StatusOr<v1::HostInfo> info = deps_.fleet->GetHost(req->host_id());
  if (!info.ok()) return Done(ctx, ToGrpc(info.status()));
  *resp = *std::move(info);
  return Done(ctx, grpc::Status::OK);
}

grpc::ServerUnaryReactor* AdminService::FleetSummary(grpc::CallbackServerContext* ctx,
                                                     const v1::FleetSummaryRequest* req,
                                                     v1::FleetSummaryResponse* resp) {
  std::map<std::string, std::string> selector = ToMap(req->selector());
  std::vector<v1::HostInfo> hosts = deps_.fleet->ListHosts(selector);
  std::vector<std::string> ids;
  for (const v1::HostInfo& h : hosts) {
    ids.push_back(h.host_id());
    switch (h.state()) {
      case v1::HOST_CONNECTED:
        resp->set_hosts_connected(resp->hosts_connected() + 1);
        break;
      case v1::HOST_STALE:
        resp->set_hosts_stale(resp->hosts_stale() + 1);
        break;
      default:
        resp->set_hosts_gone(resp->hosts_gone() + 1);
        break;
    }
    if (!h.desired_version().empty() && h.desired_version() != h.current_version()) {
      resp->set_hosts_drifted(resp->hosts_drifted() + 1);
    }
  }
  // The previous (complete) window and the current one.
  absl::Time now = deps_.clock->Now();
  int64_t index = deps_.telemetry->WindowIndex(now);
  TelemetrySummary s =
      deps_.telemetry->Summarize(ids, deps_.telemetry->WindowStart(index - 1),
                                 deps_.telemetry->WindowStart(index + 1), req->peer_class());
  resp->set_probe_rtt_p50_seconds(s.network_rtt.Quantile(0.5));
  resp->set_probe_rtt_p99_seconds(s.network_rtt.Quantile(0.99));
  resp->set_probe_rtt_p999_seconds(s.network_rtt.Quantile(0.999));
  resp->set_cnp_rate_per_second(s.cnp_rate_per_second);
  resp->set_pfc_pause_rate_per_second(s.pfc_pause_rate_per_second);
  s.network_rtt.ToProto(resp->mutable_merged_rtt());
  resp->set_reports_received(deps_.metrics->reports_received());
  resp->set_reports_dropped(deps_.metrics->reports_dropped());
  return Done(ctx, grpc::Status::OK);
}

grpc::ServerUnaryReactor* AdminService::ListAudit(grpc::CallbackServerContext* ctx,
                                                  const v1::ListAuditRequest* req,
                                                  v1::ListAuditResponse* resp) {
  if (deps_.store == nullptr) {
    return Done(ctx, grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                                  "the controller runs without a store (--state_dir empty)"));
  }
  if (req->limit() > 10000) {
    return Done(ctx, grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                                  absl::StrCat("limit ", req->limit(), " exceeds 10000")));
  }
  auto entries = deps_.store->ListAudit(req->after_id(), req->limit());
  if (!entries.ok()) return Done(ctx, ToGrpc(entries.status()));
  for (v1::AuditEntry& e : *entries) *resp->add_entries() = std::move(e);
  return Done(ctx, grpc::Status::OK);
}

grpc::ServerUnaryReactor* AdminService::SetDesiredState(grpc::CallbackServerContext* ctx,
                                                        const v1::SetDesiredStateRequest* req,
                                                        v1::SetDesiredStateResponse* resp) {
  if (req->host_id().empty()) {
    return Done(ctx, grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "host_id is empty"));
  }
  for (int i = 0; i < req->parameters().devices_size(); ++i) {
    if (req->parameters().devices(i).device().empty()) {
      return Done(ctx, grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                                    absl::StrCat("parameters.devices[", i, "].device is empty")));
    }
  }
  absl::StatusOr<std::string> version =
      deps_.fleet->SetDesiredState(req->host_id(), req->parameters(), "admin");
  if (!version.ok()) return Done(ctx, ToGrpc(version.status()));
  resp->set_version(*version);
  return Done(ctx, grpc::Status::OK);
}

grpc::ServerWriteReactor<v1::Event>* AdminService::Watch(grpc::CallbackServerContext*,
                                                         const v1::WatchRequest*) {
  return WatchStream::Start(deps_.events, deps_.metrics, deps_.max_watch_queue);
}

}  // namespace rocetune::controller
