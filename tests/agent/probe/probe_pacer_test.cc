#include "agent/probe/probe_pacer.h"

#include <set>

#include "gtest/gtest.h"

namespace rocetune {
namespace {

TEST(ProbePacerTest, HoldsTheRatePerPeerWithJitter) {
  ProbePacer pacer(3, 50, absl::ZeroDuration(), 7);
  std::vector<int> count(3, 0);
  std::set<int64_t> gaps;
  absl::Duration last0 = absl::ZeroDuration();
  for (absl::Duration now; now < absl::Seconds(20); now += absl::Microseconds(500)) {
    for (int i : pacer.TakeDue(now)) {
      count[i]++;
      if (i == 0) {
        gaps.insert(absl::ToInt64Microseconds(now - last0));
        last0 = now;
      }
    }
  }
  for (int c : count) EXPECT_NEAR(c, 1000, 60);
  EXPECT_GT(gaps.size(), 10u);  // jittered, not a fixed period
}

TEST(ProbePacerTest, NeverBurstsAfterAStall) {
  ProbePacer pacer(2, 1000, absl::ZeroDuration(), 1);
  // Ten seconds without a call: each peer is due once, not 10,000 times.
  std::vector<int> due = pacer.TakeDue(absl::Seconds(10));
  EXPECT_EQ(due.size(), 2u);
  EXPECT_TRUE(pacer.TakeDue(absl::Seconds(10)).empty());
  EXPECT_GT(pacer.NextDue(), absl::Seconds(10));
}

TEST(ProbePacerTest, NoPeersNeverDue) {
  ProbePacer pacer(0, 0, absl::ZeroDuration(), 1);
  EXPECT_TRUE(pacer.TakeDue(absl::Hours(1)).empty());
  EXPECT_EQ(pacer.NextDue(), absl::InfiniteDuration());
}

}  // namespace
}  // namespace rocetune
