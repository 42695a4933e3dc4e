#include "daemon/grpc_log.h"

#include <gmock/gmock.h>
#include <grpc/grpc.h>
#include <grpc/support/log.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "daemon/logging.h"

namespace rocetune {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

std::vector<std::string> Lines(const std::string& text, absl::string_view with) {
  std::vector<std::string> out;
  for (absl::string_view l : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    if (absl::StrContains(l, with)) out.emplace_back(l);
  }
  return out;
}

// What a client that sends garbage makes gRPC log, once per connection: a
// message that carries the client's bytes.
std::string Garbage() {
  std::string g = "Handshake failed: \x01\x02\x1b[31m";
  g += std::string(2000, 'A');
  return g;
}

class GrpcLogTest : public ::testing::Test {
 protected:
  // gRPC reads its verbosity (GRPC_VERBOSITY, default ERROR) when it starts.
  static void SetUpTestSuite() { grpc_init(); }
  static void TearDownTestSuite() { grpc_shutdown(); }
};

TEST_F(GrpcLogTest, LinesAreBoundedEscapedAndRateLimited) {
  std::string sink;
  SetLogSinkForTest(&sink);
  RouteGrpcLogs(/*burst=*/3, /*period=*/absl::Hours(1));
  const uint64_t before = GrpcLogLinesSuppressed();
  for (int i = 0; i < 10; ++i) gpr_log(GPR_ERROR, "%s", Garbage().c_str());
  SetLogSinkForTest(nullptr);
  std::vector<std::string> lines = Lines(sink, "msg=grpc");
  ASSERT_EQ(lines.size(), 3u) << sink.substr(0, 3000);
  EXPECT_EQ(GrpcLogLinesSuppressed() - before, 7u);
  for (const std::string& l : lines) {
    EXPECT_LT(l.size(), 800u);
    EXPECT_THAT(l, HasSubstr("level=warn"));
    EXPECT_THAT(l, HasSubstr("\\\\x01"));  // escaped (and the logfmt quoting escapes the \)
    EXPECT_THAT(l, HasSubstr("..."));
    EXPECT_EQ(l.find('\x1b'), std::string::npos);
    EXPECT_EQ(l.find('\x01'), std::string::npos);
  }
}

TEST_F(GrpcLogTest, TheNextPeriodReportsWhatWasHeldBack) {
  std::string sink;
  SetLogSinkForTest(&sink);
  RouteGrpcLogs(/*burst=*/1, /*period=*/absl::Hours(1));
  gpr_log(GPR_ERROR, "first");
  gpr_log(GPR_ERROR, "held 1");
  gpr_log(GPR_ERROR, "held 2");
  RouteGrpcLogs(/*burst=*/1, /*period=*/absl::Hours(1));  // a new period
  gpr_log(GPR_ERROR, "after");
  SetLogSinkForTest(nullptr);
  EXPECT_THAT(sink, HasSubstr("first"));
  EXPECT_THAT(sink, HasSubstr("msg=\"gRPC log lines suppressed\" count=2"));
  EXPECT_THAT(sink, HasSubstr("after"));
  EXPECT_THAT(sink, Not(HasSubstr("held 1")));
}

}  // namespace
}  // namespace rocetune
