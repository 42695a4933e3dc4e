#include "cli/histogram.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "cli/output.h"

namespace rocetune::cli {
namespace {

// One sketch bucket: its representative value and count.
struct Mass {
  double value;
  uint64_t count;
};

bool ValidAccuracy(const v1::Sketch& s) {
  return s.relative_accuracy() > 0 && s.relative_accuracy() < 1;
}

// The sketch's non-empty buckets, or nothing when the sketch is invalid.
std::vector<Mass> Buckets(const v1::Sketch& s) {
  std::vector<Mass> out;
  if (!ValidAccuracy(s)) return out;
  double a = s.relative_accuracy();
  double gamma = (1 + a) / (1 - a);
  for (int k = 0; k < s.counts_size(); ++k) {
    if (s.counts(k) == 0) continue;
    int64_t index = static_cast<int64_t>(s.bucket_offset()) + k;
    // Midpoint (relative) of bucket (gamma^(i-1), gamma^i], as the sketch itself uses.
    double v = 2.0 * std::pow(gamma, static_cast<double>(index)) / (gamma + 1.0);
    if (std::isfinite(v) && v > 0) out.push_back({v, s.counts(k)});
  }
  return out;
}

}  // namespace

std::string Bar(double fraction, int width) {
  static const char* const kEighths[] = {"", "▏", "▎", "▍", "▌", "▋", "▊", "▉"};
  fraction = std::clamp(std::isfinite(fraction) ? fraction : 0.0, 0.0, 1.0);
  int eighths = static_cast<int>(std::lround(fraction * width * 8));
  std::string out;
  int full = eighths / 8;
  for (int i = 0; i < full; ++i) out += "█";
  int cells = full;
  if (eighths % 8 != 0) {
    out += kEighths[eighths % 8];
    ++cells;
  }
  out.append(std::max(0, width - cells), ' ');
  return out;
}

Binned BinSketches(const std::vector<HistogramSeries>& series, const HistogramOptions& options) {
  Binned b;
  int bins = std::max(1, options.bins);
  std::vector<std::vector<Mass>> masses;
  double lo = INFINITY;
  double hi = 0;
  for (const HistogramSeries& s : series) {
    masses.push_back(s.sketch == nullptr ? std::vector<Mass>{} : Buckets(*s.sketch));
    uint64_t zeros = 0;
    if (s.sketch != nullptr && ValidAccuracy(*s.sketch)) zeros = s.sketch->zero_count();
    b.zeros.push_back(zeros);
    uint64_t total = zeros;
    for (const Mass& m : masses.back()) {
      total += m.count;
      lo = std::min(lo, m.value);
      hi = std::max(hi, m.value);
    }
    b.totals.push_back(total);
  }
  b.counts.assign(series.size(), std::vector<uint64_t>(bins, 0));
  if (hi == 0) {
    b.counts.assign(series.size(), {});
    return b;
  }
  // Widen a single-valued range so every bin has a positive width.
  if (hi / lo < 1.01) {
    lo /= 1.005;
    hi *= 1.005;
  }
  double ratio = std::log(hi / lo);
  for (int i = 0; i <= bins; ++i) b.edges.push_back(lo * std::exp(ratio * i / bins));
  for (size_t s = 0; s < masses.size(); ++s) {
    for (const Mass& m : masses[s]) {
      int bin = static_cast<int>(std::floor(std::log(m.value / lo) / ratio * bins));
      b.counts[s][std::clamp(bin, 0, bins - 1)] += m.count;
    }
  }
  return b;
}

std::string RenderHistograms(const std::vector<HistogramSeries>& series,
                             const HistogramOptions& options) {
  Binned b = BinSketches(series, options);
  bool any_zero = false;
  for (uint64_t z : b.zeros) any_zero = any_zero || z > 0;
  if (b.edges.empty() && !any_zero) return "(no samples)\n";
  int width = std::max(1, options.bar_width);
  // One scale for every series: the largest share of any bin fills the bar.
  double max_share = 0;
  auto share = [&](size_t s, uint64_t n) {
    return b.totals[s] == 0 ? 0.0 : static_cast<double>(n) / b.totals[s];
  };
  for (size_t s = 0; s < series.size(); ++s) {
    max_share = std::max(max_share, share(s, b.zeros[s]));
    for (uint64_t n : b.counts[s]) max_share = std::max(max_share, share(s, n));
  }
  std::vector<std::string> header = {"latency"};
  for (size_t s = 0; s < series.size(); ++s) {
    header.push_back(b.totals[s] == 0 ? absl::StrCat(series[s].label, " (no samples)")
                                      : absl::StrCat(series[s].label, " (n=", b.totals[s], ")"));
  }
  Table t(header);
  auto row = [&](std::string range, const std::vector<uint64_t>& per_series) {
    std::vector<std::string> cells = {std::move(range)};
    for (size_t s = 0; s < series.size(); ++s) {
      double f = share(s, per_series[s]);
      cells.push_back(absl::StrCat("│", Bar(max_share > 0 ? f / max_share : 0, width),
                                   absl::StrFormat(" %5.1f%%", 100 * f)));
    }
    t.AddRow(std::move(cells));
  };
  if (any_zero) row("0", b.zeros);
  for (size_t i = 0; i + 1 < b.edges.size(); ++i) {
    std::vector<uint64_t> per_series;
    for (size_t s = 0; s < series.size(); ++s) per_series.push_back(b.counts[s][i]);
    row(absl::StrCat(FormatSeconds(b.edges[i]), " - ", FormatSeconds(b.edges[i + 1])), per_series);
  }
  return t.Render();
}

}  // namespace rocetune::cli
