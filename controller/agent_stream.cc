#include "controller/agent_stream.h"

#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "daemon/logging.h"
#include "grpcpp/support/proto_buffer_reader.h"

namespace rocetune::controller {
namespace {

grpc::Status ToGrpc(const absl::Status& s) {
  return grpc::Status(static_cast<grpc::StatusCode>(s.code()), std::string(s.message()));
}

}  // namespace

AgentStream* AgentStream::Start(const AgentStreamDeps& deps, uint64_t stream_id) {
  auto stream = std::make_shared<AgentStream>(deps, stream_id);
  stream->self_ = stream;
  deps.metrics->StreamOpened();
  stream->StartNextRead();
  return stream.get();
}

void AgentStream::StartNextRead() {
  in_bytes_.Clear();
  StartRead(&in_bytes_);
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
  in_bytes_.Clear();
  return absl::OkStatus();
}

void AgentStream::StartWriteOf(const v1::ControllerMessage& msg) {
  bool own = false;
  out_bytes_.Clear();  // the previous write is done
  grpc::Status s =
      grpc::SerializationTraits<v1::ControllerMessage>::Serialize(msg, &out_bytes_, &own);
  if (!s.ok()) {
    // Only a message over 2 GB fails to serialize; the stream cannot go on.
    LogError("cannot serialize a message to an agent",
             {{"host", host_id_}, {"error", s.error_message()}});
  }
  StartWrite(&out_bytes_);
}

void AgentStream::PushDesiredState(const std::string& version, const v1::ParameterSet& params) {
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
  const v1::ControllerMessage* to_write = nullptr;
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
    if (!writing_ && !queue_.empty()) {
      writing_ = true;
      to_write = &queue_.front();
    }
  }
  if (dropped) deps_.metrics->OutboundDropped();
  if (to_write != nullptr) StartWriteOf(*to_write);
}

void AgentStream::Close(const absl::Status& status) {
  bool finish_now = false;
  grpc::Status st;
  {
    absl::MutexLock lock(&mu_);
    if (closing_ || finished_) return;
    closing_ = true;
    finish_status_ = ToGrpc(status);
    if (!writing_) {
      finished_ = true;
      finish_now = true;
      st = finish_status_;
    }
  }
  if (finish_now) Finish(st);
}

void AgentStream::OnWriteDone(bool ok) {
  const v1::ControllerMessage* to_write = nullptr;
  bool finish_now = false;
  grpc::Status st;
  {
    absl::MutexLock lock(&mu_);
    queue_.pop_front();
    if (!ok) {
      // The stream is broken; OnReadDone(false) will follow and close it.
      queue_.clear();
      writing_ = false;
    } else if (!queue_.empty() && !closing_) {
      to_write = &queue_.front();
    } else {
      writing_ = false;
    }
    if (!writing_ && closing_ && !finished_) {
      finished_ = true;
      finish_now = true;
      st = finish_status_;
    }
  }
  if (to_write != nullptr) StartWriteOf(*to_write);
  if (finish_now) Finish(st);
}

void AgentStream::OnReadDone(bool ok) {
  if (!ok) {
    // Client half-closed or the call broke.
    Close(absl::OkStatus());
    return;
  }
  absl::Status s = ParseInbound();
  if (s.ok()) s = HandleMessage();
  // Handled (whatever it needed is copied out): an idle stream holds no message.
  in_ = nullptr;
  read_arena_.Reset();
  if (!s.ok()) {
    LogWarning("agent message refused",
               {{"host", host_id_}, {"stream", absl::StrCat(stream_id_)}, {"error", s.ToString()}});
    Close(s);
    return;
  }
  {
    absl::MutexLock lock(&mu_);
    if (closing_ || finished_) return;
  }
  StartNextRead();
}

absl::Status AgentStream::HandleMessage() {
  switch (in_->msg_case()) {
    case v1::AgentMessage::kHello: {
      if (!host_id_.empty()) {
        deps_.metrics->Rejected(Rejection::kBadMessage);
        return absl::FailedPreconditionError(
            absl::StrCat("second Hello on the stream of host ", host_id_));
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
      absl::Time now = deps_.clock->Now();
      if (absl::Status s = telemetry_->AddReport(in_->report(), now); !s.ok()) {
        deps_.metrics->Rejected(Rejection::kBadReport);
        return s;
      }
      deps_.metrics->ReportReceived(
          absl::ToDoubleSeconds(now - absl::FromUnixNanos(in_->report().end_unix_nanos())));
      return absl::OkStatus();
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
  std::shared_ptr<AgentStream> self = std::move(self_);  // may delete this on return
}

}  // namespace rocetune::controller
