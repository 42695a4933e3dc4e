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

// HttpGet, MakeTempDir, BuiltBinary, HostFixture: tests/testing/test_support.h.

}  // namespace rocetune::testing

#endif  // ROCETUNE_TESTS_INTEGRATION_SUBPROCESS_H_
