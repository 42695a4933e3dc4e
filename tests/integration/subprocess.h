#ifndef ROCETUNE_TESTS_INTEGRATION_SUBPROCESS_H_
#define ROCETUNE_TESTS_INTEGRATION_SUBPROCESS_H_

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "tests/testing/test_support.h"

namespace rocetune::testing {

// A child process started by a test, stopped by its PID only. stdout and stderr
// go to a log file the test can read.
class Subprocess {
 public:
  Subprocess(std::string binary, std::vector<std::string> args, std::string log_path);
  ~Subprocess();  // SIGKILLs the child if it is still running
  Subprocess(const Subprocess&) = delete;
  Subprocess& operator=(const Subprocess&) = delete;

  bool Start();
  pid_t pid() const { return pid_; }
  // Sends `sig` to the child.
  void Signal(int sig);
  // Waits for exit up to `timeout`; returns the exit code (128+signal when
  // killed by a signal) or nullopt on timeout.
  std::optional<int> Wait(absl::Duration timeout);
  bool Running();
  std::string Log() const;

 private:
  std::string binary_;
  std::vector<std::string> args_;
  std::string log_path_;
  pid_t pid_ = -1;
  std::optional<int> exit_code_;
};

// Runs a command to completion; returns its exit code and captures its output.
int RunCommand(const std::string& binary, const std::vector<std::string>& args, std::string* output,
               absl::Duration timeout = absl::Seconds(30));

// Waits until `path` exists and holds a JSON object; returns the integer value
// of `key` in it, or -1 on timeout.
int WaitForPortInReadyFile(const std::string& path, const std::string& key, absl::Duration timeout);

// How a test starts a rocetune-controller: on loopback, with
// --insecure_loopback, /metrics on a port it picks, its state in `state_dir`
// (default `dir`/controller), its log and ready file `dir`/`name`.{log,ready}.
struct ControllerLaunch {
  std::string dir = "";
  std::string state_dir = "";           // "" = dir + "/controller"
  int port = 0;                         // gRPC port; 0: the controller picks one
  std::vector<std::string> flags = {};  // more flags (--window=..., --roles_file=...)
  std::string name = "controller";
};

// The one way tests (integration and end to end) run the real controller: a
// Subprocess whose Start also waits for its ready file (up to 20 s) and reads
// its ports. Restart: a new ControllerProcess on the same port and state dir
// with another name.
class ControllerProcess : public Subprocess {
 public:
  explicit ControllerProcess(ControllerLaunch launch);
  // Starts the controller and waits until it is ready; false (see Log()) if
  // it did not start, or listens elsewhere than a non-zero `port` asked.
  bool Start();
  int grpc_port() const { return grpc_port_; }
  int metrics_port() const { return metrics_port_; }
  const std::string& state_dir() const { return state_dir_; }

 private:
  std::string ready_;
  std::string state_dir_;
  int want_port_;
  int grpc_port_ = -1;
  int metrics_port_ = -1;
};

// HttpGet, MakeTempDir, BuiltBinary, HostFixture: tests/testing/test_support.h.

}  // namespace rocetune::testing

#endif  // ROCETUNE_TESTS_INTEGRATION_SUBPROCESS_H_
