#include "controller/store/etcd/etcd_client.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "etcd/etcdserver/api/v3election/v3electionpb/v3election.grpc.pb.h"
#include "etcd/etcdserver/etcdserverpb/rpc.grpc.pb.h"
#include "grpcpp/grpcpp.h"

namespace rocetune::controller::etcd {

struct EtcdClient::Stubs {
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<etcdserverpb::KV::Stub> kv;
  std::unique_ptr<etcdserverpb::Lease::Stub> lease;
  std::unique_ptr<v3electionpb::Election::Stub> election;
};

namespace {

// The gRPC target for `endpoints`: one as given; several as one "ipv4:" list,
// which gRPC's default pick_first policy tries in order.
absl::StatusOr<std::string> Target(const std::vector<std::string>& endpoints) {
  if (endpoints.empty()) return absl::InvalidArgumentError("etcd: no endpoint given");
  for (const std::string& e : endpoints) {
    const size_t colon = e.rfind(':');
    int port = 0;
    if (e.empty() || absl::StrContains(e, ",") || colon == std::string::npos || colon == 0 ||
        !absl::SimpleAtoi(absl::string_view(e).substr(colon + 1), &port) || port < 1 ||
        port > 65535) {
      return absl::InvalidArgumentError(
          absl::StrCat("etcd: endpoint \"", e, "\" is not HOST:PORT"));
    }
  }
  if (endpoints.size() == 1) return endpoints[0];
  for (const std::string& e : endpoints) {
    const size_t colon = e.rfind(':');
    const bool ipv4 = colon != std::string::npos && colon > 0 &&
                      std::all_of(e.begin(), e.begin() + static_cast<long>(colon),
                                  [](char c) { return absl::ascii_isdigit(c) || c == '.'; });
    if (!ipv4) {
      return absl::InvalidArgumentError(
          absl::StrCat("etcd: with several endpoints each must be IPV4:PORT; \"", e, "\" is not"));
    }
  }
  return absl::StrCat("ipv4:", absl::StrJoin(endpoints, ","));
}

KeyValue FromProto(const mvccpb::KeyValue& kv) {
  KeyValue out;
  out.key = kv.key();
  out.value = kv.value();
  out.create_revision = kv.create_revision();
  out.mod_revision = kv.mod_revision();
  out.version = kv.version();
  out.lease = kv.lease();
  return out;
}

// The smallest key greater than every key starting with `prefix` (etcd's
// range_end for a prefix); "\0" (every key) when there is none.
std::string PrefixEnd(const std::string& prefix) {
  std::string end = prefix;
  while (!end.empty()) {
    if (static_cast<unsigned char>(end.back()) < 0xff) {
      end.back() = static_cast<char>(static_cast<unsigned char>(end.back()) + 1);
      return end;
    }
    end.pop_back();
  }
  return std::string(1, '\0');
}

}  // namespace

EtcdClient::EtcdClient(EtcdOptions options, std::unique_ptr<Stubs> stubs)
    : options_(std::move(options)),
      where_(absl::StrJoin(options_.endpoints, ",")),
      stubs_(std::move(stubs)) {}

EtcdClient::~EtcdClient() = default;

absl::StatusOr<std::unique_ptr<EtcdClient>> EtcdClient::Connect(const EtcdOptions& options) {
  absl::StatusOr<std::string> target = Target(options.endpoints);
  if (!target.ok()) return target.status();
  if (options.timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("etcd: the call timeout must be positive");
  }
  auto stubs = std::make_unique<Stubs>();
  stubs->channel = grpc::CreateChannel(*target, grpc::InsecureChannelCredentials());
  stubs->kv = etcdserverpb::KV::NewStub(stubs->channel);
  stubs->lease = etcdserverpb::Lease::NewStub(stubs->channel);
  stubs->election = v3electionpb::Election::NewStub(stubs->channel);
  return std::unique_ptr<EtcdClient>(new EtcdClient(options, std::move(stubs)));
}

namespace {

// No deadline for an infinite `timeout` (a campaign that waits until it leads).
void SetDeadline(grpc::ClientContext* ctx, absl::Duration timeout) {
  if (timeout == absl::InfiniteDuration()) return;
  ctx->set_deadline(std::chrono::system_clock::now() +
                    std::chrono::microseconds(absl::ToInt64Microseconds(timeout)));
}

absl::Status FromGrpc(const grpc::Status& s, const std::string& what, const std::string& where) {
  if (s.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(s.error_code()),
                      absl::StrCat("etcd ", what, " at ", where, ": ", s.error_message()));
}

// One unary call of `stub` (e.g. &etcdserverpb::KV::Stub::Put) within
// `timeout`; gRPC's error as FromGrpc names it.
template <typename Stub, typename Req, typename Resp>
absl::Status Unary(Stub* stub, grpc::Status (Stub::*rpc)(grpc::ClientContext*, const Req&, Resp*),
                   const Req& req, Resp* resp, absl::Duration timeout, const std::string& what,
                   const std::string& where) {
  grpc::ClientContext ctx;
  SetDeadline(&ctx, timeout);
  return FromGrpc((stub->*rpc)(&ctx, req, resp), what, where);
}

}  // namespace

absl::StatusOr<int64_t> EtcdClient::Put(const std::string& key, const std::string& value,
                                        int64_t lease) {
  etcdserverpb::PutRequest req;
  req.set_key(key);
  req.set_value(value);
  req.set_lease(lease);
  etcdserverpb::PutResponse resp;
  if (absl::Status s = Unary(stubs_->kv.get(), &etcdserverpb::KV::Stub::Put, req, &resp,
                             options_.timeout, absl::StrCat("put \"", key, "\""), where_);
      !s.ok()) {
    return s;
  }
  return resp.header().revision();
}

absl::StatusOr<std::optional<KeyValue>> EtcdClient::Get(const std::string& key) {
  etcdserverpb::RangeRequest req;
  req.set_key(key);
  etcdserverpb::RangeResponse resp;
  if (absl::Status s = Unary(stubs_->kv.get(), &etcdserverpb::KV::Stub::Range, req, &resp,
                             options_.timeout, absl::StrCat("get \"", key, "\""), where_);
      !s.ok()) {
    return s;
  }
  if (resp.kvs_size() == 0) return std::optional<KeyValue>();
  return std::optional<KeyValue>(FromProto(resp.kvs(0)));
}

absl::StatusOr<std::vector<KeyValue>> EtcdClient::GetPrefix(const std::string& prefix) {
  etcdserverpb::RangeRequest req;
  req.set_key(prefix.empty() ? std::string(1, '\0') : prefix);
  req.set_range_end(PrefixEnd(prefix));
  req.set_sort_order(etcdserverpb::RangeRequest::ASCEND);
  req.set_sort_target(etcdserverpb::RangeRequest::KEY);
  etcdserverpb::RangeResponse resp;
  if (absl::Status s = Unary(stubs_->kv.get(), &etcdserverpb::KV::Stub::Range, req, &resp,
                             options_.timeout, absl::StrCat("get prefix \"", prefix, "\""), where_);
      !s.ok()) {
    return s;
  }
  std::vector<KeyValue> out;
  out.reserve(static_cast<size_t>(resp.kvs_size()));
  for (const mvccpb::KeyValue& kv : resp.kvs()) out.push_back(FromProto(kv));
  return out;
}

absl::StatusOr<int64_t> EtcdClient::FencedPut(
    const Leadership& leader, const std::vector<std::pair<std::string, std::string>>& puts) {
  if (leader.key.empty() || leader.create_revision <= 0) {
    return absl::InvalidArgumentError("etcd fenced put: no leadership to fence it with");
  }
  etcdserverpb::TxnRequest req;
  etcdserverpb::Compare* cmp = req.add_compare();
  cmp->set_key(leader.key);
  cmp->set_target(etcdserverpb::Compare::CREATE);
  cmp->set_result(etcdserverpb::Compare::EQUAL);
  cmp->set_create_revision(leader.create_revision);
  for (const auto& [key, value] : puts) {
    etcdserverpb::PutRequest* p = req.add_success()->mutable_request_put();
    p->set_key(key);
    p->set_value(value);
  }
  etcdserverpb::TxnResponse resp;
  const std::string what =
      absl::StrCat("fenced put of ", puts.size(), " key(s) as leader \"", leader.key, "\"");
  if (absl::Status s = Unary(stubs_->kv.get(), &etcdserverpb::KV::Stub::Txn, req, &resp,
                             options_.timeout, what, where_);
      !s.ok()) {
    return s;
  }
  if (!resp.succeeded()) {
    return absl::FailedPreconditionError(
        absl::StrCat("etcd ", what, " at ", where_,
                     ": refused, the leader key no longer exists as created at revision ",
                     leader.create_revision, " (leadership lost); nothing written"));
  }
  return resp.header().revision();
}

absl::StatusOr<int64_t> EtcdClient::GrantLease(absl::Duration ttl) {
  const int64_t seconds = static_cast<int64_t>(std::ceil(absl::ToDoubleSeconds(ttl)));
  if (seconds < 1) return absl::InvalidArgumentError("etcd lease: the TTL must be at least 1 s");
  etcdserverpb::LeaseGrantRequest req;
  req.set_ttl(seconds);
  etcdserverpb::LeaseGrantResponse resp;
  if (absl::Status s =
          Unary(stubs_->lease.get(), &etcdserverpb::Lease::Stub::LeaseGrant, req, &resp,
                options_.timeout, absl::StrCat("lease grant (", seconds, " s)"), where_);
      !s.ok()) {
    return s;
  }
  if (!resp.error().empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("etcd lease grant at ", where_, ": ", resp.error()));
  }
  return resp.id();
}

