#include "tests/controller/store/etcd_cluster.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "tests/testing/test_support.h"

namespace rocetune::testing {
namespace {

constexpr char kEtcd[] = "/usr/bin/etcd";

// A TCP port on 127.0.0.1 that was free a moment ago; -1 if none.
int FreeLoopbackPort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  sockaddr_in a = {};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  int port = -1;
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0) {
    port = ntohs(a.sin_port);
  }
  close(fd);
  return port;
}

}  // namespace

EtcdCluster::EtcdCluster(std::string dir, int members) : dir_(std::move(dir)), members_(members) {}

EtcdCluster::~EtcdCluster() { StopAll(); }

void EtcdCluster::StopAll() {
  for (std::unique_ptr<Subprocess>& p : procs_) {
    if (p == nullptr) continue;
    p->Signal(SIGTERM);
    if (!p->Wait(absl::Seconds(5)).has_value()) p->Signal(SIGKILL);
    p->Wait(absl::Seconds(5));
  }
  procs_.clear();
}

absl::Status EtcdCluster::Start(absl::Duration timeout) {
  absl::Status last;
  for (int attempt = 0; attempt < 3; ++attempt) {
    last = StartOnce(timeout);
    if (last.ok() || !absl::IsAborted(last)) return last;
    StopAll();
  }
  return last;
}

// GET /health on 127.0.0.1:`port` within `timeout` (connect and answer):
// whether etcd said it is healthy.
static bool Healthy(int port, absl::Duration timeout) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return false;
  timeval tv = absl::ToTimeval(timeout);
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  sockaddr_in a = {};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<uint16_t>(port));
  std::string resp;
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0) {
    const std::string req = "GET /health HTTP/1.0\r\n\r\n";
    if (send(fd, req.data(), req.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(req.size())) {
      char buf[4096];
      ssize_t n;
      while ((n = recv(fd, buf, sizeof(buf), 0)) > 0) resp.append(buf, static_cast<size_t>(n));
    }
  }
  close(fd);
  return absl::StrContains(resp, "\"health\":\"true\"");
}

absl::Status EtcdCluster::StartOnce(absl::Duration timeout) {
  if (access(kEtcd, X_OK) != 0) {
    return absl::NotFoundError(absl::StrCat(kEtcd,
                                            " not found: run scripts/install-deps "
                                            "(Debian's etcd-server)"));
  }
  client_ports_.clear();
  peer_ports_.clear();
  for (int i = 0; i < members_; ++i) {
    client_ports_.push_back(FreeLoopbackPort());
    peer_ports_.push_back(FreeLoopbackPort());
    if (client_ports_.back() < 0 || peer_ports_.back() < 0) {
      return absl::UnavailableError("no free loopback port for etcd");
    }
  }
  std::vector<std::string> cluster;
  for (int i = 0; i < members_; ++i) {
    cluster.push_back(absl::StrCat("m", i, "=http://127.0.0.1:", peer_ports_[i]));
  }
  const std::string token = absl::StrCat("rocetune-test-", getpid(), "-", client_ports_[0]);
  args_.clear();
  for (int i = 0; i < members_; ++i) {
    const std::string data = absl::StrCat(dir_, "/m", i, "-", client_ports_[i]);
    std::filesystem::create_directories(data);
    const std::string client = absl::StrCat("http://127.0.0.1:", client_ports_[i]);
    const std::string peer = absl::StrCat("http://127.0.0.1:", peer_ports_[i]);
    // Election timeout 2.5 s (default 1 s): a 2-core machine running the
    // suite beside a build must not see spurious leader changes. A member
    // restarted on its data directory ignores the --initial-* flags.
    args_.push_back({"--name",
                     absl::StrCat("m", i),
                     "--data-dir",
                     data,
                     "--listen-client-urls",
                     client,
                     "--advertise-client-urls",
                     client,
                     "--listen-peer-urls",
                     peer,
                     "--initial-advertise-peer-urls",
                     peer,
                     "--initial-cluster",
                     absl::StrJoin(cluster, ","),
                     "--initial-cluster-state",
                     "new",
                     "--initial-cluster-token",
                     token,
                     "--heartbeat-interval",
                     "250",
                     "--election-timeout",
                     "2500",
                     "--logger",
                     "zap",
                     "--log-outputs",
                     "stderr"});
  }
  procs_.resize(static_cast<size_t>(members_));
  std::vector<int> all;
  for (int i = 0; i < members_; ++i) all.push_back(i);
  return Launch(all, timeout, /*retry_on_exit=*/true);
}

absl::Status EtcdCluster::Launch(const std::vector<int>& members, absl::Duration timeout,
                                 bool retry_on_exit) {
  for (int i : members) {
    ++launches_;
    procs_[i] = std::make_unique<Subprocess>(
        kEtcd, args_[i], absl::StrCat(dir_, "/etcd-m", i, "-", launches_, ".log"));
    if (!procs_[i]->Start()) {
      return absl::InternalError(absl::StrCat("cannot start ", kEtcd, " (member m", i, ")"));
    }
  }
  const absl::Time deadline = absl::Now() + timeout;
  for (int i : members) {
    // Healthy, or exited: either ends the wait (the shared poll, to the deadline).
    bool exited = false;
    const bool healthy = Eventually(
        [&] {
          if (Healthy(client_ports_[i], absl::Seconds(2))) return true;
          exited = !procs_[i]->Running();
          return exited;
        },
        std::max(deadline - absl::Now(), absl::ZeroDuration()), absl::Milliseconds(100));
    if (exited) {
      const std::string what = absl::StrCat("etcd member m", i, " exited at start: ", LogTail(i));
      return retry_on_exit ? absl::AbortedError(what) : absl::InternalError(what);
    }
    if (!healthy) {
      return absl::DeadlineExceededError(absl::StrCat("etcd member m", i, " not healthy within ",
                                                      absl::FormatDuration(timeout), ": ",
                                                      LogTail(i)));
    }
  }
  return absl::OkStatus();
}

absl::Status EtcdCluster::Restart(const std::vector<int>& members, absl::Duration timeout) {
  for (int i : members) {
    if (i < 0 || i >= static_cast<int>(procs_.size())) {
      return absl::InvalidArgumentError(absl::StrCat("no etcd member m", i));
    }
    Kill(i);
  }
  return Launch(members, timeout, /*retry_on_exit=*/false);
}

std::vector<std::string> EtcdCluster::endpoints() const {
  std::vector<std::string> out;
  for (int p : client_ports_) out.push_back(absl::StrCat("127.0.0.1:", p));
  return out;
}

void EtcdCluster::Kill(int i) {
  if (i < 0 || i >= static_cast<int>(procs_.size()) || procs_[i] == nullptr) return;
  procs_[i]->Signal(SIGKILL);
  procs_[i]->Wait(absl::Seconds(5));
}

std::string EtcdCluster::LogTail(int i) const {
  const std::string log = Log(i);
  return log.size() > 2000 ? log.substr(log.size() - 2000) : log;
}

std::string EtcdCluster::Log(int i) const {
  if (i < 0 || i >= static_cast<int>(procs_.size()) || procs_[i] == nullptr) return "";
  return procs_[i]->Log();
}

}  // namespace rocetune::testing
