#ifndef ROCETUNE_TESTS_AGENT_HOST_FIXTURE_TREE_H_
#define ROCETUNE_TESTS_AGENT_HOST_FIXTURE_TREE_H_

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "gtest/gtest.h"

namespace rocetune::testing_util {

// A private writable copy of tests/fixtures/hosts/<host>, removed on destruction.
class FixtureTree {
 public:
  explicit FixtureTree(const std::string& host) {
    std::string tmpl = std::filesystem::path(::testing::TempDir()).lexically_normal().string() +
                       "rocetune_fixture_XXXXXX";
    char* dir = mkdtemp(tmpl.data());
    EXPECT_NE(dir, nullptr);
    root_ = tmpl;
    std::filesystem::copy(
        std::string(ROCETUNE_SOURCE_DIR) + "/tests/fixtures/hosts/" + host, root_,
        std::filesystem::copy_options::recursive | std::filesystem::copy_options::copy_symlinks);
  }
  ~FixtureTree() {
    std::error_code ec;
    std::filesystem::remove_all(root_, ec);
  }
  FixtureTree(const FixtureTree&) = delete;
  FixtureTree& operator=(const FixtureTree&) = delete;

  std::string root() const { return root_; }
  std::string sys() const { return root_ + "/sys"; }
  std::string debug() const { return root_ + "/debug"; }

  static std::string ReadFile(const std::string& path) {
    std::ifstream in(path);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
  static void WriteFile(const std::string& path, const std::string& data) {
    std::ofstream out(path, std::ios::trunc);
    out << data;
  }

 private:
  std::string root_;
};

}  // namespace rocetune::testing_util

#endif  // ROCETUNE_TESTS_AGENT_HOST_FIXTURE_TREE_H_
