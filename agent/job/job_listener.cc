#include "agent/job/job_listener.h"

#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "daemon/logging.h"

namespace rocetune {
namespace {

absl::Status Errno(const std::string& what, int e) {
  return absl::FailedPreconditionError(absl::StrCat(what, ": ", std::strerror(e)));
}

// Buckets of senders not heard from for this long are forgotten.
constexpr absl::Duration kForgetSender = absl::Seconds(60);
constexpr size_t kMaxSenders = 4096;
constexpr int kAcceptPauseMs = 100;

}  // namespace

absl::StatusOr<std::unique_ptr<JobListener>> JobListener::Create(JobListenerOptions options,
                                                                 Clock* clock) {
  const std::string& path = options.path;
  sockaddr_un addr{};
  if (path.empty() || path.size() >= sizeof addr.sun_path) {
    return absl::InvalidArgumentError(absl::StrCat("--job_socket=", path, ": want a path of 1-",
                                                   sizeof addr.sun_path - 1, " bytes"));
  }
  gid_t gid = static_cast<gid_t>(-1);
  if (!options.group.empty()) {
    struct group gr {};
    struct group* found = nullptr;
    std::vector<char> buf(4096);
    int rc = 0;
    // A group with many members needs a bigger buffer (ERANGE): grow it.
    while ((rc = getgrnam_r(options.group.c_str(), &gr, buf.data(), buf.size(), &found)) ==
               ERANGE &&
           buf.size() < (size_t{1} << 24)) {
      buf.resize(buf.size() * 4);
    }
    if (rc != 0) return Errno(absl::StrCat("--job_socket_group=", options.group), rc);
    if (found == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("--job_socket_group=", options.group, ": no such group"));
    }
    gid = found->gr_gid;
  }
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  struct stat st {};
  if (lstat(path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode)) {
      return absl::FailedPreconditionError(
          absl::StrCat("--job_socket=", path, ": exists and is not a socket; not replaced"));
    }
    // A socket someone still listens on (another agent) is not taken over;
    // one nobody answers (left by a killed agent) is replaced.
    const int probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    const bool live =
        probe >= 0 && connect(probe, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) == 0;
    if (probe >= 0) close(probe);
    if (live) {
      return absl::FailedPreconditionError(
          absl::StrCat("--job_socket=", path, ": another process listens on it (a second agent?)"));
    }
    if (unlink(path.c_str()) != 0) {
      return Errno(absl::StrCat("--job_socket=", path, ": unlink"), errno);
    }
  }
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return Errno("job socket", errno);
  // The socket file is made 0660 by bind itself (the umask), and its group
  // set with lchown: no chmod or chown that would follow a symlink swapped in
  // at the path. The umask is the process's: a file another thread creates
  // in this instant gets no more permission than it asked for, only less.
  const mode_t old_mask = umask(0117);
  const bool bound = bind(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) == 0;
  const int bind_errno = errno;
  umask(old_mask);
  if (!bound || listen(fd, 128) != 0) {
    const int e = bound ? errno : bind_errno;
    close(fd);
    if (bound) unlink(path.c_str());
    return Errno(absl::StrCat("--job_socket=", path, ": bind/listen"), e);
  }
  if (gid != static_cast<gid_t>(-1) && lchown(path.c_str(), static_cast<uid_t>(-1), gid) != 0) {
    const int e = errno;
    close(fd);
    unlink(path.c_str());
    return Errno(absl::StrCat("--job_socket=", path, ": chown to --job_socket_group"), e);
  }
  int wake[2];
  if (pipe2(wake, O_CLOEXEC | O_NONBLOCK) != 0) {
    const int e = errno;
    close(fd);
    unlink(path.c_str());
    return Errno("job socket wake pipe", e);
  }
  return std::unique_ptr<JobListener>(
      new JobListener(std::move(options), clock, fd, wake[0], wake[1]));
}

