#include "daemon/state_dir_lock.h"

#include <unistd.h>

#include <filesystem>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace rocetune {
namespace {

using ::testing::HasSubstr;

std::string TestDir(const std::string& name) {
  std::string d = absl::StrCat(::testing::TempDir(), "/state_dir_lock_", getpid(), "_", name);
  std::filesystem::remove_all(d);
  return d;
}

TEST(StateDirLockTest, SecondHolderIsRefusedWithTheFirstOnesPid) {
  const std::string dir = TestDir("second");
  auto first = StateDirLock::Acquire(dir + "/nested", "rocetune-controller");
  ASSERT_TRUE(first.ok()) << first.status();
  auto second = StateDirLock::Acquire(dir + "/nested", "rocetune-controller");
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(second.status().message()),
              HasSubstr(absl::StrCat("in use by rocetune-controller (pid ", getpid(), ")")));
  EXPECT_THAT(std::string(second.status().message()), HasSubstr(dir + "/nested"));
  // Released with the holder: the next instance gets it.
  first->reset();
  EXPECT_TRUE(StateDirLock::Acquire(dir + "/nested", "rocetune-controller").ok());
  std::filesystem::remove_all(dir);
}

TEST(StateDirLockTest, DifferentDirsDoNotConflict) {
  const std::string dir = TestDir("two");
  auto a = StateDirLock::Acquire(dir + "/a", "rocetune-agent");
  auto b = StateDirLock::Acquire(dir + "/b", "rocetune-agent");
  EXPECT_TRUE(a.ok());
  EXPECT_TRUE(b.ok());
  std::filesystem::remove_all(dir);
}

TEST(StateDirLockTest, UncreatableDirIsNamed) {
  auto r = StateDirLock::Acquire("/proc/self/no/such/dir", "rocetune-agent");
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("/proc/self/no/such/dir"));
}

}  // namespace
}  // namespace rocetune
