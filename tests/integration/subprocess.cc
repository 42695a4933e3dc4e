#include "tests/integration/subprocess.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
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
  absl::Time deadline = absl::Now() + timeout;
  while (absl::Now() < deadline) {
    int status = 0;
    pid_t r = waitpid(pid_, &status, WNOHANG);
    if (r == pid_) {
      exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      return exit_code_;
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
  return std::nullopt;
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
  std::string log = absl::StrCat(MakeTempDir("cmd"), "/out.log");
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

std::string HttpGet(int port, const std::string& path) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return "";
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return "";
  }
  std::string req = absl::StrCat("GET ", path, " HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n");
  if (write(fd, req.data(), req.size()) != static_cast<ssize_t>(req.size())) {
    close(fd);
    return "";
  }
  std::string resp;
  char buf[8192];
  ssize_t n;
  while ((n = read(fd, buf, sizeof(buf))) > 0) resp.append(buf, n);
  close(fd);
  size_t body = resp.find("\r\n\r\n");
  return body == std::string::npos ? "" : resp.substr(body + 4);
}

std::string MakeTempDir(const std::string& name) {
  const char* base = getenv("TEST_TMPDIR");
  std::string tmpl = absl::StrCat(base ? base : "/tmp", "/rocetune-", name, "-XXXXXX");
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  char* dir = mkdtemp(buf.data());
  return dir ? std::string(dir) : std::string();
}

std::string BuiltBinary(const std::string& relative) {
  return absl::StrCat(ROCETUNE_BINARY_DIR, "/", relative);
}

std::string HostFixture(const std::string& host) {
  return absl::StrCat(ROCETUNE_SOURCE_DIR, "/tests/fixtures/hosts/", host);
}

}  // namespace rocetune::testing