JobListener::JobListener(JobListenerOptions options, Clock* clock, int fd, int wake_read,
                         int wake_write)
    : options_(std::move(options)),
      clock_(clock),
      fd_(fd),
      wake_read_(wake_read),
      wake_write_(wake_write),
      total_{2 * options_.max_events_per_second_total, clock->Monotonic()} {
  thread_ = std::thread([this] { Loop(); });
}

JobListener::~JobListener() {
  const char b = 1;
  (void)!write(wake_write_, &b, 1);
  if (thread_.joinable()) thread_.join();
  close(fd_);
  close(wake_read_);
  close(wake_write_);
  unlink(options_.path.c_str());
}

void JobListener::Loop() {
  std::vector<Connection> conns;
  std::vector<pollfd> fds;
  // Out of file descriptors (EMFILE, ENFILE): the pending connection stays
  // queued and poll would report it again at once. The next poll then leaves
  // the listening socket out and waits at most kAcceptPauseMs instead of
  // spinning.
  bool accept_paused = false;
  while (true) {
    fds.clear();
    fds.push_back({wake_read_, POLLIN, 0});
    fds.push_back({accept_paused ? -1 : fd_, POLLIN, 0});  // poll ignores a negative fd
    for (const Connection& c : conns) fds.push_back({c.fd, POLLIN, 0});
    const int ready = poll(fds.data(), fds.size(), accept_paused ? kAcceptPauseMs : -1);
    accept_paused = false;
    if (ready < 0) {
      if (errno == EINTR) continue;
      LogWarning("job signal: poll failed; the listener stops",
                 {{"error", std::strerror(errno)}, {"socket", options_.path}});
      break;
    }
    if (fds[0].revents != 0) break;
    // Connections first (their indices match fds), then new ones. Closed
    // ones leave in place, the rest keep their order.
    size_t kept = 0;
    for (size_t i = 0; i < conns.size(); ++i) {
      if (fds[i + 2].revents == 0 || Read(&conns[i])) {
        if (kept != i) conns[kept] = std::move(conns[i]);
        ++kept;
      } else {
        close(conns[i].fd);
      }
    }
    conns.resize(kept);
    if (fds[1].revents != 0) {
      // Accept what is queued, up to the cap.
      while (true) {
        const int cfd = accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (cfd < 0) {
          if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
            accept_paused = true;
            absl::MutexLock lock(&mu_);
            counts_.connections_refused++;
          }
          break;
        }
        if (conns.size() >= options_.max_connections) {
          close(cfd);
          absl::MutexLock lock(&mu_);
          counts_.connections_refused++;
          continue;
        }
        Connection c;
        c.fd = cfd;
        ucred cred{};
        socklen_t len = sizeof cred;
        if (getsockopt(cfd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0) c.pid = cred.pid;
        conns.push_back(std::move(c));
      }
    }
  }
  for (Connection& c : conns) close(c.fd);
}

bool JobListener::Read(Connection* c) {
  char buf[16384];
  // A bounded number of reads per wake-up, so one busy sender cannot hold
  // the thread from the others (poll comes back to it).
  for (int round = 0; round < 4; ++round) {
    const ssize_t n = recv(c->fd, buf, sizeof buf, MSG_DONTWAIT);
    if (n == 0) {
      if (!c->pending.empty() && !c->skipping) {
        Count(JobEventError::kMalformed, "line cut by the sender's disconnect (no newline)");
      }
      return false;
    }
    if (n < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return true;
      if (!c->pending.empty() && !c->skipping) {
        Count(JobEventError::kMalformed,
              absl::StrCat("line cut by a receive error (", std::strerror(errno), ")"));
      }
      return false;
    }
    absl::string_view data(buf, static_cast<size_t>(n));
    while (!data.empty()) {
      const size_t nl = data.find('\n');
      const absl::string_view part = data.substr(0, nl);
      if (c->skipping) {
        if (nl != absl::string_view::npos) c->skipping = false;
      } else if (c->pending.size() + part.size() + 1 > kJobEventMaxBytes) {
        Count(JobEventError::kOversized,
              absl::StrCat("a line of more than ", kJobEventMaxBytes, " bytes"));
        c->pending.clear();
        c->skipping = nl == absl::string_view::npos;
      } else if (nl == absl::string_view::npos) {
        c->pending.append(part.data(), part.size());
      } else if (c->pending.empty()) {
        Handle(part, c->pid);
      } else {
        c->pending.append(part.data(), part.size());
        Handle(c->pending, c->pid);
        c->pending.clear();
      }
      if (nl == absl::string_view::npos) break;
      data.remove_prefix(nl + 1);
    }
  }
  return true;
}

