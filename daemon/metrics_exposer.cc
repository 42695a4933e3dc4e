#include "daemon/metrics_exposer.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <exception>
#include <optional>
#include <sstream>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "daemon/logging.h"
#include "prometheus/metric_family.h"
#include "prometheus/text_serializer.h"

namespace rocetune {
namespace {

using Clock = std::chrono::steady_clock;

constexpr size_t kMaxHeaderBytes = 8 * 1024;
constexpr size_t kMaxConnections = 256;
constexpr auto kHeaderDeadline = std::chrono::seconds(5);
constexpr auto kWriteDeadline = std::chrono::seconds(5);
constexpr auto kLinger = std::chrono::seconds(2);
// After accept() fails for lack of descriptors or memory, the listener is
// left out of poll() this long instead of spinning on it.
constexpr auto kAcceptBackoff = std::chrono::milliseconds(100);
// Accepts per poll round, so that a burst of arrivals does not starve the
// connections already open.
constexpr int kAcceptsPerRound = 64;

std::string ErrnoText(int err) { return std::strerror(err); }

enum class Phase {
  kReadingHeader,  // deadline: kHeaderDeadline from accept
  kWriting,        // deadline: kWriteDeadline from the end of the header
  kLingering,      // answered, write side shut down; deadline: kLinger
};

struct Connection {
  int fd = -1;  // -1 once closed
  Phase phase = Phase::kReadingHeader;
  Clock::time_point deadline;
  std::string in;   // the request header so far
  std::string out;  // the answer
  size_t sent = 0;
};

void CloseConnection(Connection& c) {
  if (c.fd >= 0) close(c.fd);
  c.fd = -1;
}

const char* Reason(int code) {
  switch (code) {
    case 200:
      return "OK";
    case 400:
      return "Bad Request";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 431:
      return "Request Header Fields Too Large";
    default:
      return "Internal Server Error";
  }
}

// A complete HTTP/1.1 answer. Content-Length is always `body`'s size; `body`
// itself is sent only when `with_body` (not for HEAD).
std::string Answer(int code, absl::string_view content_type, const std::string& body,
                   bool with_body, absl::string_view extra_headers = "") {
  std::string out = absl::StrCat(
      "HTTP/1.1 ", code, " ", Reason(code), "\r\nContent-Type: ", content_type,
      "\r\nContent-Length: ", body.size(), "\r\n", extra_headers, "Connection: close\r\n\r\n");
  if (with_body) out += body;
  return out;
}

std::string PlainAnswer(int code, bool with_body, absl::string_view extra_headers = "") {
  return Answer(code, "text/plain; charset=utf-8", absl::StrCat(code, " ", Reason(code), "\n"),
                with_body, extra_headers);
}

bool IsTokenChar(char ch) {
  return absl::ascii_isalnum(static_cast<unsigned char>(ch)) ||
         std::strchr("!#$%&'*+-.^_`|~", ch) != nullptr;
}

struct RequestLine {
  std::string method;
  std::string path;  // without query string
};

// Parses "METHOD SP request-target SP HTTP/x.y"; nullopt when malformed.
std::optional<RequestLine> ParseRequestLine(absl::string_view line) {
  size_t sp1 = line.find(' ');
  if (sp1 == absl::string_view::npos || sp1 == 0) return std::nullopt;
  size_t sp2 = line.find(' ', sp1 + 1);
  if (sp2 == absl::string_view::npos || sp2 == sp1 + 1) return std::nullopt;
  absl::string_view method = line.substr(0, sp1);
  absl::string_view target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  absl::string_view version = line.substr(sp2 + 1);
  if (!std::all_of(method.begin(), method.end(), IsTokenChar)) return std::nullopt;
  if (version.size() != 8 || version.substr(0, 5) != "HTTP/" ||
      !absl::ascii_isdigit(static_cast<unsigned char>(version[5])) || version[6] != '.' ||
      !absl::ascii_isdigit(static_cast<unsigned char>(version[7]))) {
    return std::nullopt;
  }
  for (char ch : target) {
    if (static_cast<unsigned char>(ch) <= 0x20 || ch == 0x7f) return std::nullopt;
  }
  // Absolute form (as sent to proxies): keep only the path.
  for (absl::string_view scheme : {"http://", "https://"}) {
    if (target.size() >= scheme.size() &&
        absl::EqualsIgnoreCase(target.substr(0, scheme.size()), scheme)) {
      size_t slash = target.find('/', scheme.size());
      target = slash == absl::string_view::npos ? "/" : target.substr(slash);
      break;
    }
  }
  if (target.empty() || target.front() != '/') return std::nullopt;
  target = target.substr(0, target.find_first_of("?#"));
  return RequestLine{std::string(method), std::string(target)};
}

struct ParsedAddress {
  std::string host;  // without brackets
  std::string port;
};

std::optional<ParsedAddress> ParseAddress(const std::string& address) {
  ParsedAddress out;
  absl::string_view rest;
  if (!address.empty() && address.front() == '[') {
    size_t close = address.find("]:");
    if (close == std::string::npos) return std::nullopt;
    out.host = address.substr(1, close - 1);
    rest = absl::string_view(address).substr(close + 2);
  } else {
    size_t colon = address.rfind(':');
    if (colon == std::string::npos) return std::nullopt;
    out.host = address.substr(0, colon);
    if (out.host.find(':') != std::string::npos) return std::nullopt;  // v6 needs brackets
    rest = absl::string_view(address).substr(colon + 1);
  }
  uint32_t port = 0;
  if (out.host.empty() || rest.empty() ||
      !std::all_of(rest.begin(), rest.end(),
                   [](char ch) { return absl::ascii_isdigit(static_cast<unsigned char>(ch)); }) ||
      !absl::SimpleAtoi(rest, &port) || port > 65535) {
    return std::nullopt;
  }
  out.port = std::string(rest);
  return out;
}

// A listening, non-blocking socket bound to host:port, or the reason why not.
absl::StatusOr<int> Listen(const std::string& address, const ParsedAddress& parsed) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* res = nullptr;
  if (int rc = getaddrinfo(parsed.host.c_str(), parsed.port.c_str(), &hints, &res); rc != 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot serve metrics on ", address, ": ", gai_strerror(rc)));
  }
  std::string error = "no address";
  int fd = -1;
  for (addrinfo* ai = res; ai != nullptr && fd < 0; ai = ai->ai_next) {
    fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, ai->ai_protocol);
    if (fd < 0) {
      error = absl::StrCat("socket: ", ErrnoText(errno));
      continue;
    }
    const int one = 1;
    const char* step = nullptr;
    if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0) {
      step = "setsockopt(SO_REUSEADDR)";
    } else if (bind(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
      step = "bind";
    } else if (listen(fd, SOMAXCONN) != 0) {
      step = "listen";
    }
    if (step != nullptr) {
      error = absl::StrCat(step, ": ", ErrnoText(errno));
      close(fd);
      fd = -1;
    }
  }
  freeaddrinfo(res);
  if (fd < 0) {
    return absl::UnavailableError(absl::StrCat("cannot serve metrics on ", address, ": ", error));
  }
  return fd;
}

