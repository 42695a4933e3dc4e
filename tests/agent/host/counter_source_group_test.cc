#include "agent/host/counter_source_group.h"

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "daemon/logging.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace rocetune {
namespace {

using ::testing::HasSubstr;

// A member that yields one counter, or fails with `error` when it is set.
class FakeSource : public CounterSource {
 public:
  FakeSource(std::string name, std::string counter, absl::Status error = absl::OkStatus())
      : name_(std::move(name)), counter_(std::move(counter)), error_(std::move(error)) {}
  std::string name() const override { return name_; }
  absl::Status Collect(std::vector<CounterValue>* out) override {
    if (!error_.ok()) return error_;
    CounterValue& v = out->emplace_back();
    v.key.device = "dev0";
    v.key.name = counter_;
    v.value = ++calls_;
    return absl::OkStatus();
  }

 private:
  std::string name_;
  std::string counter_;
  absl::Status error_;
  uint64_t calls_ = 0;
};

size_t Count(const std::string& haystack, const std::string& needle) {
  size_t n = 0;
  for (size_t at = haystack.find(needle); at != std::string::npos;
       at = haystack.find(needle, at + 1)) {
    ++n;
  }
  return n;
}

// A member that fails every round is logged once (not once per round), and the
// group still succeeds on the other member's counters.
TEST(CounterSourceGroupTest, AMemberFailingEveryRoundIsLoggedOnce) {
  std::vector<std::unique_ptr<CounterSource>> members;
  members.push_back(std::make_unique<FakeSource>("good", "a"));
  members.push_back(
      std::make_unique<FakeSource>("bad_g1", "b", absl::UnavailableError("no such netdev g1")));
  CounterSourceGroup group("g1", std::move(members));
  std::string log;
  SetLogSinkForTest(&log);
  for (int round = 0; round < 4; ++round) {
    CounterBuffer buf;
    ASSERT_TRUE(group.CollectInto(&buf).ok());
    ASSERT_EQ(buf.size(), 1u);
    EXPECT_EQ(buf[0].key.name, "a");
    EXPECT_EQ(buf[0].value, static_cast<uint64_t>(round + 1));
  }
  SetLogSinkForTest(nullptr);
  EXPECT_EQ(Count(log, "no such netdev g1"), 1u) << log;
}

// When every member fails, each round returns the first member's error; each
// member is logged once.
TEST(CounterSourceGroupTest, EveryMemberFailingReturnsTheFirstErrorEachRound) {
  std::vector<std::unique_ptr<CounterSource>> members;
  members.push_back(
      std::make_unique<FakeSource>("bad_a", "a", absl::UnavailableError("first g2 error")));
  members.push_back(
      std::make_unique<FakeSource>("bad_b", "b", absl::InternalError("second g2 error")));
  CounterSourceGroup group("g2", std::move(members));
  std::string log;
  SetLogSinkForTest(&log);
  for (int round = 0; round < 3; ++round) {
    std::vector<CounterValue> out;
    absl::Status s = group.Collect(&out);
    EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
    EXPECT_THAT(s.message(), HasSubstr("first g2 error"));
    EXPECT_TRUE(out.empty());
  }
  SetLogSinkForTest(nullptr);
  EXPECT_EQ(Count(log, "first g2 error"), 1u) << log;
  EXPECT_EQ(Count(log, "second g2 error"), 1u) << log;
}

}  // namespace
}  // namespace rocetune
