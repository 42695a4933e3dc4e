#include "agent/probe/udp_prober.h"

#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
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

int OpenSocket(const std::string& bind_text) {
  absl::StatusOr<SocketAddress> addr = SocketAddress::Parse(bind_text);
  if (!addr.ok()) return -1;
  int fd = socket(addr->family(), SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  if (addr->family() == AF_INET6) {
    int one = 1;
    setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
  }
  if (bind(fd, addr->addr(), addr->length) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// Longest the thread sleeps, so timeouts are noticed without traffic.
constexpr absl::Duration kMaxWait = absl::Milliseconds(20);

}  // namespace

absl::StatusOr<std::unique_ptr<UdpProber>> UdpProber::Create(const Options& options) {
  int fd4 = OpenSocket(options.bind_v4);
  int fd6 = OpenSocket(options.bind_v6);
  if (fd4 < 0 && fd6 < 0) {
    return absl::UnavailableError(
        absl::StrCat("udp prober: cannot bind ", options.bind_v4, " or ", options.bind_v6));
  }
  int stop_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (stop_fd < 0) {
    if (fd4 >= 0) close(fd4);
    if (fd6 >= 0) close(fd6);
    return absl::UnavailableError(absl::StrCat("udp prober: eventfd: ", strerror(errno)));
  }
  uint64_t seed = options.seed;
  if (seed == 0)
    seed = (static_cast<uint64_t>(std::random_device{}()) << 32) ^ std::random_device{}();
  std::unique_ptr<UdpProber> p(new UdpProber(options, fd4, fd6, stop_fd, seed));
  p->thread_ = std::thread([raw = p.get()] { raw->Loop(); });
  return p;
}

UdpProber::UdpProber(const Options& options, int fd4, int fd6, int stop_fd, uint64_t seed)
    : clock_(options.clock != nullptr ? options.clock : Clock::Real()),
      fd4_(fd4),
      fd6_(fd6),
      stop_fd_(stop_fd),
      session_(std::mt19937_64(seed)()),
      seed_(seed),
      tracker_("udp", "monotonic") {}

UdpProber::~UdpProber() {
  Stop();
  if (fd4_ >= 0) close(fd4_);
  if (fd6_ >= 0) close(fd6_);
  close(stop_fd_);
}

void UdpProber::Stop() {
  if (stopped_) return;
  stopped_ = true;
  uint64_t one = 1;
  if (write(stop_fd_, &one, sizeof(one)) < 0) {
    LogWarning("udp prober: cannot signal stop", {{"error", strerror(errno)}});
  }
  if (thread_.joinable()) thread_.join();
}

absl::Status UdpProber::SetPlan(const v1::ProbePlan& plan) {
  absl::Status s = ValidateProbePlanCommon(plan, ProbePacket::kMaxBytes);
  if (!s.ok()) return s;
  Plan next;
  for (int i = 0; i < plan.peers_size(); ++i) {
    const v1::ProbePeer& peer = plan.peers(i);
    absl::StatusOr<SocketAddress> addr = SocketAddress::Parse(peer.udp_address());
    if (!addr.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("probe plan peers[", i, "] (host_id \"",
                                                     peer.host_id(),
                                                     "\"): ", addr.status().message()));
    }
    if ((addr->family() == AF_INET && fd4_ < 0) || (addr->family() == AF_INET6 && fd6_ < 0)) {
      return absl::InvalidArgumentError(absl::StrCat("probe plan peers[", i, "] udp_address ",
                                                     peer.udp_address(),
                                                     ": no socket of that address family"));
    }
    next.peers.push_back(Peer{peer.peer_class(), *addr});
  }
  const int tos = static_cast<int>(plan.traffic_class());
  if (fd4_ >= 0 && setsockopt(fd4_, IPPROTO_IP, IP_TOS, &tos, sizeof(tos)) != 0) {
    LogOnce("probe.udp.tos", LogLevel::kWarning, "udp prober: IP_TOS not set",
            {{"error", strerror(errno)}});
  }
  if (fd6_ >= 0 && setsockopt(fd6_, IPPROTO_IPV6, IPV6_TCLASS, &tos, sizeof(tos)) != 0) {
    LogOnce("probe.udp.tclass", LogLevel::kWarning, "udp prober: IPV6_TCLASS not set",
            {{"error", strerror(errno)}});
  }
  next.payload_bytes = PlanPayloadBytes(plan);
  next.timeout = PlanTimeout(plan);
  absl::MutexLock l(&mu_);
  next.pacer.emplace(static_cast<int>(next.peers.size()), plan.probes_per_second(),
                     clock_->Monotonic(), ++seed_);
  plan_ = std::move(next);
  return absl::OkStatus();
}

int UdpProber::local_port_v4() const {
  if (fd4_ < 0) return 0;
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  if (getsockname(fd4_, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return 0;
  return SocketAddress::FromSockaddr(reinterpret_cast<sockaddr*>(&ss), len).port();
}

std::vector<v1::LatencyWindow> UdpProber::TakeWindow() { return tracker_.TakeWindow(); }

void UdpProber::SendDue(absl::Duration now) {
  absl::MutexLock l(&mu_);
  if (!plan_.pacer.has_value()) return;
  uint8_t buf[ProbePacket::kMaxBytes];
  for (int i : plan_.pacer->TakeDue(now)) {
    const Peer& peer = plan_.peers[i];
    const int fd = peer.address.family() == AF_INET ? fd4_ : fd6_;
    const absl::Duration t_send = clock_->Monotonic();
    ProbePacket p;
    p.type = ProbeType::kRequest;
    p.session = session_;
    p.seq = tracker_.OnSent(peer.peer_class, t_send, plan_.timeout);
    p.Encode(buf, plan_.payload_bytes);
    ssize_t n = sendto(fd, buf, plan_.payload_bytes, 0, peer.address.addr(), peer.address.length);
    if (n != static_cast<ssize_t>(plan_.payload_bytes)) {
      // The probe stays outstanding and times out as a loss; log the reason once.
      LogOnce(absl::StrCat("probe.udp.sendto.", peer.address.ToString()), LogLevel::kWarning,
              "udp prober: sendto failed; probe will count as lost",
              {{"peer", peer.address.ToString()}, {"error", strerror(errno)}});
    }
  }
}

void UdpProber::Drain(int fd) {
  uint8_t buf[ProbePacket::kMaxBytes + 1];
  for (;;) {
    ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n < 0) return;
    const absl::Duration t_recv = clock_->Monotonic();
    if (static_cast<size_t>(n) > ProbePacket::kMaxBytes) {
      tracker_.OnMalformed(absl::StrCat("oversized packet of ", n, " bytes"));
      continue;
    }
    absl::StatusOr<ProbePacket> p = ProbePacket::Decode(buf, static_cast<size_t>(n));
    if (!p.ok()) {
      tracker_.OnMalformed(p.status().message());
      continue;
    }
    if (p->type != ProbeType::kReply) {
      tracker_.OnForeign(absl::StrCat("unexpected probe packet type ", static_cast<int>(p->type)));
      continue;
    }
    if (p->session != session_) {
      tracker_.OnForeign("reply for another session");
      continue;
    }
    if (p->host_delay_ns > static_cast<uint64_t>(absl::ToInt64Nanoseconds(absl::Hours(1)))) {
      tracker_.OnMalformed("responder delay over an hour");
      continue;
    }
    tracker_.OnReply(p->seq, t_recv, absl::Nanoseconds(static_cast<int64_t>(p->host_delay_ns)));
  }
}

void UdpProber::Loop() {
  for (;;) {
    absl::Duration now = clock_->Monotonic();
    SendDue(now);
    tracker_.ExpireDue(now);
    absl::Duration next;
    {
      absl::MutexLock l(&mu_);
      next = plan_.pacer.has_value() ? plan_.pacer->NextDue() : absl::InfiniteDuration();
    }
    absl::Duration wait = std::clamp(next - clock_->Monotonic(), absl::ZeroDuration(), kMaxWait);
    pollfd fds[3] = {{stop_fd_, POLLIN, 0}, {fd4_, POLLIN, 0}, {fd6_, POLLIN, 0}};
    timespec ts = absl::ToTimespec(wait);
    int r = ppoll(fds, 3, &ts, nullptr);
    if (r < 0 && errno != EINTR) {
      LogError("udp prober: poll failed", {{"error", strerror(errno)}});
      return;
    }
    if (fds[0].revents != 0) return;
    if (fd4_ >= 0 && fds[1].revents != 0) Drain(fd4_);
    if (fd6_ >= 0 && fds[2].revents != 0) Drain(fd6_);
  }
}

}  // namespace rocetune
