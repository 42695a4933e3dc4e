#include <gtest/gtest.h>

#include <string>

#include "daemon/clock.h"
#include "daemon/logging.h"

namespace rocetune {
namespace {

class LoggingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SetLogSinkForTest(&out_);
    ASSERT_TRUE(SetLogLevel("info").ok());
  }
  void TearDown() override { SetLogSinkForTest(nullptr); }
  std::string out_;
};

TEST_F(LoggingTest, LogfmtWithQuotingAndLevels) {
  SetLogComponent("agent");
  LogInfo("registered host", {{"host", "h1"}, {"labels", "rack=r1 pod=p1"}});
  EXPECT_NE(out_.find("level=info component=agent msg=\"registered host\" host=h1 "
                      "labels=\"rack=r1 pod=p1\"\n"),
            std::string::npos)
      << out_;
  out_.clear();
  LogDebug("hidden");
  EXPECT_TRUE(out_.empty());
  ASSERT_TRUE(SetLogLevel("debug").ok());
  LogDebug("shown");
  EXPECT_NE(out_.find("msg=shown"), std::string::npos);
  EXPECT_EQ(SetLogLevel("loud").code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(LoggingTest, LogOnceLogsOnce) {
  EXPECT_TRUE(LogOnce("k1", LogLevel::kWarning, "counter missing", {{"name", "cnp_sent"}}));
  EXPECT_FALSE(LogOnce("k1", LogLevel::kWarning, "counter missing", {{"name", "cnp_sent"}}));
  EXPECT_TRUE(LogOnce("k2", LogLevel::kWarning, "other"));
  size_t first = out_.find("counter missing");
  ASSERT_NE(first, std::string::npos);
  EXPECT_EQ(out_.find("counter missing", first + 1), std::string::npos);
}

TEST(FakeClockTest, MovesOnlyWhenTold) {
  FakeClock clock;
  absl::Duration m0 = clock.Monotonic();
  absl::Time t0 = clock.Now();
  EXPECT_EQ(clock.Monotonic(), m0);
  clock.Advance(absl::Milliseconds(250));
  EXPECT_EQ(clock.Monotonic() - m0, absl::Milliseconds(250));
  EXPECT_EQ(clock.Now() - t0, absl::Milliseconds(250));
  clock.SleepFor(absl::Seconds(1));
  EXPECT_EQ(clock.Monotonic() - m0, absl::Milliseconds(1250));
  clock.Advance(-absl::Seconds(5));  // never goes backwards
  EXPECT_EQ(clock.Monotonic() - m0, absl::Milliseconds(1250));
}

TEST(RealClockTest, MonotonicAdvances) {
  Clock* c = Clock::Real();
  absl::Duration a = c->Monotonic();
  c->SleepFor(absl::Milliseconds(2));
  EXPECT_GE(c->Monotonic() - a, absl::Milliseconds(2));
}

}  // namespace
}  // namespace rocetune

#include "daemon/json.h"

namespace rocetune {
namespace {

TEST(JsonQuoteTest, EscapesQuotesBackslashesAndControls) {
  EXPECT_EQ(JsonQuote("plain"), "\"plain\"");
  EXPECT_EQ(JsonQuote("a\"b\\c"), "\"a\\\"b\\\\c\"");
  EXPECT_EQ(JsonQuote("RNR sent\n"), "\"RNR sent\\n\"");
  EXPECT_EQ(JsonQuote(std::string("\x01", 1)), "\"\\u0001\"");
  EXPECT_EQ(JsonQuote(""), "\"\"");
}

}  // namespace
}  // namespace rocetune
