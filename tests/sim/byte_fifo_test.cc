// First-in-first-out service of byte runs in one egress queue.
#include "sim/byte_fifo.h"

#include <cmath>
#include <cstdint>
#include <set>
#include <vector>

#include "gtest/gtest.h"

namespace rocetune::sim {
namespace {

struct Piece {
  uint64_t flow_id;
  int hop;
  double bytes;
  bool operator==(const Piece& o) const {
    return flow_id == o.flow_id && hop == o.hop && std::abs(bytes - o.bytes) < 1e-9;
  }
};

std::ostream& operator<<(std::ostream& os, const Piece& p) {
  return os << "{flow " << p.flow_id << " hop " << p.hop << " " << p.bytes << " B}";
}

// Serves `budget` with every run live; returns the pieces in service order.
std::vector<Piece> Serve(ByteFifo& fifo, double budget, double* served = nullptr) {
  std::vector<Piece> out;
  const double s = fifo.Serve(
      budget, 1e-9, [](const ByteRun&) { return true; },
      [&](const ByteRun& r, double b) {
        out.push_back({r.flow_id, r.hop, b});
      });
  if (served != nullptr) *served = s;
  return out;
}

TEST(ByteFifoTest, ServesInArrivalOrder) {
  ByteFifo fifo;
  fifo.Push(1, 0, 1, 100);
  fifo.Push(2, 1, 1, 50);
  fifo.Push(1, 0, 1, 30);  // behind flow 2: a new run, not merged with the first
  EXPECT_EQ(fifo.size(), 3u);
  double served = 0;
  EXPECT_EQ(Serve(fifo, 120, &served), (std::vector<Piece>{{1, 1, 100}, {2, 1, 20}}));
  EXPECT_DOUBLE_EQ(served, 120);
  EXPECT_EQ(Serve(fifo, 60, &served), (std::vector<Piece>{{2, 1, 30}, {1, 1, 30}}));
  EXPECT_DOUBLE_EQ(served, 60);
  EXPECT_TRUE(fifo.empty());
}

TEST(ByteFifoTest, MergesConsecutiveArrivalsOfOneOwner) {
  ByteFifo fifo;
  fifo.Push(7, 3, 1, 10);
  fifo.Push(7, 3, 1, 20);
  EXPECT_EQ(fifo.size(), 1u);
  EXPECT_DOUBLE_EQ(fifo.front().bytes, 30);
  fifo.Push(7, 3, 2, 5);  // same flow, another hop: another owner
  fifo.Push(8, 3, 2, 5);  // another flow in the same slot
  EXPECT_EQ(fifo.size(), 3u);
}

TEST(ByteFifoTest, ARunBehindAStandingQueueCompletesWhenTheQueueDrains) {
  // 40 KB standing queue, then a 5 KB flow; 1 KB served per step.
  ByteFifo fifo;
  fifo.Push(1, 0, 1, 40000);
  fifo.Push(2, 1, 1, 5000);
  int steps = 0, first_step_of_2 = -1, done_step_of_2 = -1;
  double left_of_2 = 5000;
  while (!fifo.empty() && steps < 1000) {
    ++steps;
    fifo.Serve(
        1000, 1e-9, [](const ByteRun&) { return true; },
        [&](const ByteRun& r, double b) {
          if (r.flow_id != 2) return;
          if (first_step_of_2 < 0) first_step_of_2 = steps;
          left_of_2 -= b;
          if (r.bytes <= 0) done_step_of_2 = steps;
        });
  }
  EXPECT_EQ(first_step_of_2, 41) << "waits for the 40 KB in front of it";
  EXPECT_EQ(done_step_of_2, 45) << "then leaves at line rate";
  EXPECT_NEAR(left_of_2, 0, 1e-9);
}

TEST(ByteFifoTest, ARunServedToZeroLeaves) {
  ByteFifo fifo;
  fifo.Push(1, 0, 1, 100);
  fifo.Push(2, 1, 1, 100);
  Serve(fifo, 100);
  EXPECT_EQ(fifo.size(), 1u);
  EXPECT_EQ(fifo.front().flow_id, 2u);
}

TEST(ByteFifoTest, DustIsServedWithItsRun) {
  ByteFifo fifo;
  fifo.Push(1, 0, 1, 100);
  double served = 0;
  const std::vector<Piece> p = [&] {
    std::vector<Piece> out;
    served = fifo.Serve(
        99.9999, 1e-3, [](const ByteRun&) { return true; },
        [&](const ByteRun& r, double b) {
          out.push_back({r.flow_id, r.hop, b});
        });
    return out;
  }();
  EXPECT_EQ(p, (std::vector<Piece>{{1, 1, 100}})) << "less than dust is not left behind";
  EXPECT_DOUBLE_EQ(served, 100);
  EXPECT_TRUE(fifo.empty());
}

TEST(ByteFifoTest, NoBudgetServesNothing) {
  ByteFifo fifo;
  fifo.Push(1, 0, 1, 100);
  EXPECT_TRUE(Serve(fifo, 0).empty());
  EXPECT_EQ(fifo.size(), 1u);
  EXPECT_DOUBLE_EQ(fifo.front().bytes, 100);
}

TEST(ByteFifoTest, RunsOfDepartedOwnersAreDiscardedUnserved) {
  ByteFifo fifo;
  fifo.Push(1, 0, 1, 100);
  fifo.Push(2, 1, 1, 100);
  fifo.Push(3, 2, 1, 100);
  const std::set<uint64_t> gone = {1, 3};
  std::vector<Piece> out;
  auto live = [&](const ByteRun& r) { return gone.count(r.flow_id) == 0; };
  auto sink = [&](const ByteRun& r, double b) { out.push_back({r.flow_id, r.hop, b}); };
  EXPECT_DOUBLE_EQ(fifo.Serve(150, 1e-9, live, sink), 100);
  EXPECT_EQ(out, (std::vector<Piece>{{2, 1, 100}}));
  EXPECT_TRUE(fifo.empty()) << "the stale run at the tail goes even with budget left over";
}

TEST(ByteFifoTest, KeepsOrderAcrossCompaction) {
  ByteFifo fifo;
  for (uint64_t id = 1; id <= 300; ++id) fifo.Push(id, static_cast<int>(id), 1, 10);
  std::vector<uint64_t> order;
  for (int step = 0; step < 41; ++step) {  // 3010 bytes at 75 per step
    fifo.Serve(
        75, 1e-9, [](const ByteRun&) { return true; },
        [&](const ByteRun& r, double) {
          if (r.bytes <= 0) order.push_back(r.flow_id);
        });
    if (step == 10) fifo.Push(1000, 0, 1, 10);  // arrives mid-way, goes last
  }
  ASSERT_EQ(order.size(), 301u);
  for (uint64_t i = 0; i < 300; ++i) EXPECT_EQ(order[i], i + 1);
  EXPECT_EQ(order.back(), 1000u);
  EXPECT_TRUE(fifo.empty());
}

}  // namespace
}  // namespace rocetune::sim
