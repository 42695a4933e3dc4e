#include "agent/stream_client.h"

#include <algorithm>
#include <chrono>
#include <random>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "daemon/logging.h"

namespace rocetune {
namespace {

// Statuses with which the controller refuses this agent's identity or hands
// its host to another stream: retrying soon would only flap.
bool IsRefusal(const absl::Status& s) {
  return s.code() == absl::StatusCode::kPermissionDenied ||
         s.code() == absl::StatusCode::kUnauthenticated ||
         s.code() == absl::StatusCode::kAlreadyExists || s.code() == absl::StatusCode::kAborted;
}

// At most this many guard events wait for a live report (the newest are kept).
constexpr size_t kMaxKeptGuardEvents = 64;

}  // namespace

absl::StatusOr<std::unique_ptr<StreamClient>> StreamClient::Create(StreamClientOptions options,
                                                                   const std::string& target,
                                                                   Clock* clock,
                                                                   Handlers handlers) {
  if (clock == nullptr || !handlers.hello || !handlers.message) {
    return absl::InvalidArgumentError("stream client: clock and both handlers are required");
  }
  auto client = std::unique_ptr<StreamClient>(
      new StreamClient(std::move(options), clock, std::move(handlers)));
  if (absl::Status s = client->MakeChannel(target); !s.ok()) return s;
  return client;
}

StreamClient::StreamClient(StreamClientOptions options, Clock* clock, Handlers handlers)
    : options_(std::move(options)),
      clock_(clock),
      handlers_(std::move(handlers)),
      disconnected_since_(clock_->Monotonic()) {}

absl::Duration StreamClient::DisconnectedFor() const {
  absl::MutexLock lock(&mu_);
  const absl::Duration now = clock_->Monotonic();
  if (connected_ && InContactLocked(now)) return absl::ZeroDuration();
  return std::max(absl::ZeroDuration(), now - disconnected_since_);
}

bool StreamClient::InContactLocked(absl::Duration now) const {
  // A stream the controller refuses (a twin identity) or a proxy drops ends
  // at once and sends nothing: it is not the controller being there.
  return heard_ || now - connected_at_ >= options_.stall_timeout;
}

StreamClient::~StreamClient() { Stop(); }

absl::Status StreamClient::MakeChannel(const std::string& target) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS,
              static_cast<int>(absl::ToInt64Milliseconds(options_.reconnect_min)));
  // The channel retries connecting at least every second: an attempt of
  // Run()'s loop made while the channel waits out its own backoff fails at
  // once, so a long channel backoff stacked on the loop's own (both once 10 s)
  // kept agents away for 11-17 s after a controller restart.
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS,
              static_cast<int>(std::clamp<int64_t>(
                  absl::ToInt64Milliseconds(options_.reconnect_max) / 2, 100, 1000)));
  // After a failed connection the channel asks its resolver for the address
  // again before the next attempt, and the DNS resolver answers at most once
  // per this interval. With gRPC 1.51's default, attempts to reach a stopped
  // controller came 5 s apart (seen with strace), on top of Run()'s backoff.
  args.SetInt(GRPC_ARG_DNS_MIN_TIME_BETWEEN_RESOLUTIONS_MS, 500);
  // A controller that vanished without a FIN (power loss, a cut path) is
  // noticed within about 40 s: HTTP/2 pings every 30 s, 10 s to answer. The
  // stream then fails and the agent reconnects; meanwhile it keeps sampling.
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 30'000);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 10'000);
  std::shared_ptr<grpc::ChannelCredentials> creds = grpc::InsecureChannelCredentials();
  if (options_.tls.enabled()) {
    absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> tls =
        MakeChannelCredentials(options_.tls, &args);
    if (!tls.ok()) return tls.status();
    creds = *std::move(tls);
  }
  channel_ = grpc::CreateCustomChannel(target, creds, args);
  connect_method_ = absl::StrCat("/", v1::AgentService::service_full_name(), "/Connect");
  connect_ = std::make_unique<grpc::internal::RpcMethod>(
      connect_method_.c_str(), grpc::internal::RpcMethod::BIDI_STREAMING, channel_);
  return absl::OkStatus();
}

void StreamClient::Stop() {
  absl::MutexLock lock(&mu_);
  if (stopping_) return;
  stopping_ = true;
  stopped_.Notify();
  if (active_context_ != nullptr) active_context_->TryCancel();
}

StreamStats StreamClient::stats() const {
  absl::MutexLock lock(&mu_);
  StreamStats out = stats_;
  out.reports_held = held_.size();
  out.connected = connected_;
  return out;
}

