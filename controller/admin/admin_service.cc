#include "controller/admin/admin_service.h"

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>

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

// One unary call of `Method`: requested on the queue, answered by the
// handler on the queue's thread, deleted once Finish has completed (or the
// request failed: the server is shutting down).
template <typename Req, typename Resp>
class UnaryCall final : public CqTag {
 public:
  using Requester = void (v1::AdminService::AsyncService::*)(grpc::ServerContext*, Req*,
                                                             grpc::ServerAsyncResponseWriter<Resp>*,
                                                             grpc::CompletionQueue*,
                                                             grpc::ServerCompletionQueue*, void*);
  using Handler = std::function<grpc::Status(const Req&, Resp*)>;

  struct Method {
    AdminService* service;
    Requester request;
    Handler handle;
    grpc::ServerCompletionQueue* cq;
    CallTracker* calls;
  };

  // Puts up one call of `m` (none once the tracker is stopping).
  static void Request(const std::shared_ptr<const Method>& m) {
    if (!m->calls->Enter()) return;
    auto* call = new UnaryCall(m);
    (m->service->*(m->request))(&call->ctx_, &call->req_, &call->writer_, m->cq, m->cq, call);
  }

  void OnComplete(bool ok) override {
    if (ok && !finishing_) {
      Request(m_);  // the next call of this method
      Resp resp;
      const grpc::Status status = m_->handle(req_, &resp);
      finishing_ = true;
      if (status.ok()) {
        writer_.Finish(resp, status, this);
      } else {
        writer_.FinishWithError(status, this);
      }
      return;
    }
    m_->calls->Leave();
    delete this;
  }

 private:
  explicit UnaryCall(std::shared_ptr<const Method> m) : m_(std::move(m)), writer_(&ctx_) {}

  const std::shared_ptr<const Method> m_;
  grpc::ServerContext ctx_;
  Req req_;
  grpc::ServerAsyncResponseWriter<Resp> writer_;
  bool finishing_ = false;
};

template <typename Req, typename Resp>
void Serve(AdminService* service, typename UnaryCall<Req, Resp>::Requester request,
           typename UnaryCall<Req, Resp>::Handler handle, grpc::ServerCompletionQueue* cq,
           CallTracker* calls) {
  using Call = UnaryCall<Req, Resp>;
  Call::Request(std::make_shared<const typename Call::Method>(
      typename Call::Method{service, request, std::move(handle), cq, calls}));
}

// A method of a later issue: answers UNIMPLEMENTED, naming itself.
template <typename Req, typename Resp>
void ServeUnimplemented(AdminService* service, typename UnaryCall<Req, Resp>::Requester request,
                        const std::string& name, grpc::ServerCompletionQueue* cq,
                        CallTracker* calls) {
  Serve<Req, Resp>(
      service, request,
      [name](const Req&, Resp*) {
        return grpc::Status(grpc::StatusCode::UNIMPLEMENTED,
                            absl::StrCat("rocetune.v1.AdminService/", name,
                                         " is not implemented by this controller yet"));
      },
      cq, calls);
}

}  // namespace

