#include "tests/cli/fake_admin.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "model/quantile_sketch.h"

namespace rocetune::cli::testing {

void FakeAdmin::Record(grpc::ServerContext* ctx) {
  auto it = ctx->client_metadata().find("rocetune-actor");
  absl::MutexLock l(&mu_);
  actor_ =
      it == ctx->client_metadata().end() ? "" : std::string(it->second.data(), it->second.size());
}

std::string FakeAdmin::last_actor() const {
  absl::MutexLock l(&mu_);
  return actor_;
}
v1::ChangeActionRequest FakeAdmin::last_action() const {
  absl::MutexLock l(&mu_);
  return action_;
}
v1::ApplyPolicyRequest FakeAdmin::last_apply() const {
  absl::MutexLock l(&mu_);
  return apply_;
}
v1::WatchRequest FakeAdmin::last_watch() const {
  absl::MutexLock l(&mu_);
  return watch_;
}
v1::ProposeChangeRequest FakeAdmin::last_propose() const {
  absl::MutexLock l(&mu_);
  return propose_;
}

grpc::Status FakeAdmin::ListHosts(grpc::ServerContext* ctx, const v1::ListHostsRequest* req,
                                  v1::ListHostsResponse* resp) {
  Record(ctx);
  ++list_hosts_calls_;
  int start = 0;
  if (!req->page_token().empty() && !absl::SimpleAtoi(req->page_token(), &start)) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "bad page token");
  }
  uint32_t size = req->page_size() == 0 ? 500 : std::min(req->page_size(), max_page);
  int end = std::min(hosts, start + static_cast<int>(size));
  for (int i = start; i < end; ++i) {
    v1::HostInfo* h = resp->add_hosts();
    h->set_host_id(absl::StrCat("host-", 10000 + i));
    h->set_state(v1::HOST_CONNECTED);
    (*h->mutable_labels())["rack"] = absl::StrCat("r", i / 32);
    for (int d = 0; d < 8; ++d) {
      v1::NicDevice* nic = h->add_devices();
      nic->set_name(absl::StrCat("mlx5_", d));
      nic->set_driver("mlx5_core");
      nic->set_firmware_version("28.39.1002");
      nic->set_pci_address(absl::StrCat("0000:", 10 + d, ":00.0"));
    }
  }
  resp->set_total(hosts);
  if (end < hosts) resp->set_next_page_token(absl::StrCat(end));
  return grpc::Status::OK;
}

grpc::Status FakeAdmin::GetHost(grpc::ServerContext* ctx, const v1::GetHostRequest* req,
                                v1::HostInfo* resp) {
  Record(ctx);
  resp->set_host_id(req->host_id());
  std::string version = absl::StrCat("v-", req->host_id());
  if (req->host_id() == "missing")
    return grpc::Status(grpc::StatusCode::NOT_FOUND, "no host missing");
  if (req->host_id() == "bad") {
    resp->set_last_nack_version(version);
    resp->set_last_nack_error("dce_tcp_g=2000 outside 0..1023");
    resp->add_rejected_versions(version);
  } else if (req->host_id() == "rp-off") {
    resp->set_current_version(version);
    v1::ParameterNote* n = resp->add_not_in_effect();
    n->set_device("mlx5_0");
    n->set_parameter("rpg_time_reset");
    n->set_reason("the DCQCN reaction point is off on every priority (rp_enable_mask 0x00)");
  } else if (req->host_id() == "slow") {
    resp->set_current_version("v-old");
  } else if (++get_host_calls_ > acks_after_polls) {
    resp->set_last_ack_version(version);
    resp->set_current_version(version);
  }
  return grpc::Status::OK;
}

grpc::Status FakeAdmin::SetDesiredState(grpc::ServerContext* ctx,
                                        const v1::SetDesiredStateRequest* req,
                                        v1::SetDesiredStateResponse* resp) {
  Record(ctx);
  resp->set_version(absl::StrCat("v-", req->host_id()));
  return grpc::Status::OK;
}

