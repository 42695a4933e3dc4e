#include "agent/probe/udp_responder.h"

#include <errno.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "agent/probe/probe_packet.h"
#include "agent/probe/socket_address.h"
#include "daemon/logging.h"

namespace rocetune {

absl::StatusOr<std::unique_ptr<UdpResponder>> UdpResponder::Start(const Options& options) {
  absl::StatusOr<SocketAddress> addr = SocketAddress::Parse(options.listen_address);
  if (!addr.ok()) return addr.status();
  int fd = socket(addr->family(), SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    return absl::UnavailableError(absl::StrCat("udp responder: socket: ", strerror(errno)));
  }
  if (bind(fd, addr->addr(), addr->length) != 0) {
    int err = errno;
    close(fd);
    return absl::UnavailableError(
        absl::StrCat("udp responder: bind ", addr->ToString(), ": ", strerror(err)));
  }
  int stop_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (stop_fd < 0) {
    int err = errno;
    close(fd);
    return absl::UnavailableError(absl::StrCat("udp responder: eventfd: ", strerror(err)));
  }
  std::unique_ptr<UdpResponder> r(new UdpResponder(options, fd, stop_fd));
  sockaddr_storage bound{};
  socklen_t len = sizeof(bound);
  getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &len);
  SocketAddress b = SocketAddress::FromSockaddr(reinterpret_cast<sockaddr*>(&bound), len);
  r->address_ = b.ToString();
  r->port_ = b.port();
  r->thread_ = std::thread([p = r.get()] { p->Loop(); });
  return r;
}

UdpResponder::UdpResponder(const Options& options, int fd, int stop_fd)
    : options_(options),
      clock_(options.clock != nullptr ? options.clock : Clock::Real()),
      fd_(fd),
      stop_fd_(stop_fd) {}

UdpResponder::~UdpResponder() {
  Stop();
  close(fd_);
  close(stop_fd_);
}

void UdpResponder::Stop() {
  if (stopped_) return;
  stopped_ = true;
  uint64_t one = 1;
  if (write(stop_fd_, &one, sizeof(one)) < 0) {
    LogWarning("udp responder: cannot signal stop", {{"error", strerror(errno)}});
  }
  if (thread_.joinable()) thread_.join();
}

UdpResponder::Stats UdpResponder::stats() const {
  Stats s;
  s.answered = answered_.load();
  s.malformed = malformed_.load();
  s.ignored = ignored_.load();
  return s;
}

void UdpResponder::Loop() {
  uint8_t buf[ProbePacket::kMaxBytes + 1];
  for (;;) {
    pollfd fds[2] = {{fd_, POLLIN, 0}, {stop_fd_, POLLIN, 0}};
    if (poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      LogError("udp responder: poll failed", {{"error", strerror(errno)}});
      return;
    }
    if (fds[1].revents != 0) return;
    for (;;) {
      sockaddr_storage from{};
      socklen_t from_len = sizeof(from);
      ssize_t n = recvfrom(fd_, buf, sizeof(buf), 0, reinterpret_cast<sockaddr*>(&from), &from_len);
      if (n < 0) break;
      const absl::Duration t_recv = clock_->Monotonic();
      absl::StatusOr<ProbePacket> p = ProbePacket::Decode(
          buf, static_cast<size_t>(n) > ProbePacket::kMaxBytes ? 0 : static_cast<size_t>(n));
      if (!p.ok()) {
        malformed_++;
        LogOnce(
            "probe.udp_responder.malformed", LogLevel::kWarning,
            "udp responder: malformed packet ignored",
            {{"from",
              SocketAddress::FromSockaddr(reinterpret_cast<sockaddr*>(&from), from_len).ToString()},
             {"error", std::string(p.status().message())}});
        continue;
      }
      if (p->type != ProbeType::kRequest) {
        ignored_++;
        LogOnce("probe.udp_responder.not_request", LogLevel::kWarning,
                "udp responder: non-request probe packet ignored");
        continue;
      }
      if (options_.added_delay > absl::ZeroDuration()) clock_->SleepFor(options_.added_delay);
      ProbePacket reply = *p;
      reply.type = ProbeType::kReply;
      reply.host_delay_ns =
          static_cast<uint64_t>(absl::ToInt64Nanoseconds(clock_->Monotonic() - t_recv));
      reply.Encode(buf, static_cast<size_t>(n));
      if (sendto(fd_, buf, static_cast<size_t>(n), 0, reinterpret_cast<sockaddr*>(&from),
                 from_len) == n) {
        answered_++;
      } else {
        LogOnce("probe.udp_responder.send_error", LogLevel::kWarning,
                "udp responder: reply not sent", {{"error", strerror(errno)}});
      }
    }
  }
}

}  // namespace rocetune