void StreamClient::Offer(v1::Report* report) {
  absl::MutexLock lock(&mu_);
  if (connected_ && !writing_ && !live_.has_value() && held_.empty()) {
    // Guard events of rounds that could not be sent go out with this one.
    for (v1::GuardEvent& ev : kept_events_) *report->add_guard_events() = std::move(ev);
    kept_events_.clear();
    Pending p{std::string(encoder_.Encode(*report)), clock_->Monotonic(), {}};
    p.events.assign(report->guard_events().begin(), report->guard_events().end());
    live_ = std::move(p);
    return;
  }
  if (!connected_) ++stats_.local_rounds;
  HoldLocked(report);
}

void StreamClient::KeepGuardEventsLocked(v1::Report* report) {
  for (v1::GuardEvent& ev : *report->mutable_guard_events()) kept_events_.push_back(std::move(ev));
  report->clear_guard_events();
  if (kept_events_.size() > kMaxKeptGuardEvents) {
    kept_events_.erase(kept_events_.begin(),
                       kept_events_.end() - static_cast<std::ptrdiff_t>(kMaxKeptGuardEvents));
  }
}

void StreamClient::HoldLocked(v1::Report* report) {
  KeepGuardEventsLocked(report);
  if (options_.report_buffer_max == 0) {
    if (options_.metrics != nullptr) options_.metrics->RecordHeldReportsDropped(1);
    ++stats_.reports_held_dropped;
    return;
  }
  Pending p{std::string(encoder_.Encode(*report)), clock_->Monotonic(), {}};
  held_bytes_ += p.bytes.size();
  held_.push_back(std::move(p));
  TrimHeldLocked();
}

void StreamClient::TrimHeldLocked() {
  size_t dropped = 0;
  while (held_.size() > options_.report_buffer_max ||
         (held_bytes_ > options_.report_buffer_max_bytes && !held_.empty())) {
    Pending& oldest = held_.front();
    held_bytes_ -= oldest.bytes.size();
    // A report that failed live carried guard events: they are not lost with it.
    if (!oldest.events.empty()) {
      v1::Report events;
      for (v1::GuardEvent& ev : oldest.events) *events.add_guard_events() = std::move(ev);
      KeepGuardEventsLocked(&events);
    }
    held_.pop_front();
    ++dropped;
  }
  if (options_.metrics != nullptr) {
    options_.metrics->SetReportsHeld(held_.size());
    if (dropped > 0) options_.metrics->RecordHeldReportsDropped(dropped);
  }
  stats_.reports_held_dropped += dropped;
}

bool StreamClient::WriteBytes(Stream* stream, absl::string_view bytes) {
  // gRPC keeps the slice (refcounted) past Write: it gets its own copy.
  grpc::Slice slice(bytes.data(), bytes.size());
  grpc::ByteBuffer buffer(&slice, 1);
  write_started_nanos_.store(absl::ToInt64Nanoseconds(clock_->Monotonic()));
  const bool ok = stream->Write(buffer);
  write_started_nanos_.store(-1);
  return ok;
}

void StreamClient::WriteQueued(Stream* stream) {
  std::string held_bytes;
  uint64_t held_sent = 0;  // since the ring was last empty
  while (true) {
    enum { kReply, kLive, kHeld } kind;
    std::string reply;
    Pending pending;
    {
      absl::MutexLock lock(&mu_);
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stopping_ || stream_over_ || !replies_.empty() || live_.has_value() ||
               !held_.empty();
      };
      mu_.Await(absl::Condition(&ready));
      if (stopping_ || stream_over_) return;
      if (!replies_.empty()) {
        kind = kReply;
        reply = std::move(replies_.front());
        replies_.pop_front();
      } else if (live_.has_value()) {
        kind = kLive;
        pending = std::move(*live_);
        live_.reset();
      } else {
        kind = kHeld;
        pending = std::move(held_.front());
        held_bytes_ -= pending.bytes.size();
        held_.pop_front();
      }
      writing_ = true;
    }
    bool ok = false;
    if (kind == kReply) {
      ok = WriteBytes(stream, reply);
    } else if (kind == kLive) {
      ok = WriteBytes(stream, pending.bytes);
    } else {
      const int64_t held =
          std::max<int64_t>(1, absl::ToInt64Nanoseconds(clock_->Monotonic() - pending.taken));
      if (!ReportWireEncoder::WithHeld(pending.bytes, held, &held_bytes)) {
        LogOnce("agent.held_report_encoding", LogLevel::kError,
                "dropping a held report whose encoding could not be read back");
        absl::MutexLock lock(&mu_);
        writing_ = false;
        continue;
      }
      ok = WriteBytes(stream, held_bytes);
    }
    absl::MutexLock lock(&mu_);
    writing_ = false;
    if (!ok) {
      // The report goes back to the front of the ring, with its guard events
      // (a reply is for this stream only).
      if (kind != kReply) {
        held_bytes_ += pending.bytes.size();
        held_.push_front(std::move(pending));
        TrimHeldLocked();
      }
      return;
    }
    if (kind == kReply) continue;
    ++stats_.reports_sent;
    if (kind == kLive) {
      if (options_.metrics != nullptr) options_.metrics->RecordReportSent();
    } else {
      ++stats_.reports_held_sent;
      if (options_.metrics != nullptr) {
        options_.metrics->RecordHeldReportSent();
        options_.metrics->SetReportsHeld(held_.size());
      }
      ++held_sent;
      if (held_.empty()) {
        LogInfo("sent the reports held while disconnected or writing slowly",
                {{"controller", options_.controller}, {"reports", absl::StrCat(held_sent)}});
        held_sent = 0;
      }
    }
  }
}

