#ifndef ROCETUNE_TESTS_AGENT_SWITCH_REDIS_SERVER_H_
#define ROCETUNE_TESTS_AGENT_SWITCH_REDIS_SERVER_H_

#include <sys/types.h>

#include <string>
#include <vector>

#include "absl/status/status.h"

namespace rocetune::testing {

// A redis-server started by a test or benchmark on a unix socket in `dir`
// (no TCP listener), with persistence off unless `extra_args` turn it on. Stopped
// by its PID only (SIGTERM, then SIGKILL) in the destructor or Stop().
class RedisServer {
 public:
  // `dir` must exist; the socket is <dir>/redis.sock, the log <dir>/redis.log.
  explicit RedisServer(std::string dir, std::vector<std::string> extra_args = {});
  ~RedisServer();
  RedisServer(const RedisServer&) = delete;
  RedisServer& operator=(const RedisServer&) = delete;

  // Starts redis-server and waits (up to 10 s) until it answers PING.
  absl::Status Start();
  // Sends `sig` to the server's PID; SIGKILL/SIGTERM also reap it.
  void Signal(int sig);
  void Stop();

  pid_t pid() const { return pid_; }
  std::string socket_path() const { return dir_ + "/redis.sock"; }
  std::string endpoint() const { return "unix:" + socket_path(); }

 private:
  void Reap();
  std::string dir_;
  std::vector<std::string> extra_args_;
  pid_t pid_ = -1;
};

}  // namespace rocetune::testing

#endif  // ROCETUNE_TESTS_AGENT_SWITCH_REDIS_SERVER_H_
