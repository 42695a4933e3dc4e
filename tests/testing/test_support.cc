#include "tests/testing/test_support.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace rocetune::testing {

namespace {

// The directories MakeTempDir made in this process. They are kept while the
// tests run (a failure's logs are in them) and removed when the process ends
// with every test passed; after a failure, or a crash, they stay.
class MadeDirs {
 public:
  ~MadeDirs() {
    if (!::testing::UnitTest::GetInstance()->Passed()) return;
    absl::MutexLock lock(&mu_);
    for (const std::string& d : dirs_) {
      std::error_code ec;
      std::filesystem::remove_all(d, ec);
    }
  }
  void Add(const std::string& dir) {
    absl::MutexLock lock(&mu_);
    dirs_.push_back(dir);
  }

 private:
  absl::Mutex mu_;
  std::vector<std::string> dirs_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

std::string MakeTempDir(const std::string& name) {
  // Constructed after gtest's UnitTest (the first call comes from a test), so
  // destroyed before it.
  static MadeDirs made;
  const char* base = getenv("TEST_TMPDIR");
  std::string tmpl = absl::StrCat(base != nullptr ? base : "/tmp", "/rocetune-", name, "-XXXXXX");
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  char* dir = mkdtemp(buf.data());
  if (dir == nullptr) return std::string();
  made.Add(dir);
  return std::string(dir);
}

TempDir::TempDir(const std::string& name) : path_(MakeTempDir(name)) {}

TempDir::~TempDir() {
  if (path_.empty()) return;
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

std::string HostFixture(const std::string& host) {
  return absl::StrCat(ROCETUNE_SOURCE_DIR, "/tests/fixtures/hosts/", host);
}

FixtureTree::FixtureTree(const std::string& host) : root_(MakeTempDir("fixture-" + host)) {
  if (root_.empty()) return;
  std::error_code ec;
  std::filesystem::copy(
      HostFixture(host), root_,
      std::filesystem::copy_options::recursive | std::filesystem::copy_options::copy_symlinks, ec);
}

FixtureTree::~FixtureTree() {
  if (root_.empty()) return;
  std::error_code ec;
  std::filesystem::remove_all(root_, ec);
}

std::string FixtureTree::ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void FixtureTree::WriteFile(const std::string& path, const std::string& data) {
  std::ofstream out(path, std::ios::trunc);
  out << data;
}

std::string BuiltBinary(const std::string& relative) {
  return absl::StrCat(ROCETUNE_BINARY_DIR, "/", relative);
}

bool Eventually(const std::function<bool()>& cond, absl::Duration timeout, absl::Duration poll) {
  const absl::Time deadline = absl::Now() + timeout;
  while (absl::Now() < deadline) {
    if (cond()) return true;
    absl::SleepFor(poll);
  }
  return cond();
}

int RunShell(const std::string& command, std::string* out) {
  FILE* p = popen(absl::StrCat(command, " 2>&1").c_str(), "r");
  if (p == nullptr) return -1;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) out->append(buf, n);
  const int status = pclose(p);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::string HttpGetResponse(int port, const std::string& path) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return "";
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string out;
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) {
    const std::string req = absl::StrCat("GET ", path, " HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n");
    if (write(fd, req.data(), req.size()) == static_cast<ssize_t>(req.size())) {
      char buf[8192];
      ssize_t n;
      while ((n = read(fd, buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
    }
  }
  close(fd);
  return out;
}

std::string HttpGet(int port, const std::string& path) {
  const std::string resp = HttpGetResponse(port, path);
  const size_t body = resp.find("\r\n\r\n");
  return body == std::string::npos ? "" : resp.substr(body + 4);
}

double MetricValue(const std::string& page, const std::string& series) {
  for (absl::string_view line : absl::StrSplit(page, '\n')) {
    if (!absl::ConsumePrefix(&line, series) || !absl::ConsumePrefix(&line, " ")) continue;
    double v = 0;
    if (absl::SimpleAtod(line, &v)) return v;
  }
  return -1;
}

double MetricSum(const std::string& page, const std::string& name, const std::string& label,
                 std::map<std::string, double>* per_host) {
  double sum = 0;
  for (absl::string_view line : absl::StrSplit(page, '\n')) {
    if (line.empty() || line[0] == '#' || !absl::StartsWith(line, name)) continue;
    if (line.size() > name.size() && line[name.size()] != ' ' && line[name.size()] != '{') {
      continue;
    }
    if (!label.empty() && !absl::StrContains(line, label)) continue;
    double v = 0;
    const size_t sp = line.rfind(' ');
    if (sp == absl::string_view::npos || !absl::SimpleAtod(line.substr(sp + 1), &v)) continue;
    sum += v;
    if (per_host == nullptr) continue;
    const size_t at = line.find("host=\"");
    if (at == absl::string_view::npos) continue;
    const size_t end = line.find('"', at + 6);
    if (end == absl::string_view::npos) continue;
    (*per_host)[std::string(line.substr(at + 6, end - at - 6))] += v;
  }
  return sum;
}

}  // namespace rocetune::testing
