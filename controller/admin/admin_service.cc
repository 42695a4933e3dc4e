#include "controller/admin/admin_service.h"

#include <algorithm>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "controller/admin/watch_stream.h"
#include "controller/tuner/rehearsal.h"
#include "daemon/init.h"
#include "daemon/logging.h"

namespace rocetune::controller {
namespace {

grpc::Status ToGrpc(const absl::Status& s) {
  return grpc::Status(static_cast<grpc::StatusCode>(s.code()), std::string(s.message()));
}

std::map<std::string, std::string> ToMap(const google::protobuf::Map<std::string, std::string>& m) {
  return std::map<std::string, std::string>(m.begin(), m.end());
}

// One unary call of `Method`: requested on the queue, handled (on the
// queue's thread, or later from another thread through `done`), deleted once
// Finish has completed (or the request failed: the server is shutting down).
template <typename Req, typename Resp>
class UnaryCall final : public CqTag {
 public:
  using Requester = void (v1::AdminService::AsyncService::*)(grpc::ServerContext*, Req*,
                                                             grpc::ServerAsyncResponseWriter<Resp>*,
                                                             grpc::CompletionQueue*,
                                                             grpc::ServerCompletionQueue*, void*);
  using Done = std::function<void(grpc::Status, Resp)>;
  // Answers through `done`, exactly once, from any thread.
  using Handler = std::function<void(const grpc::ServerContext&, const Req&, Done)>;

  struct Method {
    AdminService* service;
    Requester request;
    const char* name;  // the AdminService method, for authorisation and audit
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
      finishing_ = true;
      Request(m_);  // the next call of this method
      if (grpc::Status allowed = m_->service->Authorize(ctx_, m_->name); !allowed.ok()) {
        writer_.FinishWithError(allowed, this);
        return;
      }
      // gRPC's own receive limit sits at 4x (for the agent streams, which
      // count what they refuse); an admin request is held to the flag.
      if (const size_t max = m_->service->deps().max_message_bytes; req_.ByteSizeLong() > max) {
        const grpc::Status big(
            grpc::StatusCode::RESOURCE_EXHAUSTED,
            absl::StrCat(m_->name, ": request of ", req_.ByteSizeLong(),
                         " bytes exceeds the controller's --max_message_bytes=", max));
        m_->service->AuditOutcome(ctx_, m_->name, big);
        writer_.FinishWithError(big, this);
        return;
      }
      m_->handle(ctx_, req_, [this](grpc::Status status, Resp resp) {
        // Held until Finish has been started; the queue's thread takes it
        // before deleting the call. The completion queue already orders the
        // two, inside libgrpc where ThreadSanitizer cannot see it; the mutex
        // makes that order visible (a TSan report on resp_ otherwise).
        absl::MutexLock lock(&mu_);
        m_->service->AuditOutcome(ctx_, m_->name, status);
        resp_ = std::move(resp);
        if (status.ok()) {
          writer_.Finish(resp_, status, this);
        } else {
          writer_.FinishWithError(status, this);
        }
      });
      return;
    }
    m_->calls->Leave();
    { absl::MutexLock lock(&mu_); }  // the answering thread has let go of this call
    delete this;
  }

 private:
  explicit UnaryCall(std::shared_ptr<const Method> m) : m_(std::move(m)), writer_(&ctx_) {}

