#ifndef ROCETUNE_CLI_HISTOGRAM_H_
#define ROCETUNE_CLI_HISTOGRAM_H_

#include <cstdint>
#include <string>
#include <vector>

#include "rocetune/v1/sketch.pb.h"

namespace rocetune::cli {

// One latency distribution to draw.
struct HistogramSeries {
  std::string label;         // e.g. "canary"
  const v1::Sketch* sketch;  // not owned; may be empty
};

struct HistogramOptions {
  int bins = 16;       // log-spaced bins between the smallest and largest value seen
  int bar_width = 24;  // characters of the longest bar
};

// The shared bins: edges[0] < edges[1] < ... < edges[bins], log-spaced, and
// each series' count per bin (a sketch bucket counts in the bin holding its
// representative value). Values at or below the sketch's zero threshold go
// to `zeros`. Sketches with an invalid relative accuracy count as empty.
struct Binned {
  std::vector<double> edges;                  // empty when every series is empty
  std::vector<std::vector<uint64_t>> counts;  // [series][bin]
  std::vector<uint64_t> zeros;                // [series]
  std::vector<uint64_t> totals;               // [series], zeros included
};
Binned BinSketches(const std::vector<HistogramSeries>& series, const HistogramOptions& options);

// The series side by side on the same bins: one line per bin with its range,
// then for each series a bar of unicode blocks (eighths) and its share of that
// series' samples. Bars share one scale, so equal lengths mean equal shares.
// "(no samples)" when every series is empty.
std::string RenderHistograms(const std::vector<HistogramSeries>& series,
                             const HistogramOptions& options = {});

// A bar `fraction` (0..1) of `width` characters long, in eighth blocks,
// padded with spaces to `width`.
std::string Bar(double fraction, int width);

}  // namespace rocetune::cli

#endif  // ROCETUNE_CLI_HISTOGRAM_H_
