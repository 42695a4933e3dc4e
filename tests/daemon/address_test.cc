#include "daemon/address.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace rocetune {
namespace {

using ::testing::HasSubstr;

TEST(ResolveLoopbackTest, NumericLoopbackAndLocalhostPassAsNumbers) {
  EXPECT_EQ(*ResolveLoopback("127.0.0.1:7070", "--x"), "127.0.0.1:7070");
  EXPECT_EQ(*ResolveLoopback("127.5.6.7:0", "--x"), "127.5.6.7:0");
  EXPECT_EQ(*ResolveLoopback("[::1]:7070", "--x"), "[::1]:7070");
  absl::StatusOr<std::string> local = ResolveLoopback("localhost:7070", "--x");
  ASSERT_TRUE(local.ok()) << local.status();
  EXPECT_THAT(*local, testing::AnyOf("127.0.0.1:7070", "[::1]:7070"));
}

TEST(ResolveLoopbackTest, NamesAndOtherAddressesAreRefused) {
  for (const char* a : {"127.evil.example:7070", "127.0.0.1.evil.example:1", "10.0.0.1:7070",
                        "[::ffff:10.0.0.1]:1", "0.0.0.0:7070", "[::]:1", "controller:7070"}) {
    absl::StatusOr<std::string> r = ResolveLoopback(a, "--controller");
    EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition) << a;
    EXPECT_THAT(r.status().message(), HasSubstr("--controller")) << a;
  }
  for (const char* a : {"127.0.0.1", "127.0.0.1:99999", ":7070", "[::1", "::1:7070", ""}) {
    EXPECT_EQ(ResolveLoopback(a, "--x").status().code(), absl::StatusCode::kInvalidArgument) << a;
  }
}

}  // namespace
}  // namespace rocetune
