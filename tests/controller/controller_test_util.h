#ifndef ROCETUNE_TESTS_CONTROLLER_CONTROLLER_TEST_UTIL_H_
#define ROCETUNE_TESTS_CONTROLLER_CONTROLLER_TEST_UTIL_H_

#include <stdlib.h>

#include <chrono>
#include <functional>
#include <string>
#include <thread>

namespace rocetune::controller::testing {

// Polls `cond` (real time) until it holds or `seconds` pass.
inline bool Eventually(const std::function<bool()>& cond, double seconds = 5) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < deadline) {
    if (cond()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return cond();
}

// A fresh directory under $TEST_TMPDIR or /tmp.
inline std::string MakeTempDir() {
  const char* base = getenv("TEST_TMPDIR");
  std::string tmpl = std::string(base != nullptr ? base : "/tmp") + "/rocetune_ctl_XXXXXX";
  char* dir = mkdtemp(tmpl.data());
  return dir != nullptr ? std::string(dir) : std::string();
}

}  // namespace rocetune::controller::testing

#endif  // ROCETUNE_TESTS_CONTROLLER_CONTROLLER_TEST_UTIL_H_