  const std::shared_ptr<const Method> m_;
  grpc::ServerContext ctx_;
  Req req_;
  Resp resp_;
  grpc::ServerAsyncResponseWriter<Resp> writer_;
  bool finishing_ = false;
  absl::Mutex mu_;  // see OnComplete
};

template <typename Req, typename Resp>
void ServeDeferred(AdminService* service, typename UnaryCall<Req, Resp>::Requester request,
                   const char* name, typename UnaryCall<Req, Resp>::Handler handle,
                   grpc::ServerCompletionQueue* cq, CallTracker* calls) {
  using Call = UnaryCall<Req, Resp>;
  Call::Request(std::make_shared<const typename Call::Method>(
      typename Call::Method{service, request, name, std::move(handle), cq, calls}));
}

// A handler answered at once on the queue's thread.
template <typename Req, typename Resp>
void Serve(AdminService* service, typename UnaryCall<Req, Resp>::Requester request,
           const char* name, std::function<grpc::Status(const Req&, Resp*)> handle,
           grpc::ServerCompletionQueue* cq, CallTracker* calls) {
  ServeDeferred<Req, Resp>(
      service, request, name,
      [handle](const grpc::ServerContext&, const Req& req,
               typename UnaryCall<Req, Resp>::Done done) {
        Resp resp;
        grpc::Status s = handle(req, &resp);
        done(s, std::move(resp));
      },
      cq, calls);
}

// A rollout call: runs `op(req, who)` on the rollout manager's executor.
template <typename Req, typename Resp>
void ServeRollout(
    AdminService* service, typename UnaryCall<Req, Resp>::Requester request, const char* name,
    std::function<absl::StatusOr<Resp>(RolloutManager*, const Req&, const Identity&)> op,
    grpc::ServerCompletionQueue* cq, CallTracker* calls) {
  ServeDeferred<Req, Resp>(
      service, request, name,
      [service, op](const grpc::ServerContext& ctx, const Req& req,
                    typename UnaryCall<Req, Resp>::Done done) {
        const Identity who = IdentityOf(ctx);
        RolloutManager* m = service->deps().rollout;
        service->OnExecutor<Resp>([m, op, &req, who] { return op(m, req, who); }, std::move(done));
      },
      cq, calls);
}

}  // namespace

AdminService::~AdminService() { rehearsals_.Stop(); }

grpc::Status AdminService::Authorize(const grpc::ServerContext& ctx, const char* method) {
  if (deps_.authorizer == nullptr) return grpc::Status::OK;
  const Identity who = IdentityOf(ctx);
  const absl::Status s = deps_.authorizer->Check(who, method);
  if (s.ok()) return grpc::Status::OK;
  LogWarning("admin call refused",
             {{"actor", who.name}, {"method", method}, {"error", s.ToString()}});
  const grpc::Status refused = ToGrpc(s);
  AuditCall(who, method, refused);
  return refused;
}

void AdminService::AuditOutcome(const grpc::ServerContext& ctx, const char* method,
                                const grpc::Status& outcome) {
  if (deps_.authorizer == nullptr) return;
  AuditCall(IdentityOf(ctx), method, outcome);
}

void AdminService::AuditCall(const Identity& who, const std::string& method,
                             const grpc::Status& outcome) {
  if (deps_.store == nullptr) return;
  v1::AuditEntry e;
  e.set_unix_nanos(absl::ToUnixNanos(deps_.clock->Now()));
  e.set_actor(who.name);
  e.set_authenticated(who.authenticated);
  e.set_action(outcome.error_code() == grpc::StatusCode::PERMISSION_DENIED ? "admin_denied"
                                                                           : "admin_call");
  e.set_subject(method);
  e.set_detail(outcome.ok() ? std::string("OK")
                            : absl::StrCat(absl::StatusCodeToString(
                                               static_cast<absl::StatusCode>(outcome.error_code())),
                                           ": ", outcome.error_message()));
  // Store writes belong on the control loop; without one (no rollout
  // manager) the row is written here.
  if (deps_.rollout != nullptr) {
    deps_.rollout->loop().Audit(std::move(e), "an admin call");
  } else if (absl::StatusOr<int64_t> id = deps_.store->AppendAudit(e); !id.ok()) {
    LogError("cannot audit an admin call",
             {{"actor", e.actor()}, {"method", e.subject()}, {"error", id.status().ToString()}});
  }
}

template <typename Resp>
void AdminService::OnExecutor(std::function<absl::StatusOr<Resp>()> op,
                              std::function<void(grpc::Status, Resp)> done) {
  if (deps_.rollout == nullptr) {
    done(grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                      "this controller runs without the rollout manager"),
         Resp());
    return;
  }
  auto task = [op, done] {
    absl::StatusOr<Resp> r = op();
    if (r.ok()) {
      done(grpc::Status::OK, *std::move(r));
    } else {
      done(ToGrpc(r.status()), Resp());
    }
  };
  if (!deps_.rollout->loop().Post(task)) {
    done(grpc::Status(grpc::StatusCode::UNAVAILABLE, "the controller is stopping"), Resp());
  }
}

