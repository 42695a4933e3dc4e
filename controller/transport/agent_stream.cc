#include "controller/transport/agent_stream.h"

#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "controller/admin/identity.h"
#include "controller/telemetry/report_decoder.h"
#include "daemon/logging.h"
#include "grpcpp/support/proto_buffer_reader.h"

namespace rocetune::controller {
namespace {

grpc::Status ToGrpc(const absl::Status& s) {
  return grpc::Status(static_cast<grpc::StatusCode>(s.code()), std::string(s.message()));
}

// The Report fast path's state, one per completion-queue thread (a stream's
// reads are handled on its queue's thread, one at a time): the decoder and the
// message bytes it points into while the Report is handled.
struct ReportFastPath {
  ReportDecoder decoder;
  std::vector<grpc::Slice> slices;
  std::string flat;  // when the message arrived in more than one slice
};
thread_local ReportFastPath fast_path;

}  // namespace

void StreamOp::OnComplete(bool ok) { stream->OnEvent(kind, ok); }

std::shared_ptr<AgentStream> AgentStream::Create(const AgentStreamDeps& deps,
                                                 std::atomic<uint64_t>* ids,
                                                 AcceptedCallback accepted, DoneCallback done) {
  auto stream = std::make_shared<AgentStream>(deps, ids, std::move(accepted), std::move(done));
  stream->self_ = stream;
  return stream;
}

void AgentStream::OnEvent(StreamOp::Kind kind, bool ok) {
  switch (kind) {
    case StreamOp::kAccept:
      OnAccepted(ok);
      return;
    case StreamOp::kRead:
      OnReadDone(ok);
      return;
    case StreamOp::kWrite:
      OnWriteDone(ok);
      return;
    case StreamOp::kFinish:
      OnFinishDone();
      return;
  }
}

void AgentStream::OnAccepted(bool ok) {
  if (!ok) {
    // The server is shutting down: this stream never started.
    if (done_callback_) done_callback_();
    std::shared_ptr<AgentStream> self = std::move(self_);  // may delete this on return
    return;
  }
  if (accepted_callback_) accepted_callback_();
  stream_id_ = ids_->fetch_add(1);
  deps_.metrics->StreamOpened();
  absl::MutexLock lock(&mu_);
  StartReadLocked();
}

void AgentStream::StartReadLocked() {
  read_pending_ = true;
  io_.Read(&in_bytes_, &read_op_);
}

absl::Status AgentStream::ParseInbound() {
  const size_t size = in_bytes_.Length();
  if (size > deps_.max_message_bytes) {
    deps_.metrics->Rejected(Rejection::kOversized);
    return absl::ResourceExhaustedError(absl::StrCat(
        "message of ", size, " bytes exceeds --max_message_bytes=", deps_.max_message_bytes));
  }
  in_ = google::protobuf::Arena::CreateMessage<v1::AgentMessage>(&read_arena_);
  grpc::ProtoBufferReader reader(&in_bytes_);
  if (!in_->ParseFromZeroCopyStream(&reader)) {
    deps_.metrics->Rejected(Rejection::kUnparseable);
    return absl::InvalidArgumentError(
        absl::StrCat("message of ", size,
                     " bytes is not a valid rocetune.v1.AgentMessage (garbage on the "
                     "wire, or another protocol)"));
  }
  return absl::OkStatus();
}

void AgentStream::StartWriteLocked() {
  out_bytes_.Clear();  // the previous write is done
  bool own = false;
  grpc::Status s = grpc::SerializationTraits<v1::ControllerMessage>::Serialize(queue_.front(),
                                                                               &out_bytes_, &own);
  if (!s.ok()) {
    // Only a message over 2 GB fails to serialize; the stream cannot go on.
    LogError("cannot serialize a message to an agent",
             {{"host", host_id_}, {"error", s.error_message()}});
  }
  writing_ = true;
  io_.Write(out_bytes_, &write_op_);
}

void AgentStream::FinishLocked() {
  finished_ = true;
  finish_pending_ = true;
  io_.Finish(finish_status_, &finish_op_);
}

void AgentStream::CloseLocked(const absl::Status& status) {
  if (closing_ || finished_) return;
  closing_ = true;
  finish_status_ = ToGrpc(status);
  if (!writing_) FinishLocked();
}

bool AgentStream::TakeDoneLocked() {
  if (done_ || !finished_ || finish_pending_ || read_pending_ || writing_) return false;
  done_ = true;
  return true;
}

void AgentStream::PushDesiredState(const std::string& version, const v1::ParameterSet& params,
                                   uint32_t lease_seconds) {
  v1::ControllerMessage msg;
  {
    absl::MutexLock lock(&mu_);
    if (closing_ || finished_) return;
    uint64_t nonce = ++nonces_issued_;
    latest_nonce_ = nonce;
    latest_version_ = version;
    v1::DesiredState* ds = msg.mutable_desired_state();
    ds->set_version(version);
    ds->set_nonce(absl::StrCat(nonce));
    *ds->mutable_parameters() = params;
    ds->set_provisional_lease_seconds(lease_seconds);
  }
  Enqueue(std::move(msg));
}

void AgentStream::PushProbePlan(const v1::ProbePlan& plan) {
  v1::ControllerMessage msg;
  {
    absl::MutexLock lock(&mu_);
    if (closing_ || finished_) return;
    uint64_t nonce = ++nonces_issued_;
    latest_probe_nonce_ = nonce;
    latest_probe_version_ = plan.version();
    *msg.mutable_probe_plan() = plan;
    msg.mutable_probe_plan()->set_nonce(absl::StrCat(nonce));
  }
  Enqueue(std::move(msg));
}

void AgentStream::Enqueue(v1::ControllerMessage msg) {
  bool dropped = false;
  {
    absl::MutexLock lock(&mu_);
    if (closing_ || finished_) return;
    // Only the newest message of a kind matters: replace one still waiting in the queue.
    bool replaced = false;
    for (size_t i = writing_ ? 1 : 0; i < queue_.size(); ++i) {
      if (queue_[i].msg_case() == msg.msg_case()) {
        queue_[i] = std::move(msg);
        replaced = true;
        break;
      }
    }
    if (!replaced) {
      if (queue_.size() >= deps_.max_outbound_queue) {
        dropped = true;
      } else {
        queue_.push_back(std::move(msg));
      }
    }
    if (!writing_ && !queue_.empty()) StartWriteLocked();
  }
  if (dropped) deps_.metrics->OutboundDropped();
}

void AgentStream::Close(const absl::Status& status) {
  absl::MutexLock lock(&mu_);
  CloseLocked(status);
}

void AgentStream::OnWriteDone(bool ok) {
  bool done = false;
  {
    absl::MutexLock lock(&mu_);
    queue_.pop_front();
    writing_ = false;
    if (!ok) {
      // The stream is broken; the outstanding read fails too and closes it.
      queue_.clear();
    } else if (!queue_.empty() && !closing_) {
      StartWriteLocked();
    }
    if (!writing_ && closing_ && !finished_) FinishLocked();
    done = TakeDoneLocked();
  }
  if (done) OnDone();
}

void AgentStream::OnFinishDone() {
  bool done = false;
  {
    absl::MutexLock lock(&mu_);
    finish_pending_ = false;
    done = TakeDoneLocked();
  }
  if (done) OnDone();
}

void AgentStream::OnReadDone(bool ok) {
  bool handle = false;
  {
    absl::MutexLock lock(&mu_);
    read_pending_ = false;
    // !ok: the client half-closed or the call broke.
    if (!ok) CloseLocked(absl::OkStatus());
    handle = ok && !closing_ && !finished_;
  }
  absl::Status s;
  if (handle) {
    // A registered host's Report: decoded in place (ReportDecoder). Anything
    // it does not decode, protobuf parses, and refuses if it must.
    if (!host_id_.empty() && in_bytes_.Length() <= deps_.max_message_bytes &&
        DecodeReportInPlace()) {
      s = HandleReport(fast_path.decoder.head(), fast_path.decoder.counters());
      fast_path.slices.clear();
    } else {
      fast_path.slices.clear();
      s = ParseInbound();
      if (s.ok()) s = HandleMessage();
    }
    // Handled (whatever it needed is copied out): an idle stream holds no message.
    in_ = nullptr;
    read_arena_.Reset();
    if (!s.ok()) {
      LogWarning(
          "agent message refused",
          {{"host", host_id_}, {"stream", absl::StrCat(stream_id_)}, {"error", s.ToString()}});
    }
  }
  in_bytes_.Clear();
  bool done = false;
  {
    absl::MutexLock lock(&mu_);
    if (!s.ok()) CloseLocked(s);
    if (!closing_ && !finished_) StartReadLocked();
    done = TakeDoneLocked();
  }
  if (done) OnDone();
}

bool AgentStream::DecodeReportInPlace() {
  std::vector<grpc::Slice>& slices = fast_path.slices;
  slices.clear();
  if (!in_bytes_.Dump(&slices).ok()) return false;
  absl::string_view bytes;
  if (slices.size() == 1) {
    bytes = absl::string_view(reinterpret_cast<const char*>(slices[0].begin()), slices[0].size());
  } else {
    std::string& flat = fast_path.flat;
    flat.clear();
    for (const grpc::Slice& slice : slices) {
      flat.append(reinterpret_cast<const char*>(slice.begin()), slice.size());
    }
    bytes = flat;
  }
  return fast_path.decoder.Decode(bytes);
}

absl::Status AgentStream::HandleReport(const v1::Report& head,
                                       absl::Span<const CounterInput> counters) {
  absl::Time now = deps_.clock->Now();
  ReportFiling filing = ReportFiling::kLive;
  if (absl::Status s = telemetry_->AddReport(head, counters, now, &filing); !s.ok()) {
    deps_.metrics->Rejected(Rejection::kBadReport);
    return s;
  }
  if (filing != ReportFiling::kLive) deps_.metrics->HeldReport(filing == ReportFiling::kHeld);
  // The delay of a held report counts from when it was sent.
  deps_.metrics->ReportReceived(absl::ToDoubleSeconds(
      now - absl::FromUnixNanos(head.end_unix_nanos()) - absl::Nanoseconds(head.held_nanos())));
  if (!head.guard_events().empty()) deps_.fleet->HandleGuardEvents(host_id_, head.guard_events());
  return absl::OkStatus();
}

absl::Status AgentStream::HandleMessage() {
  switch (in_->msg_case()) {
    case v1::AgentMessage::kHello: {
      if (!host_id_.empty()) {
        deps_.metrics->Rejected(Rejection::kBadMessage);
        return absl::FailedPreconditionError(
            absl::StrCat("second Hello on the stream of host ", host_id_));
      }
      // The id's form first: an identity refusal quotes and audits it.
      if (absl::Status s = deps_.fleet->ValidateHello(in_->hello()); !s.ok()) {
        deps_.metrics->Rejected(Rejection::kBadMessage);
        return s;
      }
      if (absl::Status s = CheckHelloIdentity(in_->hello()); !s.ok()) {
        deps_.metrics->Rejected(Rejection::kNoIdentity);
        return s;
      }
      absl::StatusOr<Registration> reg = deps_.fleet->Register(in_->hello(), shared_from_this());
      if (!reg.ok()) {
        deps_.metrics->Rejected(Rejection::kNoIdentity);
        return reg.status();
      }
      host_id_ = reg->host_id;
      telemetry_ = reg->telemetry;
      return absl::OkStatus();
    }
    case v1::AgentMessage::kReport: {
      if (host_id_.empty()) {
        deps_.metrics->Rejected(Rejection::kNotRegistered);
        return absl::FailedPreconditionError(
            "Report before Hello: the first message on a stream must be a Hello");
      }
      thread_local std::vector<CounterInput> counters;
      CountersOf(in_->report(), &counters);
      return HandleReport(in_->report(), counters);
    }
    case v1::AgentMessage::kAck:
    case v1::AgentMessage::kNack: {
      bool is_ack = in_->has_ack();
      if (host_id_.empty()) {
        deps_.metrics->Rejected(Rejection::kNotRegistered);
        return absl::FailedPreconditionError(
            absl::StrCat(is_ack ? "Ack" : "Nack",
                         " before Hello: the first message on a stream must be a Hello"));
      }
      v1::ResourceKind kind = is_ack ? in_->ack().kind() : in_->nack().kind();
      const std::string& version = is_ack ? in_->ack().version() : in_->nack().version();
      const std::string& nonce = is_ack ? in_->ack().nonce() : in_->nack().nonce();
      absl::Status s = HandleReply(kind, version, nonce);
      if (absl::IsAlreadyExists(s)) {  // stale nonce: ignored
        deps_.metrics->StaleReply();
        return absl::OkStatus();
      }
      if (!s.ok()) {
        deps_.metrics->Rejected(Rejection::kUnknownNonce);
        return s;
      }
      if (is_ack) {
        deps_.metrics->Ack();
        deps_.fleet->HandleAck(host_id_, in_->ack());
      } else {
        deps_.metrics->Nack();
        deps_.fleet->HandleNack(host_id_, in_->nack());
      }
      return absl::OkStatus();
    }
    case v1::AgentMessage::MSG_NOT_SET:
      break;
  }
  deps_.metrics->Rejected(Rejection::kBadMessage);
  return absl::InvalidArgumentError(
      "AgentMessage has no known message set (unknown protocol version?)");
}

absl::Status AgentStream::CheckHelloIdentity(const v1::Hello& hello) {
  if (deps_.authorizer == nullptr) return absl::OkStatus();
  const Identity who = IdentityOf(ctx_);
  absl::Status s = deps_.authorizer->Check(who, "Connect");
  if (s.ok() && who.name != hello.host_id()) {
    s = absl::PermissionDeniedError(absl::StrCat("identity \"", who.name,
                                                 "\" may only report as host \"", who.name,
                                                 "\", not as \"", hello.host_id(), "\""));
  }
  if (s.ok()) return s;
  if (deps_.audit) {
    v1::AuditEntry e;
    e.set_unix_nanos(absl::ToUnixNanos(deps_.clock->Now()));
    e.set_actor(who.name);
    e.set_authenticated(who.authenticated);
    e.set_action("agent_denied");
    e.set_subject(hello.host_id());
    e.set_detail(std::string(s.message()));
    if (!hello.host_id().empty()) e.add_host_ids(hello.host_id());
    deps_.audit(e);
  }
  return s;
}

// OK: current; kAlreadyExists: stale (ignore); other: refuse.
absl::Status AgentStream::HandleReply(v1::ResourceKind kind, const std::string& version,
                                      const std::string& nonce) {
  if (kind != v1::DESIRED_STATE && kind != v1::PROBE_PLAN) {
    return absl::InvalidArgumentError(absl::StrCat("reply for resource kind ",
                                                   v1::ResourceKind_Name(kind),
                                                   " that this controller never sent"));
  }
  uint64_t n = 0;
  absl::MutexLock lock(&mu_);
  const uint64_t latest = kind == v1::DESIRED_STATE ? latest_nonce_ : latest_probe_nonce_;
  const std::string& latest_version =
      kind == v1::DESIRED_STATE ? latest_version_ : latest_probe_version_;
  if (!absl::SimpleAtoi(nonce, &n) || n == 0 || n > nonces_issued_ || latest == 0) {
    return absl::InvalidArgumentError(absl::StrCat("reply with nonce \"", nonce,
                                                   "\" that this stream never sent for ",
                                                   v1::ResourceKind_Name(kind)));
  }
  if (n < latest) return absl::AlreadyExistsError("stale nonce");
  if (n != latest || version != latest_version) {
    return absl::InvalidArgumentError(absl::StrCat("reply for version \"", version, "\" but nonce ",
                                                   nonce, " carried version \"", latest_version,
                                                   "\""));
  }
  return absl::OkStatus();
}

void AgentStream::OnDone() {
  if (!host_id_.empty()) deps_.fleet->Unregister(host_id_, stream_id_);
  deps_.metrics->StreamClosed();
  if (done_callback_) done_callback_();
  std::shared_ptr<AgentStream> self = std::move(self_);  // may delete this on return
}

}  // namespace rocetune::controller