absl::StatusOr<absl::Duration> EtcdClient::KeepAliveOnce(int64_t lease) {
  grpc::ClientContext ctx;
  SetDeadline(&ctx, options_.timeout);
  const std::string what = absl::StrCat("lease keep-alive of ", lease);
  std::unique_ptr<grpc::ClientReaderWriter<etcdserverpb::LeaseKeepAliveRequest,
                                           etcdserverpb::LeaseKeepAliveResponse>>
      stream = stubs_->lease->LeaseKeepAlive(&ctx);
  etcdserverpb::LeaseKeepAliveRequest req;
  req.set_id(lease);
  etcdserverpb::LeaseKeepAliveResponse resp;
  const bool got = stream->Write(req) && stream->Read(&resp);
  stream->WritesDone();
  if (!got) {
    const grpc::Status s = stream->Finish();
    if (!s.ok()) return FromGrpc(s, what, where_);
    return absl::UnavailableError(absl::StrCat("etcd ", what, " at ", where_, ": no answer"));
  }
  ctx.TryCancel();
  stream->Finish().ok();  // cancelled by us: its status says so
  if (resp.ttl() <= 0) {
    return absl::NotFoundError(
        absl::StrCat("etcd ", what, " at ", where_, ": the lease has expired"));
  }
  return absl::Seconds(resp.ttl());
}