absl::Status StreamClient::RunStream() {
  absl::StatusOr<v1::Hello> hello = handlers_.hello();
  if (!hello.ok()) return hello.status();
  grpc::ClientContext ctx;
  // The initial metadata goes with the Hello. Otherwise creating the stream
  // sends it and waits for a connection outside any write, so neither the
  // stall timeout nor the local rounds below cover that wait: with the
  // controller cut off it lasted until gRPC's 20 s connect timeout.
  ctx.set_initial_metadata_corked(true);
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return absl::OkStatus();
    active_context_ = &ctx;
    stream_over_ = false;
  }
  auto clear_ctx = [&]() {
    absl::MutexLock lock(&mu_);
    active_context_ = nullptr;
  };
  // Cancels the stream when a write hangs (see AgentOptions::stall_timeout).
  absl::Notification watch_over;
  std::atomic<bool> stalled{false};
  std::thread stall_watch([&]() {
    const absl::Duration tick =
        std::clamp(options_.stall_timeout / 4, absl::Milliseconds(10), absl::Milliseconds(250));
    while (!clock_->WaitForNotification(watch_over, tick)) {
      const int64_t since = write_started_nanos_.load();
      if (since < 0 || clock_->Monotonic() - absl::Nanoseconds(since) < options_.stall_timeout) {
        continue;
      }
      stalled.store(true);
      LogWarning("a write to the controller stalled; ending the stream",
                 {{"controller", options_.controller},
                  {"stalled_for", absl::FormatDuration(options_.stall_timeout)}});
      {
        absl::MutexLock lock(&mu_);
        ++stats_.stalls;
      }
      if (options_.metrics != nullptr) options_.metrics->RecordStall();
      ctx.TryCancel();
      return;
    }
  });
  auto end_watch = [&]() {
    watch_over.Notify();
    stall_watch.join();
  };
  std::unique_ptr<Stream> stream(
      grpc::internal::ClientReaderWriterFactory<grpc::ByteBuffer, grpc::ByteBuffer>::Create(
          channel_.get(), *connect_, &ctx));
  v1::AgentMessage first;
  *first.mutable_hello() = *std::move(hello);
  // Through a path that silently drops packets the Hello waits up to the
  // stall timeout (the connection is not up, or its flow-control window is
  // spent); the sampling loop goes on meanwhile on its own thread.
  std::string hello_bytes;
  if (!first.SerializeToString(&hello_bytes) || !WriteBytes(stream.get(), hello_bytes)) {
    grpc::Status st = stream->Finish();
    end_watch();
    clear_ctx();
    return absl::UnavailableError(
        absl::StrCat("controller ", options_.controller, ": ",
                     stalled.load() ? "connecting stalled" : st.error_message()));
  }
  {
    absl::MutexLock lock(&mu_);
    connected_ = true;
    heard_ = false;
    connected_at_ = clock_->Monotonic();
    ++stats_.connects;
  }
  if (options_.metrics != nullptr) options_.metrics->SetConnected(true);
  LogInfo("connected to controller",
          {{"controller", options_.controller}, {"host", options_.host_id}});
  absl::Notification reader_done;
  std::thread reader([&]() {
    grpc::ByteBuffer buffer;
    while (stream->Read(&buffer)) {
      std::vector<grpc::Slice> slices;
      if (!buffer.Dump(&slices).ok()) continue;
      std::string wire;
      for (const grpc::Slice& sl : slices) {
        wire.append(reinterpret_cast<const char*>(sl.begin()), sl.size());
      }
      v1::ControllerMessage msg;
      if (!msg.ParseFromString(wire)) {
        LogOnce("agent.unparsable_controller_message", LogLevel::kWarning,
                "ignoring a controller message that does not parse");
        continue;
      }
      {
        absl::MutexLock lock(&mu_);
        heard_ = true;
      }
      std::optional<v1::AgentMessage> reply = handlers_.message(msg, wire);
      std::string bytes;
      if (reply.has_value() && reply->SerializeToString(&bytes)) {
        absl::MutexLock lock(&mu_);
        replies_.push_back(std::move(bytes));
      }
    }
    {
      absl::MutexLock lock(&mu_);
      stream_over_ = true;
    }
    reader_done.Notify();
  });
  WriteQueued(stream.get());
  bool stopping = false;
  {
    absl::MutexLock lock(&mu_);
    const absl::Duration now = clock_->Monotonic();
    // Without the controller since now, if this stream was contact with it.
    if (InContactLocked(now)) disconnected_since_ = now;
    connected_ = false;
    stopping = stopping_;
    // What was not written waits in the ring; replies were for this stream.
    replies_.clear();
    if (live_.has_value()) {
      held_bytes_ += live_->bytes.size();
      held_.push_front(std::move(*live_));
      live_.reset();
      TrimHeldLocked();
    }
  }
  stream->WritesDone();
  // When the controller ended the stream, Finish returns its status (a
  // refusal must be seen as one); cancelling first would replace it with
  // CANCELLED. A write that failed may precede the controller's status by a
  // moment.
  if (!stopping && !reader_done.HasBeenNotified()) {
    reader_done.WaitForNotificationWithTimeout(absl::Milliseconds(200));
  }
  if (!reader_done.HasBeenNotified()) ctx.TryCancel();
  reader.join();
  grpc::Status st = stream->Finish();
  end_watch();
  clear_ctx();
  if (options_.metrics != nullptr) options_.metrics->SetConnected(false);
  if (stopping) return absl::OkStatus();
  const absl::Status ended(static_cast<absl::StatusCode>(st.error_code()), st.error_message());
  if (IsRefusal(ended)) {
    return absl::Status(ended.code(), absl::StrCat("controller ", options_.controller,
                                                   " refused this agent: ", st.error_message()));
  }
  return absl::UnavailableError(
      absl::StrCat("stream to ", options_.controller,
                   " ended: ", stalled.load() ? "a write stalled" : st.error_message()));
}

