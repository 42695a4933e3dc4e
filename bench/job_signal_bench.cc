// job_signal_bench: what the job signal costs the agent. Training processes
// (forked children, each with the C client, librocetune-job) send one line per
// event to a Unix stream socket; in this process either the agent's
// JobListener (parse, rate limit, aggregate into a sketch per (job, op)) or,
// as the baseline measured in the same run, a reader that only receives the
// same bytes and discards them. Reported per 10k events: this process's CPU
// time (the listener's thread, or the reader's) and the senders' (the
// client's formatting and writes, resends while a socket was full included:
// an upper bound on the client's own cost). The listener runs with its rate limits
// raised so that every event is parsed and counted; a sender whose socket is
// full waits and resends rather than drop, so both sides see every event.
//
// Output: BENCH job_signal events=... senders=... listener_cpu_us_per_10k=...
// recv_only_cpu_us_per_10k=... listener_over_recv_only=... sender_cpu_us_per_10k=...
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "agent/job/job_listener.h"
#include "daemon/clock.h"
#include "rocetune_job.h"

ABSL_FLAG(int, events, 200000, "events in all, split over the senders");
ABSL_FLAG(int, senders, 4, "sending processes");

namespace {

double CpuSeconds(const rusage& r) {
  return static_cast<double>(r.ru_utime.tv_sec + r.ru_stime.tv_sec) +
         static_cast<double>(r.ru_utime.tv_usec + r.ru_stime.tv_usec) * 1e-6;
}

double SelfCpu() {
  rusage r{};
  getrusage(RUSAGE_SELF, &r);
  return CpuSeconds(r);
}

// Forks `senders` processes that send `events` events in all to `path`;
// returns their summed CPU seconds, or -1 when one failed.
double Send(const std::string& path, int events, int senders) {
  std::vector<pid_t> pids;
  for (int s = 0; s < senders; ++s) {
    const int mine = events / senders + (s < events % senders ? 1 : 0);
    const pid_t pid = fork();
    if (pid == 0) {
      alarm(120);  // a reader that stopped reading must not hang the bench
      rocetune_job* h = rocetune_job_open(path.c_str(), "bench/run1");
      if (h == nullptr) _exit(2);
      for (int i = 0; i < mine; ++i) {
        int rc;
        while ((rc = rocetune_job_report(h, "allreduce", 1e-3 + 1e-7 * (i % 1000), s, 4096)) ==
               -EAGAIN) {
          usleep(20);  // the socket is full: wait for the reader rather than drop
        }
        if (rc != 0) _exit(3);
      }
      rocetune_job_close(h);
      _exit(0);
    }
    if (pid < 0) {
      for (pid_t p : pids) kill(p, SIGKILL);
      for (pid_t p : pids) waitpid(p, nullptr, 0);
      return -1;
    }
    pids.push_back(pid);
  }
  double cpu = 0;
  bool ok = true;
  for (pid_t pid : pids) {
    int status = 0;
    rusage r{};
    if (wait4(pid, &status, 0, &r) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      ok = false;
    }
    cpu += CpuSeconds(r);
  }
  return ok ? cpu : -1;
}

// The baseline: accepts connections and reads everything, counting newlines.
class RecvOnly {
 public:
  explicit RecvOnly(const std::string& path) {
    fd_ = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::snprintf(a.sun_path, sizeof(a.sun_path), "%s", path.c_str());
    if (fd_ < 0 || bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 ||
        listen(fd_, 128) != 0) {
      std::perror("recv-only socket");
      std::exit(1);
    }
    thread_ = std::thread([this] { Loop(); });
  }
  ~RecvOnly() {
    stop_ = true;
    thread_.join();
    close(fd_);
  }
  uint64_t lines() const { return lines_.load(); }