absl::Status EtcdClient::RevokeLease(int64_t lease) {
  etcdserverpb::LeaseRevokeRequest req;
  req.set_id(lease);
  etcdserverpb::LeaseRevokeResponse resp;
  return Unary(stubs_->lease.get(), &etcdserverpb::Lease::Stub::LeaseRevoke, req, &resp,
               options_.timeout, absl::StrCat("lease revoke of ", lease), where_);
}

absl::StatusOr<Leadership> EtcdClient::Campaign(const std::string& name, int64_t lease,
                                                const std::string& value, absl::Duration wait) {
  if (wait <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("etcd campaign: the wait must be positive (or infinite)");
  }
  v3electionpb::CampaignRequest req;
  req.set_name(name);
  req.set_lease(lease);
  req.set_value(value);
  v3electionpb::CampaignResponse resp;
  if (absl::Status s =
          Unary(stubs_->election.get(), &v3electionpb::Election::Stub::Campaign, req, &resp, wait,
                absl::StrCat("campaign in \"", name, "\" with lease ", lease), where_);
      !s.ok()) {
    return s;
  }
  Leadership out;
  out.name = resp.leader().name();
  out.key = resp.leader().key();
  out.create_revision = resp.leader().rev();
  out.lease = resp.leader().lease();
  return out;
}

absl::StatusOr<std::optional<KeyValue>> EtcdClient::Leader(const std::string& name) {
  v3electionpb::LeaderRequest req;
  req.set_name(name);
  v3electionpb::LeaderResponse resp;
  grpc::ClientContext ctx;
  SetDeadline(&ctx, options_.timeout);
  const grpc::Status s = stubs_->election->Leader(&ctx, req, &resp);
  // An election without a leader is an error of the election service
  // (ErrElectionNoLeader, code UNKNOWN). Not to be confused with a member
  // that lost its cluster's majority ("etcdserver: no leader", UNAVAILABLE):
  // that is an error.
  if (s.error_code() == grpc::StatusCode::UNKNOWN && s.error_message() == "election: no leader") {
    return std::optional<KeyValue>();
  }
  if (absl::Status st = FromGrpc(s, absl::StrCat("leader of \"", name, "\""), where_); !st.ok()) {
    return st;
  }
  if (!resp.has_kv()) return std::optional<KeyValue>();
  return std::optional<KeyValue>(FromProto(resp.kv()));
}

absl::Status EtcdClient::Resign(const Leadership& leader) {
  v3electionpb::ResignRequest req;
  v3electionpb::LeaderKey* k = req.mutable_leader();
  k->set_name(leader.name);
  k->set_key(leader.key);
  k->set_rev(leader.create_revision);
  k->set_lease(leader.lease);
  v3electionpb::ResignResponse resp;
  return Unary(stubs_->election.get(), &v3electionpb::Election::Stub::Resign, req, &resp,
               options_.timeout, absl::StrCat("resign of \"", leader.key, "\""), where_);
}

}  // namespace rocetune::controller::etcd