absl::Status StreamClient::Run() {
  absl::Duration backoff = options_.reconnect_min;
  std::mt19937_64 rng(std::random_device{}());
  auto stopping = [this]() {
    absl::MutexLock lock(&mu_);
    return stopping_;
  };
  while (!stopping()) {
    const absl::Duration start = clock_->Monotonic();
    // This loop's jittered backoff is the only one: a channel still waiting
    // out its own reconnect backoff fails the call at once, and the two
    // stacked kept hosts away up to 9 s after a controller restart (measured by
    // tests/e2e/controller_unreachable_e2e_test).
    grpc::experimental::ChannelResetConnectionBackoff(channel_.get());
    // After a failed attempt the channel hands a call made at once its last
    // error ("connection refused") until its own reconnect, which the reset
    // has just started, completes: such attempts took 1 ms and failed though
    // the controller had been back for seconds. Waiting briefly for the
    // channel to connect lets the attempt see the controller. (A deadline
    // given to gRPC is in its time, the real one.)
    channel_->WaitForConnected(std::chrono::system_clock::now() + std::chrono::milliseconds(300));
    if (stopping()) break;
    absl::Status s = RunStream();
    if (stopping()) break;
    if (s.code() == absl::StatusCode::kInvalidArgument) return s;
    if (clock_->Monotonic() - start > absl::Seconds(30)) backoff = options_.reconnect_min;
    if (IsRefusal(s)) {
      LogError("controller refused this agent; waiting before trying again",
               {{"controller", options_.controller},
                {"host", options_.host_id},
                {"retry_in", absl::FormatDuration(options_.refused_backoff)},
                {"error", std::string(s.message())}});
      if (clock_->WaitForNotification(stopped_, options_.refused_backoff)) break;
      continue;
    }
    LogOnce(absl::StrCat("agent.disconnected:", options_.controller), LogLevel::kWarning,
            "controller unreachable; retrying with backoff",
            {{"controller", options_.controller}, {"error", std::string(s.message())}});
    // Jittered (half to all of the backoff), so a fleet does not return in step.
    std::uniform_real_distribution<double> share(0.5, 1.0);
    const absl::Duration wait = backoff * share(rng);
    LogDebug("connect attempt failed",
             {{"host", options_.host_id},
              {"attempt_took", absl::FormatDuration(clock_->Monotonic() - start)},
              {"retry_in", absl::FormatDuration(wait)},
              {"error", std::string(s.message())}});
    if (clock_->WaitForNotification(stopped_, wait)) break;
    backoff = std::min(backoff * 2, options_.reconnect_max);
  }
  return absl::OkStatus();
}

}  // namespace rocetune
