#include "cli/histogram.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_split.h"
#include "cli/output.h"
#include "model/quantile_sketch.h"

namespace rocetune::cli {
namespace {

using ::testing::HasSubstr;

v1::Sketch Uniform(double lo, double hi, int n) {
  QuantileSketch s;
  for (int i = 0; i < n; ++i) s.Insert(lo + (hi - lo) * i / (n - 1));
  return s.ToProto();
}

uint64_t Sum(const std::vector<uint64_t>& v) {
  uint64_t n = 0;
  for (uint64_t x : v) n += x;
  return n;
}

// Index of the bin holding the most samples.
size_t Mode(const std::vector<uint64_t>& v) {
  return std::max_element(v.begin(), v.end()) - v.begin();
}

TEST(BarTest, EighthBlocksPaddedToWidth) {
  EXPECT_EQ(Bar(1.0, 4), "████");
  EXPECT_EQ(Bar(0.5, 4), "██  ");
  EXPECT_EQ(Bar(1.0 / 32, 4), "▏   ");
  EXPECT_EQ(Bar(0.0, 3), "   ");
  EXPECT_EQ(Bar(2.0, 2), "██");  // clamped
  EXPECT_EQ(Bar(-1, 2), "  ");
  EXPECT_EQ(DisplayWidth(Bar(0.37, 10)), 10u);
}

TEST(HistogramTest, BothGroupsShareLogSpacedBins) {
  v1::Sketch canary = Uniform(18e-6, 30e-6, 1000);
  v1::Sketch control = Uniform(9e-6, 12e-6, 400);
  HistogramOptions opt;
  opt.bins = 12;
  Binned b = BinSketches({{"canary", &canary}, {"control", &control}}, opt);
  ASSERT_EQ(b.edges.size(), 13u);
  // Log spacing: constant ratio between neighbouring edges.
  double ratio = b.edges[1] / b.edges[0];
  for (size_t i = 1; i + 1 < b.edges.size(); ++i) {
    EXPECT_NEAR(b.edges[i + 1] / b.edges[i], ratio, 1e-9);
  }
  // The range covers both groups.
  EXPECT_LE(b.edges.front(), 9e-6 * 1.01);
  EXPECT_GE(b.edges.back(), 30e-6 * 0.99);
  ASSERT_EQ(b.counts.size(), 2u);
  EXPECT_EQ(Sum(b.counts[0]), 1000u);
  EXPECT_EQ(Sum(b.counts[1]), 400u);
  EXPECT_EQ(b.totals[0], 1000u);
  // Canary's mass sits in higher bins than control's.
  EXPECT_GT(Mode(b.counts[0]), Mode(b.counts[1]));
  // Control has nothing above 12.2us, canary nothing below 17.8us.
  for (size_t i = 0; i < b.counts[1].size(); ++i) {
    if (b.edges[i] > 12.2e-6) {
      EXPECT_EQ(b.counts[1][i], 0u) << i;
    }
    if (b.edges[i + 1] < 17.8e-6) {
      EXPECT_EQ(b.counts[0][i], 0u) << i;
    }
  }
}

TEST(HistogramTest, RenderShowsBothSeriesOnEveryBinLine) {
  v1::Sketch canary = Uniform(18e-6, 30e-6, 1000);
  v1::Sketch control = Uniform(9e-6, 12e-6, 400);
  HistogramOptions opt;
  opt.bins = 8;
  opt.bar_width = 10;
  std::string out = RenderHistograms({{"canary", &canary}, {"control", &control}}, opt);
  std::vector<std::string> lines = absl::StrSplit(out, '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 9u) << out;  // header + 8 bins
  EXPECT_THAT(lines[0], HasSubstr("canary (n=1000)"));
  EXPECT_THAT(lines[0], HasSubstr("control (n=400)"));
  for (size_t i = 1; i < lines.size(); ++i) {
    std::vector<std::string> bars = absl::StrSplit(lines[i], "│");
    EXPECT_EQ(bars.size(), 3u) << lines[i];
    EXPECT_THAT(lines[i], HasSubstr(" - "));  // bin range
    EXPECT_THAT(lines[i], HasSubstr("%"));
  }
  // Shares of each series add up to 100%.
  for (int series = 1; series <= 2; ++series) {
    double total = 0;
    for (size_t i = 1; i < lines.size(); ++i) {
      std::vector<std::string> bars = absl::StrSplit(lines[i], "│");
      std::string cell = bars[series];
      size_t pct = cell.rfind('%');
      size_t start = cell.rfind(' ', pct - 1);
      total += std::stod(cell.substr(start + 1, pct - start - 1));
    }
    EXPECT_NEAR(total, 100.0, 0.5) << series;
  }
  // The first bin starts in microseconds.
  EXPECT_THAT(lines[1], HasSubstr("us - "));
  // A full-width bar appears somewhere (the largest share fills the bar).
  EXPECT_THAT(out, HasSubstr("██████████"));
}

TEST(HistogramTest, EmptySketches) {
  v1::Sketch empty;
  EXPECT_EQ(RenderHistograms({{"canary", &empty}, {"control", &empty}}), "(no samples)\n");
  EXPECT_EQ(RenderHistograms({}), "(no samples)\n");
  v1::Sketch control = Uniform(9e-6, 12e-6, 100);
  std::string out = RenderHistograms({{"canary", &empty}, {"control", &control}});
  EXPECT_THAT(out, HasSubstr("canary (no samples)"));
  EXPECT_THAT(out, HasSubstr("control (n=100)"));
  std::vector<std::string> lines = absl::StrSplit(out, '\n', absl::SkipEmpty());
  for (size_t i = 1; i < lines.size(); ++i) {
    std::vector<std::string> bars = absl::StrSplit(lines[i], "│");
    ASSERT_EQ(bars.size(), 3u);
    EXPECT_THAT(bars[1], HasSubstr("0.0%"));
  }
}

TEST(HistogramTest, InvalidAccuracyCountsAsEmptyAndZerosGetTheirOwnRow) {
  v1::Sketch bad = Uniform(1e-6, 2e-6, 10);
  bad.set_relative_accuracy(0);
  EXPECT_EQ(RenderHistograms({{"x", &bad}}), "(no samples)\n");
  bad.set_relative_accuracy(std::nan(""));
  EXPECT_EQ(RenderHistograms({{"x", &bad}}), "(no samples)\n");

  QuantileSketch s;
  s.Insert(0, 5);
  s.Insert(10e-6, 5);
  v1::Sketch with_zeros = s.ToProto();
  std::string out = RenderHistograms({{"x", &with_zeros}});
  std::vector<std::string> lines = absl::StrSplit(out, '\n', absl::SkipEmpty());
  ASSERT_GE(lines.size(), 2u);
  EXPECT_EQ(lines[1].substr(0, 2), "0 ");
  EXPECT_THAT(lines[1], HasSubstr("50.0%"));
}

TEST(HistogramTest, SingleValueStillDrawsPositiveWidthBins) {
  QuantileSketch s;
  s.Insert(5e-6, 7);
  v1::Sketch one = s.ToProto();
  Binned b = BinSketches({{"x", &one}}, {});
  ASSERT_FALSE(b.edges.empty());
  for (size_t i = 0; i + 1 < b.edges.size(); ++i) EXPECT_LT(b.edges[i], b.edges[i + 1]);
  EXPECT_EQ(Sum(b.counts[0]), 7u);
}

}  // namespace
}  // namespace rocetune::cli
