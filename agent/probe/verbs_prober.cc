#include "agent/probe/verbs_prober.h"

#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <random>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "agent/probe/probe_packet.h"
#include "agent/probe/probe_plan.h"
#include "daemon/logging.h"

namespace rocetune {
namespace {

constexpr absl::Duration kMaxWait = absl::Milliseconds(20);
constexpr absl::Duration kResolveRetry = absl::Seconds(1);
constexpr uint32_t kMaxQpn = 0xFFFFFF;
// How long Stop() waits for an address resolution in progress.
constexpr absl::Duration kResolverJoinWait = absl::Seconds(2);

}  // namespace

absl::StatusOr<std::unique_ptr<VerbsProber>> VerbsProber::Create(const Options& options) {
  absl::StatusOr<std::unique_ptr<VerbsEndpoint>> ep = VerbsEndpoint::Open(options.endpoint);
  if (!ep.ok()) return ep.status();
  int stop_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (stop_fd < 0) {
    return absl::UnavailableError(absl::StrCat("verbs prober: eventfd: ", strerror(errno)));
  }
  uint64_t seed = options.seed;
  if (seed == 0)
    seed = (static_cast<uint64_t>(std::random_device{}()) << 32) ^ std::random_device{}();
  std::unique_ptr<VerbsProber> p(new VerbsProber(*std::move(ep), seed, stop_fd));
  p->resolver_thread_ = std::thread(&VerbsProber::ResolverLoop, p->resolver_);
  p->thread_ = std::thread([raw = p.get()] { raw->Loop(); });
  return p;
}

VerbsProber::VerbsProber(std::unique_ptr<VerbsEndpoint> ep, uint64_t seed, int stop_fd)
    : ep_(std::move(ep)),
      session_(std::mt19937_64(seed)()),
      seed_(seed),
      stop_fd_(stop_fd),
      gid_(ep_->gid()),
      qpn_(ep_->qpn()),
      clock_name_(ep_->clock_name()),
      tracker_("verbs", ep_->clock_name()),
      resolver_(std::make_shared<Resolver>()) {
  resolver_->ep = ep_;
}

VerbsProber::~VerbsProber() {
  Stop();
  close(stop_fd_);
}

void VerbsProber::Stop() {
  if (stopped_) return;
  stopped_ = true;
  uint64_t one = 1;
  if (write(stop_fd_, &one, sizeof(one)) < 0) {
    LogWarning("verbs prober: cannot signal stop", {{"error", strerror(errno)}});
  }
  if (thread_.joinable()) thread_.join();
  bool busy;
  {
    absl::MutexLock l(&resolver_->mu);
    resolver_->stop = true;
    auto idle = [r = resolver_.get()]() ABSL_SHARED_LOCKS_REQUIRED(r->mu) { return !r->busy; };
    busy = !resolver_->mu.AwaitWithTimeout(absl::Condition(&idle), kResolverJoinWait);
    for (const ResolveResult& r : resolver_->results) {
      if (r.ah != nullptr) ep_->DestroyAh(r.ah);
    }
    resolver_->results.clear();
  }
  if (!resolver_thread_.joinable()) return;
  if (busy) {
    LogWarning("verbs prober: address resolution still blocked in the kernel; leaving it to finish",
               {{"device", ep_->device()}});
    resolver_thread_.detach();
  } else {
    resolver_thread_.join();
  }
}

void VerbsProber::ResolverLoop(std::shared_ptr<Resolver> r) {
  auto has_work = [r = r.get()]()
                      ABSL_SHARED_LOCKS_REQUIRED(r->mu) { return r->stop || !r->jobs.empty(); };
  for (;;) {
    ResolveJob job;
    {
      absl::MutexLock l(&r->mu);
      r->mu.Await(absl::Condition(&has_work));
      if (r->stop) return;
      job = r->jobs.front();
      r->jobs.pop_front();
      r->busy = true;
    }
    absl::StatusOr<ibv_ah*> ah = r->ep->CreateAh(job.gid, job.traffic_class);
    ResolveResult res;
    res.generation = job.generation;
    res.peer = job.peer;
    if (ah.ok()) {
      res.ah = *ah;
    } else {
      res.error = std::string(ah.status().message());
    }
    absl::MutexLock l(&r->mu);
    r->busy = false;
    if (r->stop) {
      if (res.ah != nullptr) r->ep->DestroyAh(res.ah);
      return;
    }
    r->results.push_back(std::move(res));
  }
}

void VerbsProber::StartResolve(int peer_index, absl::Duration now) {
  Peer& peer = plan_.peers[peer_index];
  peer.resolving = true;
  peer.resolve_started = now;
  absl::MutexLock l(&resolver_->mu);
  resolver_->jobs.push_back(ResolveJob{generation_, peer_index, peer.gid, plan_.traffic_class});
}

void VerbsProber::TakeResolved(absl::Duration now) {
  std::vector<ResolveResult> results;
  {
    absl::MutexLock l(&resolver_->mu);
    results.swap(resolver_->results);
  }
  for (const ResolveResult& r : results) {
    if (r.generation != generation_ || r.peer < 0 ||
        static_cast<size_t>(r.peer) >= plan_.peers.size()) {
      if (r.ah != nullptr) ep_->DestroyAh(r.ah);
      continue;
    }
    Peer& peer = plan_.peers[r.peer];
    peer.resolving = false;
    if (r.ah != nullptr) {
      peer.ah = r.ah;
      continue;
    }
    peer.failed_once = true;
    peer.next_resolve = now + kResolveRetry;
    LogOnce(absl::StrCat("probe.verbs.resolve.", peer.gid_text), LogLevel::kWarning,
            "verbs prober: peer GID not resolvable; its probes count as lost",
            {{"peer_gid", peer.gid_text}, {"peer_class", peer.peer_class}, {"error", r.error}});
  }
}

absl::Status VerbsProber::SetPlan(const v1::ProbePlan& plan) {
  absl::Status s = ValidateProbePlanCommon(plan, ep_->max_payload());
  if (!s.ok()) return s;
  Plan next;
  for (int i = 0; i < plan.peers_size(); ++i) {
    const v1::ProbePeer& pp = plan.peers(i);
    Peer peer;
    peer.peer_class = pp.peer_class();
    peer.gid_text = pp.gid();
    if (inet_pton(AF_INET6, pp.gid().c_str(), peer.gid.raw) != 1) {
      return absl::InvalidArgumentError(absl::StrCat("probe plan peers[", i, "] (host_id \"",
                                                     pp.host_id(), "\") gid \"", pp.gid(),
                                                     "\" is not an IPv6-format GID"));
    }
    if (pp.qpn() == 0 || pp.qpn() > kMaxQpn) {
      return absl::InvalidArgumentError(absl::StrCat("probe plan peers[", i, "] (host_id \"",
                                                     pp.host_id(), "\") qpn ", pp.qpn(),
                                                     " must be in [1, 2^24)"));
    }
    peer.qpn = pp.qpn();
    peer.qkey = pp.qkey() != 0 ? pp.qkey() : ep_->qkey();
    next.peers.push_back(std::move(peer));
  }
  next.payload_bytes = std::min(PlanPayloadBytes(plan), ep_->max_payload());
  next.traffic_class = static_cast<uint8_t>(plan.traffic_class());
  next.timeout = PlanTimeout(plan);
  absl::MutexLock l(&mu_);
  next.pacer.emplace(static_cast<int>(next.peers.size()), plan.probes_per_second(), ep_->Now(),
                     ++seed_);
  next_plan_ = std::move(next);
  return absl::OkStatus();
}

std::vector<v1::LatencyWindow> VerbsProber::TakeWindow() { return tracker_.TakeWindow(); }

void VerbsProber::SendDue(absl::Duration now) {
  if (!plan_.pacer.has_value()) return;
  for (int i : plan_.pacer->TakeDue(now)) {
    Peer& peer = plan_.peers[i];
    if (!device_ok_) {
      tracker_.OnSendFailed(peer.peer_class, absl::StrCat("device ", ep_->device(), " failed"));
      continue;
    }
    if (peer.ah == nullptr) {
      if (!peer.resolving && now >= peer.next_resolve) StartResolve(i, now);
      // The first resolution of a peer gets up to the probe timeout before its
      // probes count as lost; after a failure they count at once.
      if (peer.resolving && !peer.failed_once && now - peer.resolve_started < plan_.timeout) {
        continue;
      }
      tracker_.OnSendFailed(peer.peer_class,
                            absl::StrCat("peer GID ", peer.gid_text, " not resolved"));
      continue;
    }
    const int slot = ep_->AcquireSendSlot();
    if (slot < 0) {
      tracker_.OnSendFailed(peer.peer_class, "send queue full");
      continue;
    }
    ProbePacket p;
    p.type = ProbeType::kRequest;
    p.session = session_;
    p.seq = tracker_.OnSent(peer.peer_class, ep_->Now(), plan_.timeout);
    p.Encode(ep_->send_buffer(slot), plan_.payload_bytes);
    slot_seq_[slot] = p.seq;
    absl::Status s = ep_->PostSend(slot, plan_.payload_bytes, peer.ah, peer.qpn, peer.qkey);
    if (!s.ok()) {
      // Stays outstanding and expires as a loss.
      LogOnce(absl::StrCat("probe.verbs.post_send.", peer.gid_text), LogLevel::kWarning,
              "verbs prober: post_send failed; probe will count as lost",
              {{"peer_gid", peer.gid_text}, {"error", std::string(s.message())}});
    }
  }
}

void VerbsProber::OnCompletion(const VerbsEndpoint::Completion& c) {
  if (!c.is_recv) {
    const int slot = static_cast<int>(c.wr_id);
    if (slot < 0 || static_cast<size_t>(slot) >= slot_seq_.size()) return;
    if (c.ok) {
      if (clock_name_ == "nic_completion") tracker_.OnSendCompleted(slot_seq_[slot], c.time);
    } else {
      LogOnce("probe.verbs.send_completion_error", LogLevel::kWarning,
              "verbs prober: send completed with error; probe will count as lost",
              {{"status", c.error}});
    }
    ep_->ReleaseSendSlot(slot);
    return;
  }
  if (!c.ok) {
    LogOnce("probe.verbs.recv_completion_error", LogLevel::kWarning,
            "verbs prober: receive completed with error", {{"status", c.error}});
    return;
  }
  absl::StatusOr<ProbePacket> p = ProbePacket::Decode(c.data, c.length);
  if (!p.ok()) {
    tracker_.OnMalformed(p.status().message());
    return;
  }
  if (p->session != session_) {
    tracker_.OnForeign("answer for another session");
    return;
  }
  const absl::Duration t = clock_name_ == "nic_completion" ? c.time : ep_->Now();
  if (p->type == ProbeType::kAck) {
    tracker_.OnEcho(p->seq, t);
  } else if (p->type == ProbeType::kDelay) {
    if (p->host_delay_ns > static_cast<uint64_t>(absl::ToInt64Nanoseconds(absl::Hours(1)))) {
      tracker_.OnMalformed("responder delay over an hour");
      return;
    }
    tracker_.OnDelay(p->seq, absl::Nanoseconds(static_cast<int64_t>(p->host_delay_ns)));
  } else {
    tracker_.OnForeign(absl::StrCat("unexpected probe packet type ", static_cast<int>(p->type)));
  }
}

void VerbsProber::Loop() {
  slot_seq_.assign(static_cast<size_t>(ep_->send_depth()), 0);
  auto handle = [this](const VerbsEndpoint::Completion& c) { OnCompletion(c); };
  for (;;) {
    {
      absl::MutexLock l(&mu_);
      if (next_plan_.has_value()) {
        for (Peer& old : plan_.peers) {
          if (old.ah != nullptr) ep_->DestroyAh(old.ah);
        }
        plan_ = *std::move(next_plan_);
        next_plan_.reset();
        ++generation_;
        const absl::Duration t = ep_->Now();
        for (size_t i = 0; i < plan_.peers.size(); ++i) StartResolve(static_cast<int>(i), t);
      }
    }
    const absl::Duration now = ep_->Now();
    TakeResolved(now);
    SendDue(now);
    tracker_.ExpireDue(now);
    const absl::Duration next =
        plan_.pacer.has_value() ? plan_.pacer->NextDue() : absl::InfiniteDuration();
    const absl::Duration wait = std::clamp(next - ep_->Now(), absl::ZeroDuration(), kMaxWait);
    pollfd fds[3] = {
        {stop_fd_, POLLIN, 0}, {ep_->event_fd(), POLLIN, 0}, {ep_->async_fd(), POLLIN, 0}};
    timespec ts = absl::ToTimespec(wait);
    if (ppoll(fds, device_ok_ ? 3 : 1, &ts, nullptr) < 0 && errno != EINTR) {
      LogError("verbs prober: poll failed", {{"error", strerror(errno)}});
      return;
    }
    if (fds[0].revents != 0) return;
    if (!device_ok_) continue;
    if (fds[2].revents != 0 && !ep_->HandleAsyncEvents()) {
      device_ok_ = false;
      LogError("verbs prober: device failed; probes now count as lost",
               {{"device", ep_->device()}});
      continue;
    }
    if ((fds[1].revents & (POLLERR | POLLHUP)) != 0) {
      device_ok_ = false;
      LogError("verbs prober: completion channel closed; probes now count as lost",
               {{"device", ep_->device()}});
      continue;
    }
    if (fds[1].revents != 0) ep_->AckEvents();
    if (!ep_->Poll(handle, 256)) {
      device_ok_ = false;
      LogError("verbs prober: CQ poll failed; probes now count as lost",
               {{"device", ep_->device()}});
    }
  }
}

}  // namespace rocetune