void JobListener::Count(JobEventError e, const std::string& reason) {
  absl::MutexLock lock(&mu_);
  CountLocked(e, reason);
}

void JobListener::CountLocked(JobEventError e, const std::string& reason) {
  switch (e) {
    case JobEventError::kOk:
      return;
    case JobEventError::kOversized:
      counts_.oversized++;
      break;
    case JobEventError::kVersion:
      counts_.version++;
      break;
    case JobEventError::kMalformed:
      counts_.malformed++;
      break;
  }
  last_refusal_ = reason;
}

void JobListener::Bucket::Refill(double rate, double burst, absl::Duration now) {
  tokens = std::min(burst, tokens + absl::ToDoubleSeconds(now - last) * rate);
  last = now;
}

bool JobListener::Admit(pid_t pid) {
  const absl::Duration now = clock_->Monotonic();
  // Every sender together first (a sender that forks gets a bucket per
  // process, and no more than this between them).
  const double total_rate = options_.max_events_per_second_total;
  total_.Refill(total_rate, 2 * total_rate, now);
  if (total_.tokens < 1) return false;
  auto it = buckets_.find(pid);
  if (it == buckets_.end()) {
    if (buckets_.size() >= kMaxSenders) {
      for (auto b = buckets_.begin(); b != buckets_.end();) {
        b = now - b->second.last > kForgetSender ? buckets_.erase(b) : std::next(b);
      }
      if (buckets_.size() >= kMaxSenders) return false;
    }
    it = buckets_.emplace(pid, Bucket{options_.burst, now}).first;
  }
  Bucket& b = it->second;
  b.Refill(options_.max_events_per_second, options_.burst, now);
  if (b.tokens < 1) return false;
  b.tokens -= 1;
  total_.tokens -= 1;
  return true;
}

void JobListener::Handle(absl::string_view line, pid_t pid) {
  ParsedJobEvent p = ParseJobEvent(line);  // outside the lock
  absl::MutexLock lock(&mu_);
  if (!Admit(pid)) {
    counts_.rate_limited++;
    return;
  }
  if (p.error != JobEventError::kOk) {
    CountLocked(p.error, p.reason);
    return;
  }
  auto key = std::make_pair(p.event.job, p.event.op);
  auto it = series_.find(key);
  if (it == series_.end()) {
    if (series_.size() >= options_.max_series) {
      counts_.too_many_series++;
      return;
    }
    JobSeries s;
    s.job = p.event.job;
    s.op = p.event.op;
    it = series_.emplace(std::move(key), std::move(s)).first;
  }
  it->second.seconds.Insert(p.event.seconds);
  it->second.bytes += p.event.bytes;
  counts_.accepted++;
}

std::vector<JobSeries> JobListener::TakeSeries() {
  std::map<std::pair<std::string, std::string>, JobSeries> taken;
  {
    absl::MutexLock lock(&mu_);
    taken.swap(series_);
  }
  std::vector<JobSeries> out;
  out.reserve(taken.size());
  for (auto& [key, s] : taken) out.push_back(std::move(s));
  return out;
}

JobListenerCounts JobListener::counts() const {
  absl::MutexLock lock(&mu_);
  return counts_;
}

std::string JobListener::last_refusal() const {
  absl::MutexLock lock(&mu_);
  return last_refusal_;
}

}  // namespace rocetune
