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

#include "absl/strings/str_cat.h"

namespace rocetune {
namespace {

absl::Status Errno(const std::string& what, int e) {
  return absl::FailedPreconditionError(absl::StrCat(what, ": ", std::strerror(e)));
}

// Buckets of senders not heard from for this long are forgotten.
constexpr absl::Duration kForgetSender = absl::Seconds(60);
constexpr size_t kMaxSenders = 4096;

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
    char buf[4096];
    if (getgrnam_r(options.group.c_str(), &gr, buf, sizeof buf, &found) != 0 || found == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("--job_socket_group=", options.group, ": no such group"));
    }
    gid = found->gr_gid;
  }
  struct stat st {};
  if (lstat(path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode)) {
      return absl::FailedPreconditionError(
          absl::StrCat("--job_socket=", path, ": exists and is not a socket; not replaced"));
    }
    if (unlink(path.c_str()) != 0)
      return Errno(absl::StrCat("--job_socket=", path, ": unlink"), errno);
  }
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return Errno("job socket", errno);
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  if (bind(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0 ||
      listen(fd, 128) != 0) {
    const int e = errno;
    close(fd);
    unlink(path.c_str());
    return Errno(absl::StrCat("--job_socket=", path, ": bind/listen"), e);
  }
  if (chmod(path.c_str(), 0660) != 0 ||
      (gid != static_cast<gid_t>(-1) && chown(path.c_str(), static_cast<uid_t>(-1), gid) != 0)) {
    const int e = errno;
    close(fd);
    unlink(path.c_str());
    return Errno(absl::StrCat("--job_socket=", path, ": chmod/chown"), e);
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
      wake_write_(wake_write) {
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
  while (true) {
    fds.clear();
    fds.push_back({wake_read_, POLLIN, 0});
    fds.push_back({fd_, POLLIN, 0});
    for (const Connection& c : conns) fds.push_back({c.fd, POLLIN, 0});
    if (poll(fds.data(), fds.size(), -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if (fds[0].revents != 0) break;
    // Connections first (their indices match fds), then new ones.
    std::vector<Connection> kept;
    kept.reserve(conns.size());
    for (size_t i = 0; i < conns.size(); ++i) {
      if (fds[i + 2].revents == 0 || Read(&conns[i])) {
        kept.push_back(std::move(conns[i]));
      } else {
        close(conns[i].fd);
      }
    }
    conns.swap(kept);
    if (fds[1].revents != 0) {
      // Accept what is queued, up to the cap.
      while (true) {
        const int cfd = accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (cfd < 0) break;
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
    if (n < 0) return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
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

bool JobListener::Admit(pid_t pid) {
  const absl::Duration now = clock_->Monotonic();
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
  b.tokens = std::min(options_.burst, b.tokens + absl::ToDoubleSeconds(now - b.last) *
                                                     options_.max_events_per_second);
  b.last = now;
  if (b.tokens < 1) return false;
  b.tokens -= 1;
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