int BoundPort(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return -1;
  if (ss.ss_family == AF_INET) return ntohs(reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
  if (ss.ss_family == AF_INET6) return ntohs(reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port);
  return -1;
}

}  // namespace

absl::StatusOr<std::unique_ptr<MetricsExposer>> MetricsExposer::Start(
    const std::string& address, std::shared_ptr<prometheus::Registry> registry) {
  std::optional<ParsedAddress> parsed = ParseAddress(address);
  if (!parsed.has_value()) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot serve metrics on \"", address, "\": want host:port or [v6]:port"));
  }
  absl::StatusOr<int> fd = Listen(address, *parsed);
  if (!fd.ok()) return fd.status();
  auto out = std::unique_ptr<MetricsExposer>(new MetricsExposer());
  out->listen_fd_ = *fd;  // closed by the destructor from here on
  out->port_ = BoundPort(out->listen_fd_);
  if (out->port_ < 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot serve metrics on ", address, ": getsockname: ", ErrnoText(errno)));
  }
  out->wake_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (out->wake_fd_ < 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot serve metrics on ", address, ": eventfd: ", ErrnoText(errno)));
  }
  out->address_ = absl::StrCat(address.substr(0, address.rfind(':')), ":", out->port_);
  out->registry_ = std::move(registry);
  MetricsExposer* self = out.get();
  out->thread_ = std::thread([self]() { self->Serve(); });
  return out;
}

