#include "tests/agent/switch/redis_server.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "agent/switch/redis_client.h"

namespace rocetune::testing {

RedisServer::RedisServer(std::string dir, std::vector<std::string> extra_args)
    : dir_(std::move(dir)), extra_args_(std::move(extra_args)) {}

RedisServer::~RedisServer() { Stop(); }

absl::Status RedisServer::Start() {
  std::vector<std::string> args = {"redis-server",
                                   "--port",
                                   "0",
                                   "--unixsocket",
                                   socket_path(),
                                   "--unixsocketperm",
                                   "700",
                                   "--dir",
                                   dir_,
                                   "--save",
                                   "",
                                   "--appendonly",
                                   "no",
                                   "--databases",
                                   "16",
                                   "--logfile",
                                   dir_ + "/redis.log"};
  args.insert(args.end(), extra_args_.begin(), extra_args_.end());
  pid_t pid = fork();
  if (pid < 0) return absl::InternalError("fork failed");
  if (pid == 0) {
    int devnull = open("/dev/null", O_RDWR);
    if (devnull >= 0) {
      dup2(devnull, 0);
      dup2(devnull, 1);
    }
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    execvp("redis-server", argv.data());
    _exit(127);
  }
  pid_ = pid;
  RedisClientOptions o;
  o.backoff_min = absl::ZeroDuration();
  o.backoff_max = absl::ZeroDuration();
  absl::StatusOr<RedisEndpoint> ep = RedisEndpoint::Parse(endpoint());
  RedisClient c(*ep, 0, o);
  absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (absl::Now() < deadline) {
    absl::StatusOr<RedisReply> r = c.Command({"PING"});
    if (r.ok() && r->str == "PONG") return absl::OkStatus();
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return absl::UnavailableError(absl::StrCat("redis-server exited; see ", dir_, "/redis.log"));
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
  return absl::DeadlineExceededError("redis-server did not answer PING within 10 s");
}

void RedisServer::Reap() {
  if (pid_ <= 0) return;
  int status = 0;
  waitpid(pid_, &status, 0);
  pid_ = -1;
}

void RedisServer::Signal(int sig) {
  if (pid_ <= 0) return;
  kill(pid_, sig);
  if (sig == SIGKILL || sig == SIGTERM) Reap();
}

void RedisServer::Stop() {
  if (pid_ <= 0) return;
  kill(pid_, SIGTERM);
  for (int i = 0; i < 200; ++i) {
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return;
    }
    absl::SleepFor(absl::Milliseconds(10));
  }
  kill(pid_, SIGKILL);
  Reap();
}

}  // namespace rocetune::testing