void AdminService::Rehearse(const v1::RehearseChangeRequest& req, const Identity& who,
                            std::chrono::system_clock::time_point deadline,
                            std::function<void(grpc::Status, v1::Rehearsal)> done) {
  v1::Scenario scenario;
  const std::string name = req.scenario_name().empty() ? "<scenario>" : req.scenario_name();
  if (absl::Status s = ParseTextProto(req.scenario_text(), name, &scenario); !s.ok()) {
    done(ToGrpc(s), v1::Rehearsal());
    return;
  }
  RolloutManager* m = deps_.rollout;
  const std::string id = req.id();
  OnExecutor<std::pair<Knobs, Knobs>>(
      [m, id] { return m->RehearsalKnobs(id); },
      [this, m, id, scenario, name, who, deadline, done](grpc::Status st,
                                                         std::pair<Knobs, Knobs> knobs) {
        if (!st.ok()) {
          done(st, v1::Rehearsal());
          return;
        }
        const auto limit = std::min(
            deadline, std::chrono::system_clock::now() + absl::ToChronoSeconds(kMaxRehearsal));
        const bool posted =
            rehearsals_.Post([this, m, id, scenario, name, who, done, knobs, limit] {
              const SimulationStop stop = [this, limit]() -> absl::Status {
                if (stopping_rehearsals_.load()) {
                  return absl::UnavailableError("the controller is stopping");
                }
                if (std::chrono::system_clock::now() > limit) {
                  return absl::DeadlineExceededError(
                      absl::StrCat("the call's deadline (or the controller's limit of ",
                                   absl::FormatDuration(kMaxRehearsal), ") passed"));
                }
                return absl::OkStatus();
              };
              absl::StatusOr<v1::Rehearsal> r =
                  controller::Rehearse(scenario, name, knobs.first, knobs.second, 0.05, stop);
              if (!r.ok()) {
                LogWarning("rehearsal ended without a result",
                           {{"change", id}, {"actor", who.name}, {"error", r.status().ToString()}});
                done(ToGrpc(r.status()), v1::Rehearsal());
                return;
              }
              r->set_actor(who.name);
              r->set_unix_nanos(absl::ToUnixNanos(deps_.clock->Now()));
              const v1::Rehearsal result = *r;
              OnExecutor<v1::Rehearsal>(
                  [m, id, result]() -> absl::StatusOr<v1::Rehearsal> {
                    absl::StatusOr<v1::Change> c = m->RecordRehearsal(id, result);
                    if (!c.ok()) return c.status();
                    return result;
                  },
                  done);
            });
        if (!posted) done(grpc::Status(grpc::StatusCode::UNAVAILABLE, "stopping"), v1::Rehearsal());
      });
}