void MetricsExposer::AddCollectable(std::shared_ptr<prometheus::Collectable> collectable) {
  absl::MutexLock lock(&mu_);
  extra_.push_back(std::move(collectable));
}

MetricsExposer::~MetricsExposer() {
  if (thread_.joinable()) {
    const uint64_t one = 1;
    while (write(wake_fd_, &one, sizeof one) < 0 && errno == EINTR) {
    }
    thread_.join();
  }
  if (wake_fd_ >= 0) close(wake_fd_);
  if (listen_fd_ >= 0) close(listen_fd_);
}

std::string MetricsExposer::Render() const {
  std::vector<std::shared_ptr<prometheus::Collectable>> extra;
  {
    absl::MutexLock lock(&mu_);
    extra = extra_;
  }
  std::vector<prometheus::MetricFamily> families;
  if (registry_ != nullptr) families = registry_->Collect();
  for (const auto& collectable : extra) {
    std::vector<prometheus::MetricFamily> more = collectable->Collect();
    families.insert(families.end(), std::make_move_iterator(more.begin()),
                    std::make_move_iterator(more.end()));
  }
  std::ostringstream text;
  prometheus::TextSerializer().Serialize(text, families);
  return std::move(text).str();
}

void MetricsExposer::Serve() {
  std::vector<Connection> conns;
  std::vector<pollfd> fds;
  Clock::time_point accept_paused_until = Clock::time_point::min();

  // Builds the answer to a complete header and moves `c` to kWriting.
  auto answer = [this](Connection& c, absl::string_view header, Clock::time_point now) {
    std::optional<RequestLine> req = ParseRequestLine(header.substr(0, header.find("\r\n")));
    if (!req.has_value()) {
      c.out = PlainAnswer(400, true);
    } else {
      const bool get = req->method == "GET";
      const bool head = req->method == "HEAD";
      if (req->path != "/metrics" && req->path != "/") {
        c.out = PlainAnswer(404, !head);
      } else if (!get && !head) {
        c.out = PlainAnswer(405, true, "Allow: GET, HEAD\r\n");
      } else if (req->path == "/") {
        c.out = Answer(200, "text/plain; charset=utf-8", "Metrics are at /metrics\n", get);
      } else {
        // Collectables are other people's code; this thread must not die of
        // one that throws.
        try {
          c.out = Answer(200, "text/plain; version=0.0.4; charset=utf-8", Render(), get);
        } catch (const std::exception& e) {
          LogOnce("metrics_exposer_collect", LogLevel::kError, "metrics collection failed",
                  {{"error", e.what()}});
          c.out = PlainAnswer(500, get);
        }
      }
    }
    c.in.clear();
    c.in.shrink_to_fit();
    c.phase = Phase::kWriting;
    c.deadline = now + kWriteDeadline;
  };

  // Reads what the client sent; answers once the header is complete.
  auto read_header = [&answer](Connection& c, Clock::time_point now) {
    char buf[4096];
    while (c.fd >= 0 && c.phase == Phase::kReadingHeader) {
      const size_t room = kMaxHeaderBytes + 1 - c.in.size();
      ssize_t n = read(c.fd, buf, std::min(room, sizeof buf));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
      if (n <= 0) {  // the client went away before finishing its request
        CloseConnection(c);
        return;
      }
      const size_t old = c.in.size();
      c.in.append(buf, static_cast<size_t>(n));
      size_t end = c.in.find("\r\n\r\n", old >= 3 ? old - 3 : 0);
      if (end != std::string::npos && end + 4 <= kMaxHeaderBytes) {
        std::string header = c.in.substr(0, end);
        answer(c, header, now);
      } else if (c.in.size() > kMaxHeaderBytes) {
        c.out = PlainAnswer(431, true);
        c.phase = Phase::kWriting;
        c.deadline = now + kWriteDeadline;
      }
    }
  };

  // Reads and drops whatever a lingering client still sends; closes at EOF.
  auto drain = [](Connection& c) {
    char buf[4096];
    while (c.fd >= 0) {
      ssize_t n = read(c.fd, buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
      if (n <= 0) CloseConnection(c);
    }
  };

  // Sends what it can of the answer; once all is sent, shuts down the write
  // side and lingers.
  auto write_answer = [&drain](Connection& c, Clock::time_point now) {
    while (c.fd >= 0 && c.sent < c.out.size()) {
      ssize_t n = send(c.fd, c.out.data() + c.sent, c.out.size() - c.sent, MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
      if (n < 0) {
        CloseConnection(c);
        return;
      }
      c.sent += static_cast<size_t>(n);
    }
    if (c.fd < 0) return;
    std::string().swap(c.out);
    c.sent = 0;
    shutdown(c.fd, SHUT_WR);
    c.phase = Phase::kLingering;
    c.deadline = now + kLinger;
    drain(c);
  };

  // Makes room for one more connection; false when none can be made.
  auto make_room = [&conns]() {
    size_t open = 0;
    for (const Connection& c : conns) open += c.fd >= 0 ? 1 : 0;
    if (open < kMaxConnections) return true;
    for (Phase phase : {Phase::kLingering, Phase::kReadingHeader}) {
      for (Connection& c : conns) {  // in accept order: oldest first
        if (c.fd >= 0 && c.phase == phase) {
          CloseConnection(c);
          return true;
        }
      }
    }
    return false;
  };

  for (;;) {
    Clock::time_point now = Clock::now();
    fds.clear();
    fds.push_back({wake_fd_, POLLIN, 0});
    const bool poll_listener = now >= accept_paused_until;
    fds.push_back({poll_listener ? listen_fd_ : -1, POLLIN, 0});
    std::optional<Clock::time_point> next;
    if (!poll_listener) next = accept_paused_until;
    for (const Connection& c : conns) {
      fds.push_back({c.fd, static_cast<short>(c.phase == Phase::kWriting ? POLLOUT : POLLIN), 0});
      if (!next.has_value() || c.deadline < *next) next = c.deadline;
    }
    int timeout_ms = -1;
    if (next.has_value()) {
      auto wait = std::chrono::ceil<std::chrono::milliseconds>(*next - now).count();
      timeout_ms = static_cast<int>(std::clamp<decltype(wait)>(wait, 0, 60 * 1000));
    }
    if (poll(fds.data(), fds.size(), timeout_ms) < 0) {
      if (errno != EINTR) {
        LogOnce("metrics_exposer_poll", LogLevel::kError, "metrics exposer: poll failed",
                {{"error", ErrnoText(errno)}});
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
      continue;
    }
    if (fds[0].revents != 0) break;  // shutdown
    now = Clock::now();

    for (size_t i = 0; i < conns.size(); ++i) {
      Connection& c = conns[i];
      if (fds[i + 2].revents != 0) {
        switch (c.phase) {
          case Phase::kReadingHeader:
            read_header(c, now);
            if (c.fd >= 0 && c.phase == Phase::kWriting) write_answer(c, now);
            break;
          case Phase::kWriting:
            write_answer(c, now);
            break;
          case Phase::kLingering:
            drain(c);
            break;
        }
      }
      if (c.fd >= 0 && now >= c.deadline) CloseConnection(c);
    }
    conns.erase(
        std::remove_if(conns.begin(), conns.end(), [](const Connection& c) { return c.fd < 0; }),
        conns.end());

    if (poll_listener && fds[1].revents != 0) {
      for (int k = 0; k < kAcceptsPerRound; ++k) {
        int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
          if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
            LogOnce("metrics_exposer_accept", LogLevel::kWarning,
                    "metrics exposer: accept failed; pausing", {{"error", ErrnoText(errno)}});
            accept_paused_until = now + kAcceptBackoff;
            break;
          }
          if (errno == EAGAIN || errno == EWOULDBLOCK) break;
          continue;  // ECONNABORTED, EINTR, EPROTO, ...: the next one may do
        }
        if (!make_room()) {
          close(fd);
          continue;
        }
        Connection c;
        c.fd = fd;
        c.deadline = now + kHeaderDeadline;
        conns.push_back(std::move(c));
      }
      conns.erase(
          std::remove_if(conns.begin(), conns.end(), [](const Connection& c) { return c.fd < 0; }),
          conns.end());
    }
  }
  for (Connection& c : conns) CloseConnection(c);
}

}  // namespace rocetune
