#ifndef ROCETUNE_TESTS_TESTING_TEST_SUPPORT_H_
#define ROCETUNE_TESTS_TESTING_TEST_SUPPORT_H_

// What tests of every kind share: temp dirs, fixture trees, waiting on a
// condition, running a shell command, a plain HTTP GET to a loopback port,
// paths of built binaries.
// One implementation each (tests/testing/test_support.cc).

#include <functional>
#include <map>
#include <string>

#include "absl/time/time.h"

namespace rocetune::testing {

// A fresh directory under $TEST_TMPDIR (else /tmp) named after `name`; ""
// when it cannot be made. It is kept while the tests run and after a failure
// (for its logs), and removed when the test binary ends with every test
// passed.
std::string MakeTempDir(const std::string& name);

// A fresh directory as MakeTempDir, removed with everything in it when this
// object is destroyed.
class TempDir {
 public:
  explicit TempDir(const std::string& name);
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// The source tree's fixture host `host` (tests/fixtures/hosts/<host>, with
// its sys/ and debug/), read-only.
std::string HostFixture(const std::string& host);

// A private writable copy of HostFixture(host), removed on destruction.
class FixtureTree {
 public:
  explicit FixtureTree(const std::string& host);
  ~FixtureTree();
  FixtureTree(const FixtureTree&) = delete;
  FixtureTree& operator=(const FixtureTree&) = delete;

  const std::string& root() const { return root_; }
  std::string sys() const { return root_ + "/sys"; }
  std::string debug() const { return root_ + "/debug"; }

  static std::string ReadFile(const std::string& path);
  static void WriteFile(const std::string& path, const std::string& data);

 private:
  std::string root_;
};

// Path of a built binary, e.g. BuiltBinary("agent/rocetune-agent").
std::string BuiltBinary(const std::string& relative);

// Polls `cond` (real time, every `poll`) until it holds or `timeout` passes;
// returns its last value.
bool Eventually(const std::function<bool()>& cond, absl::Duration timeout = absl::Seconds(5),
                absl::Duration poll = absl::Milliseconds(5));

// Runs `command` with /bin/sh, its stderr joined to its stdout, appended to
// `out`; returns its exit code, or -1 when it could not run or was killed.
int RunShell(const std::string& command, std::string* out);

// GET http://127.0.0.1:port/path (HTTP/1.0): the whole response, status
// line and headers included; "" when the connection or the request failed.
std::string HttpGetResponse(int port, const std::string& path);
// The same, the body only ("" on failure or without a header end).
std::string HttpGet(int port, const std::string& path);

// In a Prometheus text page, the value of the sample named exactly `series`
// (name plus labels, as printed), or -1 when there is none.
double MetricValue(const std::string& page, const std::string& series);
// The sum of the samples of metric `name` (any labels) in a Prometheus text
// page whose line contains `label` (every sample when empty); with
// `per_host`, also each sample's value added under its `host` label. 0 when
// there is none.
double MetricSum(const std::string& page, const std::string& name, const std::string& label = "",
                 std::map<std::string, double>* per_host = nullptr);

}  // namespace rocetune::testing

#endif  // ROCETUNE_TESTS_TESTING_TEST_SUPPORT_H_