void AdminService::Start(grpc::ServerCompletionQueue* cq, CallTracker* calls) {
  using AS = v1::AdminService::AsyncService;
  using M = RolloutManager;
  using Who = const Identity&;
  auto bind = [this](auto method) {
    return [this, method](const auto& req, auto* resp) { return (this->*method)(req, resp); };
  };
  Serve<v1::ListHostsRequest, v1::ListHostsResponse>(this, &AS::RequestListHosts, "ListHosts",
                                                     bind(&AdminService::ListHosts), cq, calls);
  Serve<v1::GetHostRequest, v1::HostInfo>(this, &AS::RequestGetHost, "GetHost",
                                          bind(&AdminService::GetHost), cq, calls);
  Serve<v1::FleetSummaryRequest, v1::FleetSummaryResponse>(
      this, &AS::RequestFleetSummary, "FleetSummary", bind(&AdminService::FleetSummary), cq, calls);
  Serve<v1::ListAuditRequest, v1::ListAuditResponse>(this, &AS::RequestListAudit, "ListAudit",
                                                     bind(&AdminService::ListAudit), cq, calls);
  Serve<v1::VerifyAuditRequest, v1::VerifyAuditResponse>(
      this, &AS::RequestVerifyAudit, "VerifyAudit", bind(&AdminService::VerifyAudit), cq, calls);

  ServeRollout<v1::ApplyPolicyRequest, v1::ApplyPolicyResponse>(
      this, &AS::RequestApplyPolicy, "ApplyPolicy",
      [](M* m, const v1::ApplyPolicyRequest& r, Who w) { return m->ApplyPolicy(r, w); }, cq, calls);
  ServeRollout<v1::ListPoliciesRequest, v1::ListPoliciesResponse>(
      this, &AS::RequestListPolicies, "ListPolicies",
      [](M* m, const v1::ListPoliciesRequest& r, Who) -> absl::StatusOr<v1::ListPoliciesResponse> {
        return m->ListPolicies(r);
      },
      cq, calls);
  ServeRollout<v1::GetPolicyRequest, v1::PolicyVersion>(
      this, &AS::RequestGetPolicy, "GetPolicy",
      [](M* m, const v1::GetPolicyRequest& r, Who) { return m->GetPolicy(r); }, cq, calls);
  ServeRollout<v1::ProposeChangeRequest, v1::Change>(
      this, &AS::RequestProposeChange, "ProposeChange",
      [](M* m, const v1::ProposeChangeRequest& r, Who w) { return m->Propose(r, w); }, cq, calls);
  ServeRollout<v1::ListChangesRequest, v1::ListChangesResponse>(
      this, &AS::RequestListChanges, "ListChanges",
      [](M* m, const v1::ListChangesRequest& r, Who) { return m->ListChanges(r); }, cq, calls);
  ServeRollout<v1::GetChangeRequest, v1::Change>(
      this, &AS::RequestGetChange, "GetChange",
      [](M* m, const v1::GetChangeRequest& r, Who) { return m->GetChange(r.id()); }, cq, calls);
  ServeRollout<v1::ChangeActionRequest, v1::Change>(
      this, &AS::RequestApprove, "Approve",
      [](M* m, const v1::ChangeActionRequest& r, Who w) { return m->Approve(r, w); }, cq, calls);
  ServeRollout<v1::ChangeActionRequest, v1::Change>(
      this, &AS::RequestReject, "Reject",
      [](M* m, const v1::ChangeActionRequest& r, Who w) { return m->Reject(r, w); }, cq, calls);
  ServeRollout<v1::ChangeActionRequest, v1::Change>(
      this, &AS::RequestRollback, "Rollback",
      [](M* m, const v1::ChangeActionRequest& r, Who w) { return m->Rollback(r, w); }, cq, calls);
  ServeRollout<v1::ChangeActionRequest, v1::Change>(
      this, &AS::RequestAbort, "Abort",
      [](M* m, const v1::ChangeActionRequest& r, Who w) { return m->Abort(r, w); }, cq, calls);
  ServeDeferred<v1::RehearseChangeRequest, v1::Rehearsal>(
      this, &AS::RequestRehearseChange, "RehearseChange",
      [this](const grpc::ServerContext& ctx, const v1::RehearseChangeRequest& r,
             UnaryCall<v1::RehearseChangeRequest, v1::Rehearsal>::Done done) {
        Rehearse(r, IdentityOf(ctx), ctx.deadline(), std::move(done));
      },
      cq, calls);
  ServeRollout<v1::StartCampaignRequest, v1::Campaign>(
      this, &AS::RequestStartCampaign, "StartCampaign",
      [](M* m, const v1::StartCampaignRequest& r, Who w) { return m->campaigns().Start(r, w); }, cq,
      calls);
  ServeRollout<v1::ChangeActionRequest, v1::Campaign>(
      this, &AS::RequestApproveCampaign, "ApproveCampaign",
      [](M* m, const v1::ChangeActionRequest& r, Who w) { return m->campaigns().Approve(r, w); },
      cq, calls);
  ServeRollout<v1::ChangeActionRequest, v1::Campaign>(
      this, &AS::RequestStopCampaign, "StopCampaign",
      [](M* m, const v1::ChangeActionRequest& r, Who w) { return m->campaigns().Stop(r, w); }, cq,
      calls);
  ServeRollout<v1::GetCampaignRequest, v1::Campaign>(
      this, &AS::RequestGetCampaign, "GetCampaign",
      [](M* m, const v1::GetCampaignRequest& r, Who) { return m->campaigns().Get(r.id()); }, cq,
      calls);
  ServeRollout<v1::ListCampaignsRequest, v1::ListCampaignsResponse>(
      this, &AS::RequestListCampaigns, "ListCampaigns",
      [](M* m, const v1::ListCampaignsRequest&, Who) -> absl::StatusOr<v1::ListCampaignsResponse> {
        return m->campaigns().List();
      },
      cq, calls);
  ServeRollout<v1::SetDesiredStateRequest, v1::SetDesiredStateResponse>(
      this, &AS::RequestSetDesiredState, "SetDesiredState",
      [](M* m, const v1::SetDesiredStateRequest& r,
         Who w) -> absl::StatusOr<v1::SetDesiredStateResponse> {
        if (r.host_id().empty()) return absl::InvalidArgumentError("host_id is empty");
        for (int i = 0; i < r.parameters().devices_size(); ++i) {
          if (r.parameters().devices(i).device().empty()) {
            return absl::InvalidArgumentError(
                absl::StrCat("parameters.devices[", i, "].device is empty"));
          }
        }
        return m->SetDesiredState(r, w);
      },
      cq, calls);
  ServeRollout<v1::ForgetHostRequest, v1::ForgetHostResponse>(
      this, &AS::RequestForgetHost, "ForgetHost",
      [](M* m, const v1::ForgetHostRequest& r, Who w) -> absl::StatusOr<v1::ForgetHostResponse> {
        if (absl::Status s = m->ForgetHost(r, w); !s.ok()) return s;
        v1::ForgetHostResponse resp;
        resp.set_host_id(r.host_id());
        return resp;
      },
      cq, calls);
  WatchCall::Request(this, cq, calls);
}

