#include "agent/probe/verbs_responder.h"

#include <errno.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "agent/probe/probe_packet.h"
#include "daemon/logging.h"

namespace rocetune {
namespace {

constexpr size_t kGrhBytes = 40;
constexpr size_t kMaxCachedAhs = 1024;

// Source address of a received packet, from the 40-byte area before the payload:
// an IPv4 header in its last 20 bytes (RoCEv2 over IPv4) or an IPv6/GRH header.
std::string SourceKey(const uint8_t* payload) {
  const uint8_t* area = payload - kGrhBytes;
  if ((area[20] >> 4) == 4 && (area[20] & 0xf) == 5) {
    return std::string(reinterpret_cast<const char*>(area + 32), 4);
  }
  return std::string(reinterpret_cast<const char*>(area + 8), 16);
}

}  // namespace

absl::StatusOr<std::unique_ptr<VerbsResponder>> VerbsResponder::Start(
    const VerbsEndpoint::Options& options) {
  absl::StatusOr<std::unique_ptr<VerbsEndpoint>> ep = VerbsEndpoint::Open(options);
  if (!ep.ok()) return ep.status();
  int stop_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (stop_fd < 0) {
    return absl::UnavailableError(absl::StrCat("verbs responder: eventfd: ", strerror(errno)));
  }
  std::unique_ptr<VerbsResponder> r(new VerbsResponder(*std::move(ep), stop_fd));
  r->thread_ = std::thread([raw = r.get()] { raw->Loop(); });
  return r;
}

VerbsResponder::VerbsResponder(std::unique_ptr<VerbsEndpoint> ep, int stop_fd)
    : ep_(std::move(ep)),
      stop_fd_(stop_fd),
      gid_(ep_->gid()),
      qpn_(ep_->qpn()),
      qkey_(ep_->qkey()),
      clock_name_(ep_->clock_name()) {
  in_flight_.resize(static_cast<size_t>(ep_->send_depth()));
}

VerbsResponder::~VerbsResponder() {
  Stop();
  close(stop_fd_);
}

void VerbsResponder::Stop() {
  if (stopped_) return;
  stopped_ = true;
  uint64_t one = 1;
  if (write(stop_fd_, &one, sizeof(one)) < 0) {
    LogWarning("verbs responder: cannot signal stop", {{"error", strerror(errno)}});
  }
  if (thread_.joinable()) thread_.join();
}

VerbsResponder::Stats VerbsResponder::stats() const {
  Stats s;
  s.answered = answered_.load();
  s.malformed = malformed_.load();
  s.ignored = ignored_.load();
  s.errors = errors_.load();
  return s;
}

ibv_ah* VerbsResponder::ReplyAh(const VerbsEndpoint::Completion& c) {
  const std::string key = SourceKey(c.data);
  auto it = ah_cache_.find(key);
  if (it != ah_cache_.end()) return it->second;
  absl::StatusOr<ibv_ah*> ah = ep_->CreateAhFromRecv(c);
  if (!ah.ok()) {
    LogOnce("probe.verbs_responder.ah", LogLevel::kWarning,
            "verbs responder: cannot address a reply",
            {{"error", std::string(ah.status().message())}});
    return nullptr;
  }
  if (ah_cache_.size() >= kMaxCachedAhs) {
    for (auto& [k, old] : ah_cache_) ep_->DestroyAh(old);
    ah_cache_.clear();
  }
  ah_cache_[key] = *ah;
  return *ah;
}

bool VerbsResponder::Send(const InFlight& f, uint64_t delay_ns) {
  const int slot = ep_->AcquireSendSlot();
  if (slot < 0) {
    errors_++;
    LogOnce("probe.verbs_responder.sq_full", LogLevel::kWarning,
            "verbs responder: send queue full; reply dropped");
    return false;
  }
  ProbePacket p;
  p.type = f.ack ? ProbeType::kAck : ProbeType::kDelay;
  p.session = f.session;
  p.seq = f.seq;
  p.host_delay_ns = delay_ns;
  p.Encode(ep_->send_buffer(slot), f.length);
  in_flight_[static_cast<size_t>(slot)] = f;
  absl::Status s = ep_->PostSend(slot, f.length, f.ah, f.qpn, qkey_);
  if (!s.ok()) {
    errors_++;
    LogOnce("probe.verbs_responder.post_send", LogLevel::kWarning,
            "verbs responder: reply not posted", {{"error", std::string(s.message())}});
    return false;
  }
  return true;
}

void VerbsResponder::OnCompletion(const VerbsEndpoint::Completion& c) {
  const bool nic_clock = clock_name_ == "nic_completion";
  if (!c.is_recv) {
    const size_t slot = static_cast<size_t>(c.wr_id);
    if (slot >= in_flight_.size()) return;
    InFlight f = in_flight_[slot];
    ep_->ReleaseSendSlot(static_cast<int>(slot));
    if (!c.ok) {
      errors_++;
      LogOnce("probe.verbs_responder.send_error", LogLevel::kWarning,
              "verbs responder: reply completed with error", {{"status", c.error}});
      return;
    }
    if (f.ack && nic_clock) {
      f.ack = false;
      const absl::Duration d = std::max(c.time - f.t_recv, absl::ZeroDuration());
      if (Send(f, static_cast<uint64_t>(absl::ToInt64Nanoseconds(d)))) answered_++;
    }
    return;
  }
  if (!c.ok) {
    LogOnce("probe.verbs_responder.recv_error", LogLevel::kWarning,
            "verbs responder: receive completed with error", {{"status", c.error}});
    return;
  }
  absl::StatusOr<ProbePacket> p = ProbePacket::Decode(c.data, c.length);
  if (!p.ok()) {
    malformed_++;
    LogOnce("probe.verbs_responder.malformed", LogLevel::kWarning,
            "verbs responder: malformed packet ignored",
            {{"error", std::string(p.status().message())}});
    return;
  }
  if (p->type != ProbeType::kRequest) {
    ignored_++;
    LogOnce("probe.verbs_responder.not_request", LogLevel::kWarning,
            "verbs responder: non-request probe packet ignored");
    return;
  }
  ibv_ah* ah = ReplyAh(c);
  if (ah == nullptr) {
    errors_++;
    return;
  }
  InFlight f;
  f.ack = true;
  f.ah = ah;
  f.qpn = c.src_qp;
  f.session = p->session;
  f.seq = p->seq;
  f.t_recv = c.time;
  f.length =
      std::min<size_t>(std::max<size_t>(c.length, ProbePacket::kHeaderBytes), ep_->max_payload());
  // Without NIC timestamps the delay ends just before the ACK is posted: measured
  // after posting it could include a preemption that happened after the ACK left,
  // and exceed the prober's round trip.
  const absl::Duration before_post = ep_->Now();
  if (!Send(f, 0)) return;
  if (!nic_clock) {
    const absl::Duration d = std::max(before_post - f.t_recv, absl::ZeroDuration());
    f.ack = false;
    if (Send(f, static_cast<uint64_t>(absl::ToInt64Nanoseconds(d)))) answered_++;
  }
}

void VerbsResponder::Loop() {
  auto handle = [this](const VerbsEndpoint::Completion& c) { OnCompletion(c); };
  bool device_ok = true;
  for (;;) {
    pollfd fds[3] = {
        {stop_fd_, POLLIN, 0}, {ep_->event_fd(), POLLIN, 0}, {ep_->async_fd(), POLLIN, 0}};
    if (poll(fds, device_ok ? 3 : 1, 20) < 0 && errno != EINTR) {
      LogError("verbs responder: poll failed", {{"error", strerror(errno)}});
      return;
    }
    if (fds[0].revents != 0) return;
    if (!device_ok) continue;
    if ((fds[2].revents != 0 && !ep_->HandleAsyncEvents()) ||
        (fds[1].revents & (POLLERR | POLLHUP)) != 0) {
      device_ok = false;
      LogError("verbs responder: device failed; no longer answering", {{"device", ep_->device()}});
      continue;
    }
    if (fds[1].revents != 0) ep_->AckEvents();
    if (!ep_->Poll(handle, 256)) {
      device_ok = false;
      LogError("verbs responder: CQ poll failed; no longer answering", {{"device", ep_->device()}});
    }
  }
}

}  // namespace rocetune
