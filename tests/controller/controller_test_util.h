#ifndef ROCETUNE_TESTS_CONTROLLER_CONTROLLER_TEST_UTIL_H_
#define ROCETUNE_TESTS_CONTROLLER_CONTROLLER_TEST_UTIL_H_

#include <functional>
#include <string>

#include "absl/time/time.h"
#include "tests/testing/test_support.h"

// The controller tests' names for the shared helpers (tests/testing/).
namespace rocetune::controller::testing {

// Polls `cond` (real time) until it holds or `seconds` pass.
inline bool Eventually(const std::function<bool()>& cond, double seconds = 5) {
  return ::rocetune::testing::Eventually(cond, absl::Seconds(seconds));
}

// A fresh directory under $TEST_TMPDIR or /tmp.
inline std::string MakeTempDir() { return ::rocetune::testing::MakeTempDir("ctl"); }

// The whole response (status line and headers too) of GET
// http://127.0.0.1:port/path; "" on error.
inline std::string HttpGet(int port, const std::string& path) {
  return ::rocetune::testing::HttpGetResponse(port, path);
}

}  // namespace rocetune::controller::testing

#endif  // ROCETUNE_TESTS_CONTROLLER_CONTROLLER_TEST_UTIL_H_