grpc::Status AdminService::ListHosts(const v1::ListHostsRequest& req, v1::ListHostsResponse* resp) {
  if (req.page_size() > 5000) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        absl::StrCat("page_size ", req.page_size(), " exceeds 5000"));
  }
  const size_t page = req.page_size() == 0 ? 500 : req.page_size();
  uint32_t total = 0;
  bool more = false;
  std::vector<v1::HostInfo> hosts =
      deps_.fleet->ListHostsPage(ToMap(req.selector()), req.page_token(), page, &total, &more);
  for (v1::HostInfo& h : hosts) {
    if (deps_.rollout != nullptr) h.set_active_change(deps_.rollout->ActiveChangeOf(h.host_id()));
    *resp->add_hosts() = std::move(h);
  }
  resp->set_total(total);
  if (more && resp->hosts_size() > 0) {
    resp->set_next_page_token(resp->hosts(resp->hosts_size() - 1).host_id());
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
  if (deps_.rollout != nullptr)
    resp->set_active_change(deps_.rollout->ActiveChangeOf(req.host_id()));
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
  resp->set_probes(s.network_rtt.count());
  if (s.hosts > 0) {
    auto rate = [&s](const std::string& key) {
      auto it = s.counter_rates.find(key);
      return it == s.counter_rates.end() ? 0.0 : it->second;
    };
    resp->set_tx_gbps_per_host(rate("tx_bytes") * 8 / 1e9 / s.hosts);
    double worst = 0;
    for (int p = 0; p < 8; ++p) {
      const double us_per_s = rate(PriorityCounterName("rx_pfc_pause_duration_us", p)) +
                              rate(PriorityCounterName("tx_pfc_pause_duration_us", p));
      worst = std::max(worst, us_per_s / 1e6 / s.hosts);
    }
    resp->set_pfc_pause_ratio(worst);
  }
  constexpr int kMaxJobsShown = 256;  // each carries a sketch: bounded, under gRPC's 4 MB
  for (const auto& [key, period] : s.jobs) {
    if (resp->jobs_size() >= kMaxJobsShown) {
      resp->set_jobs_not_shown(resp->jobs_not_shown() + 1);
      continue;
    }
    v1::JobSummary* j = resp->add_jobs();
    j->set_job(key.first);
    j->set_op(key.second);
    j->set_hosts(static_cast<uint32_t>(period.hosts));
    j->set_events(period.seconds.count());
    j->set_p50_seconds(period.seconds.Quantile(0.5));
    j->set_p99_seconds(period.seconds.Quantile(0.99));
    j->set_max_seconds(period.seconds.max());
    j->set_bytes(period.bytes);
    period.seconds.ToProto(j->mutable_merged_seconds());
  }
  resp->set_reports_received(deps_.metrics->reports_received());
  resp->set_reports_dropped(deps_.metrics->reports_dropped());
  return grpc::Status::OK;
}

grpc::Status AdminService::ListAudit(const v1::ListAuditRequest& req, v1::ListAuditResponse* resp) {
  if (deps_.store == nullptr) {
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                        "the controller runs without a store (--state_dir empty)");
  }
  absl::StatusOr<v1::ListAuditResponse> r = deps_.store->QueryAudit(req);
  if (!r.ok()) return ToGrpc(r.status());
  *resp = *std::move(r);
  return grpc::Status::OK;
}

grpc::Status AdminService::VerifyAudit(const v1::VerifyAuditRequest&,
                                       v1::VerifyAuditResponse* resp) {
  if (deps_.store == nullptr) {
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                        "the controller runs without a store (--state_dir empty)");
  }
  absl::StatusOr<v1::VerifyAuditResponse> r = deps_.store->VerifyAudit();
  if (!r.ok()) return ToGrpc(r.status());
  *resp = *std::move(r);
  return grpc::Status::OK;
}

}  // namespace rocetune::controller
