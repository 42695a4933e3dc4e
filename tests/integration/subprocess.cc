#include "tests/integration/subprocess.h"

#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <regex>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace rocetune::testing {

Subprocess::Subprocess(std::string binary, std::vector<std::string> args, std::string log_path)
    : binary_(std::move(binary)), args_(std::move(args)), log_path_(std::move(log_path)) {}

Subprocess::~Subprocess() {
  if (pid_ > 0 && !exit_code_.has_value()) {
    kill(pid_, SIGKILL);
    Wait(absl::Seconds(5));
  }
}

bool Subprocess::Start() {
  int fd = open(log_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) return false;
  pid_ = fork();
  if (pid_ < 0) return false;
  if (pid_ == 0) {
    dup2(fd, STDOUT_FILENO);
    dup2(fd, STDERR_FILENO);
    std::vector<char*> argv;
    argv.push_back(const_cast<char*>(binary_.c_str()));
    for (auto& a : args_) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(binary_.c_str(), argv.data());
    _exit(127);
  }
  close(fd);
  return true;
}

void Subprocess::Signal(int sig) {
  if (pid_ > 0 && !exit_code_.has_value()) kill(pid_, sig);
}

std::optional<int> Subprocess::Wait(absl::Duration timeout) {
  if (exit_code_.has_value() || pid_ <= 0) return exit_code_;
  const absl::Time deadline = absl::Now() + timeout;
  // At least one look, so that Wait(0) (and Running()) sees an exit.
  for (;;) {
    int status = 0;
    pid_t r = waitpid(pid_, &status, WNOHANG);
    if (r == pid_) {
      exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      return exit_code_;
    }
    if (absl::Now() >= deadline) return std::nullopt;
    absl::SleepFor(absl::Milliseconds(20));
  }
}

bool Subprocess::Running() {
  if (exit_code_.has_value()) return false;
  return !Wait(absl::ZeroDuration()).has_value();
}

std::string Subprocess::Log() const {
  std::ifstream in(log_path_);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

int RunCommand(const std::string& binary, const std::vector<std::string>& args, std::string* output,
               absl::Duration timeout) {
  // The log lives only as long as the command: its text is returned.
  const TempDir dir("cmd");
  std::string log = absl::StrCat(dir.path(), "/out.log");
  Subprocess p(binary, args, log);
  if (!p.Start()) return -1;
  std::optional<int> rc = p.Wait(timeout);
  if (output != nullptr) *output = p.Log();
  return rc.value_or(-2);
}

int WaitForPortInReadyFile(const std::string& path, const std::string& key,
                           absl::Duration timeout) {
  absl::Time deadline = absl::Now() + timeout;
  std::regex re("\"" + key + "\"\\s*:\\s*([0-9]+)");
  while (absl::Now() < deadline) {
    std::ifstream in(path);
    if (in) {
      std::stringstream ss;
      ss << in.rdbuf();
      std::smatch m;
      std::string text = ss.str();
      if (std::regex_search(text, m, re)) return std::stoi(m[1]);
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
  return -1;
}

namespace {

std::vector<std::string> ControllerArgs(const ControllerLaunch& l, const std::string& state_dir) {
  std::vector<std::string> args = {
      absl::StrCat("--listen=127.0.0.1:", l.port),
      "--metrics_address=127.0.0.1:0",
      "--insecure_loopback",
      absl::StrCat("--state_dir=", state_dir),
      absl::StrCat("--ready_file=", l.dir, "/", l.name, ".ready"),
  };
  args.insert(args.end(), l.flags.begin(), l.flags.end());
  return args;
}

std::string StateDirOf(const ControllerLaunch& l) {
  return l.state_dir.empty() ? absl::StrCat(l.dir, "/controller") : l.state_dir;
}

}  // namespace

ControllerProcess::ControllerProcess(ControllerLaunch launch)
    : Subprocess(BuiltBinary("controller/rocetune-controller"),
                 ControllerArgs(launch, StateDirOf(launch)),
                 absl::StrCat(launch.dir, "/", launch.name, ".log")),
      ready_(absl::StrCat(launch.dir, "/", launch.name, ".ready")),
      state_dir_(StateDirOf(launch)),
      want_port_(launch.port) {}

bool ControllerProcess::Start() {
  unlink(ready_.c_str());  // a previous run's file must not count
  if (!Subprocess::Start()) return false;
  grpc_port_ = WaitForPortInReadyFile(ready_, "grpc_port", absl::Seconds(20));
  if (grpc_port_ <= 0 || (want_port_ != 0 && grpc_port_ != want_port_)) return false;
  metrics_port_ = WaitForPortInReadyFile(ready_, "metrics_port", absl::Seconds(1));
  return metrics_port_ > 0;
}

}  // namespace rocetune::testing