 private:
  void Loop() {
    std::vector<pollfd> fds = {{fd_, POLLIN, 0}};
    char buf[65536];
    while (!stop_) {
      if (poll(fds.data(), fds.size(), 50) <= 0) continue;
      if (fds[0].revents & POLLIN) {
        const int c = accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (c >= 0) fds.push_back({c, POLLIN, 0});
      }
      for (size_t i = 1; i < fds.size();) {
        if (fds[i].revents == 0) {
          ++i;
          continue;
        }
        const ssize_t n = recv(fds[i].fd, buf, sizeof(buf), 0);
        if (n > 0) {
          uint64_t count = 0;
          for (ssize_t k = 0; k < n; ++k) count += buf[k] == '\n';
          lines_ += count;
          ++i;
        } else if (n < 0 && errno == EAGAIN) {
          ++i;
        } else {
          close(fds[i].fd);
          fds.erase(fds.begin() + static_cast<long>(i));
        }
      }
    }
    for (size_t i = 1; i < fds.size(); ++i) close(fds[i].fd);
  }
  int fd_ = -1;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> lines_{0};
  std::thread thread_;
};

// Waits until `done` (every event received), at most 120 s.
bool WaitFor(const std::function<bool()>& done) {
  const absl::Time until = absl::Now() + absl::Seconds(120);
  while (!done()) {
    if (absl::Now() > until) return false;
    absl::SleepFor(absl::Milliseconds(2));
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const int events = absl::GetFlag(FLAGS_events);
  if (events <= 0) {
    std::fprintf(stderr, "job_signal_bench: --events must be positive\n");
    return 2;
  }
  const int senders = std::max(1, absl::GetFlag(FLAGS_senders));
  char tmpl[] = "/tmp/job-signal-bench-XXXXXX";
  if (mkdtemp(tmpl) == nullptr) {
    std::perror("mkdtemp");
    return 1;
  }
  const std::string dir = tmpl;
  const auto per_10k = [events](double seconds) { return seconds * 1e6 * 1e4 / events; };

  // The baseline: receive and discard.
  double recv_cpu = 0, recv_senders = 0;
  {
    const std::string path = dir + "/recv.sock";
    RecvOnly reader(path);
    const double before = SelfCpu();
    recv_senders = Send(path, events, senders);
    if (recv_senders < 0 || !WaitFor([&] { return reader.lines() >= uint64_t(events); })) {
      std::fprintf(stderr, "job_signal_bench: the recv-only run lost events\n");
      return 1;
    }
    recv_cpu = SelfCpu() - before;
    unlink(path.c_str());
  }
  // The agent's listener.
  double listener_cpu = 0, listener_senders = 0;
  uint64_t accepted = 0, refused = 0;
  {
    rocetune::JobListenerOptions o;
    o.path = dir + "/job.sock";
    o.max_events_per_second = 1e12;
    o.burst = 1e12;
    o.max_events_per_second_total = 1e12;
    auto listener = rocetune::JobListener::Create(o, rocetune::Clock::Real());
    if (!listener.ok()) {
      std::fprintf(stderr, "job_signal_bench: %s\n",
                   std::string(listener.status().message()).c_str());
      return 1;
    }
    const double before = SelfCpu();
    listener_senders = Send(o.path, events, senders);
    if (listener_senders < 0 ||
        !WaitFor([&] { return (*listener)->counts().accepted >= uint64_t(events); })) {
      std::fprintf(stderr, "job_signal_bench: the listener run lost events (%llu accepted)\n",
                   static_cast<unsigned long long>((*listener)->counts().accepted));
      return 1;
    }
    listener_cpu = SelfCpu() - before;
    const rocetune::JobListenerCounts c = (*listener)->counts();
    accepted = c.accepted;
    refused = c.malformed + c.version + c.oversized + c.rate_limited + c.too_many_series;
  }
  rmdir(dir.c_str());
  std::printf(
      "BENCH job_signal events=%d senders=%d accepted=%llu refused=%llu "
      "listener_cpu_us_per_10k=%.0f recv_only_cpu_us_per_10k=%.0f listener_over_recv_only=%.2f "
      "sender_cpu_us_per_10k=%.0f listener_events_per_cpu_second=%.0f\n",
      events, senders, static_cast<unsigned long long>(accepted),
      static_cast<unsigned long long>(refused), per_10k(listener_cpu), per_10k(recv_cpu),
      recv_cpu > 0 ? listener_cpu / recv_cpu : 0, per_10k(listener_senders),
      listener_cpu > 0 ? events / listener_cpu : 0);
  return 0;
}