void AdminService::Start(grpc::ServerCompletionQueue* cq, CallTracker* calls) {
  using AS = v1::AdminService::AsyncService;
  auto bind = [this](auto method) {
    return [this, method](const auto& req, auto* resp) { return (this->*method)(req, resp); };
  };
  Serve<v1::ListHostsRequest, v1::ListHostsResponse>(this, &AS::RequestListHosts,
                                                     bind(&AdminService::ListHosts), cq, calls);
  Serve<v1::GetHostRequest, v1::HostInfo>(this, &AS::RequestGetHost, bind(&AdminService::GetHost),
                                          cq, calls);
  Serve<v1::FleetSummaryRequest, v1::FleetSummaryResponse>(
      this, &AS::RequestFleetSummary, bind(&AdminService::FleetSummary), cq, calls);
  Serve<v1::ListAuditRequest, v1::ListAuditResponse>(this, &AS::RequestListAudit,
                                                     bind(&AdminService::ListAudit), cq, calls);
  Serve<v1::SetDesiredStateRequest, v1::SetDesiredStateResponse>(
      this, &AS::RequestSetDesiredState, bind(&AdminService::SetDesiredState), cq, calls);
  ServeUnimplemented<v1::ListPoliciesRequest, v1::ListPoliciesResponse>(
      this, &AS::RequestListPolicies, "ListPolicies", cq, calls);
  ServeUnimplemented<v1::ListChangesRequest, v1::ListChangesResponse>(this, &AS::RequestListChanges,
                                                                      "ListChanges", cq, calls);
  ServeUnimplemented<v1::GetChangeRequest, v1::Change>(this, &AS::RequestGetChange, "GetChange", cq,
                                                       calls);
  ServeUnimplemented<v1::ChangeActionRequest, v1::Change>(this, &AS::RequestApprove, "Approve", cq,
                                                          calls);
  ServeUnimplemented<v1::ChangeActionRequest, v1::Change>(this, &AS::RequestReject, "Reject", cq,
                                                          calls);
  ServeUnimplemented<v1::ChangeActionRequest, v1::Change>(this, &AS::RequestRollback, "Rollback",
                                                          cq, calls);
  WatchCall::Request(this, cq, calls);
}

grpc::Status AdminService::ListHosts(const v1::ListHostsRequest& req, v1::ListHostsResponse* resp) {
  for (v1::HostInfo& h : deps_.fleet->ListHosts(ToMap(req.selector()))) {
    *resp->add_hosts() = std::move(h);
  }
  return grpc::Status::OK;
}

grpc::Status AdminService::GetHost(const v1::GetHostRequest& req, v1::HostInfo* resp) {
  if (req.host_id().empty()) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "host_id is empty");
  }
  absl::StatusOr<v1::HostInfo> info = deps_.fleet->GetHost(req.host_id());
  if (!info.ok()) return ToGrpc(info.status());
  *resp = *std::move(info);
  return grpc::Status::OK;
}

grpc::Status AdminService::FleetSummary(const v1::FleetSummaryRequest& req,
                                        v1::FleetSummaryResponse* resp) {
  std::map<std::string, std::string> selector = ToMap(req.selector());
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
                                 deps_.telemetry->WindowStart(index + 1), req.peer_class());
  resp->set_probe_rtt_p50_seconds(s.network_rtt.Quantile(0.5));
  resp->set_probe_rtt_p99_seconds(s.network_rtt.Quantile(0.99));
  resp->set_probe_rtt_p999_seconds(s.network_rtt.Quantile(0.999));
  resp->set_cnp_rate_per_second(s.cnp_rate_per_second);
  resp->set_pfc_pause_rate_per_second(s.pfc_pause_rate_per_second);
  s.network_rtt.ToProto(resp->mutable_merged_rtt());
  resp->set_reports_received(deps_.metrics->reports_received());
  resp->set_reports_dropped(deps_.metrics->reports_dropped());
  return grpc::Status::OK;
}

grpc::Status AdminService::ListAudit(const v1::ListAuditRequest& req, v1::ListAuditResponse* resp) {
  if (deps_.store == nullptr) {
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                        "the controller runs without a store (--state_dir empty)");
  }
  if (req.limit() > 10000) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        absl::StrCat("limit ", req.limit(), " exceeds 10000"));
  }
  auto entries = deps_.store->ListAudit(req.after_id(), req.limit());
  if (!entries.ok()) return ToGrpc(entries.status());
  for (v1::AuditEntry& e : *entries) *resp->add_entries() = std::move(e);
  return grpc::Status::OK;
}

grpc::Status AdminService::SetDesiredState(const v1::SetDesiredStateRequest& req,
                                           v1::SetDesiredStateResponse* resp) {
  if (req.host_id().empty()) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "host_id is empty");
  }
  for (int i = 0; i < req.parameters().devices_size(); ++i) {
    if (req.parameters().devices(i).device().empty()) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          absl::StrCat("parameters.devices[", i, "].device is empty"));
    }
  }
  absl::StatusOr<std::string> version =
      deps_.fleet->SetDesiredState(req.host_id(), req.parameters(), "admin");
  if (!version.ok()) return ToGrpc(version.status());
  resp->set_version(*version);
  return grpc::Status::OK;
}

}  // namespace rocetune::controller
