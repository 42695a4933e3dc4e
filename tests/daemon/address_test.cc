#include "daemon/address.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

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

TEST(CheckHostIdTest, HostnameLikeIdsPass) {
  for (const std::string& id :
       std::vector<std::string>{"h1", "gpu-node-017", "n1.rack3.dc1", "leaf1", "host_7",
                                std::string(63, 'a') + "." + std::string(63, 'b')}) {
    EXPECT_TRUE(CheckHostId(id).ok()) << id << ": " << CheckHostId(id);
  }
}

TEST(CheckHostIdTest, PathsControlBytesAndOversizedIdsAreRefusedBoundedAndEscaped) {
  for (const auto& [id, why] : std::vector<std::pair<std::string, std::string>>{
           {"", "empty"},
           {"../../etc/passwd", "empty label"},
           {"etc/passwd", "character \"/\" at offset 3"},
           {"has space", "character \" \" at offset 3"},
           {"-h1", "starts with a letter or digit"},
           {".h1", "leading dot"},
           {"h1.", "trailing dot"},
           {"h\n1", "character \"\\n\" at offset 1"},
           {std::string(64, 'a'), "longer than 63"},
           {std::string(900 * 1024, 'x'), "too long"}}) {
    absl::Status s = CheckHostId(id);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << why;
    EXPECT_THAT(std::string(s.message()), HasSubstr(why));
    EXPECT_LT(s.message().size(), 400u) << why;  // a 900 KB id is not echoed whole
  }
  EXPECT_THAT(std::string(CheckHostId(std::string(254, 'a')).message()), HasSubstr("(254 bytes)"));
}

}  // namespace
}  // namespace rocetune