grpc::Status FakeAdmin::ApplyPolicy(grpc::ServerContext* ctx, const v1::ApplyPolicyRequest* req,
                                    v1::ApplyPolicyResponse* resp) {
  Record(ctx);
  {
    absl::MutexLock l(&mu_);
    apply_ = *req;
  }
  resp->mutable_version()->set_name("base");
  resp->mutable_version()->set_sequence(3);
  resp->mutable_version()->set_version_hash("0123456789abcdef");
  resp->set_created(false);
  if (req->dry_run()) resp->add_notes("selects 4 connected host(s) (selector )");
  return grpc::Status::OK;
}

grpc::Status FakeAdmin::GetChange(grpc::ServerContext* ctx, const v1::GetChangeRequest* req,
                                  v1::Change* resp) {
  Record(ctx);
  if (req->id() != "c-1")
    return grpc::Status(grpc::StatusCode::NOT_FOUND, "no change " + req->id());
  resp->set_id("c-1");
  resp->set_state(v1::CANARY);
  resp->set_policy_name("base");
  v1::Verdict* v = resp->add_verdicts();
  v->set_outcome(v1::Verdict::HOLD);
  v->set_rule("min_samples");
  v->set_look(1);
  v->set_looks(3);
  for (const char* group : {"canary", "control"}) {
    QuantileSketch s;
    double base = std::string(group) == "canary" ? 20e-6 : 10e-6;
    for (int i = 0; i < 100; ++i) s.Insert(base * (1 + i / 100.0));
    v1::GroupEvidence* g = v->add_groups();
    g->set_group(group);
    g->set_samples(100);
    g->set_p99_seconds(base * 1.99);
    *g->mutable_rtt() = s.ToProto();
  }
  return grpc::Status::OK;
}

grpc::Status FakeAdmin::Approve(grpc::ServerContext* ctx, const v1::ChangeActionRequest* req,
                                v1::Change* resp) {
  Record(ctx);
  {
    absl::MutexLock l(&mu_);
    action_ = *req;
  }
  if (req->id() == "c-2") {
    return grpc::Status(grpc::StatusCode::PERMISSION_DENIED, "a proposer cannot approve");
  }
  resp->set_id(req->id());
  resp->set_state(req->dry_run() ? v1::PROPOSED : v1::APPROVED);
  return grpc::Status::OK;
}

grpc::Status FakeAdmin::ProposeChange(grpc::ServerContext* ctx, const v1::ProposeChangeRequest* req,
                                      v1::Change* resp) {
  Record(ctx);
  {
    absl::MutexLock l(&mu_);
    propose_ = *req;
  }
  resp->set_id("c-9");
  resp->set_state(v1::PROPOSED);
  resp->set_policy_name(req->policy_name());
  *resp->mutable_knobs() = req->knobs();
  return grpc::Status::OK;
}

grpc::Status FakeAdmin::Watch(grpc::ServerContext* ctx, const v1::WatchRequest* req,
                              grpc::ServerWriter<v1::Event>* writer) {
  Record(ctx);
  {
    absl::MutexLock l(&mu_);
    watch_ = *req;
  }
  uint64_t seq = 0;
  for (const std::string& kind : watch_kinds) {
    v1::Event e;
    e.set_kind(kind);
    e.set_seq(++seq);
    e.set_boot_unix_nanos(watch_boot);
    e.set_subject("h1");
    e.set_unix_nanos(absl::GetCurrentTimeNanos());
    if (!writer->Write(e)) return grpc::Status::OK;
  }
  while (!ctx->IsCancelled()) absl::SleepFor(absl::Milliseconds(10));
  return grpc::Status::CANCELLED;
}

FakeServer FakeServer::Start(FakeAdmin* service, int port) {
  FakeServer s;
  grpc::ServerBuilder b;
  b.AddListeningPort(absl::StrCat("127.0.0.1:", port), grpc::InsecureServerCredentials(), &s.port);
  b.RegisterService(service);
  s.server = b.BuildAndStart();
  return s;
}

void FakeServer::Stop() {
  if (server == nullptr) return;
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(100));
  server->Wait();
  server.reset();
}

}  // namespace rocetune::cli::testing
