// Insert and merge cost of QuantileSketch, against baselines measured in the
// same run: keeping raw samples (vector push_back) and merging raw samples
// (vector concatenation), which is what an exact p99 would need.
#include <algorithm>
#include <cstdio>
#include <random>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "model/quantile_sketch.h"

namespace {

template <typename F>
double NanosPerOp(int64_t ops, F&& f) {
  absl::Time start = absl::Now();
  f();
  return absl::ToDoubleNanoseconds(absl::Now() - start) / static_cast<double>(ops);
}

}  // namespace

int main() {
  constexpr int64_t kValues = 2'000'000;
  std::mt19937_64 rng(1);
  std::lognormal_distribution<double> d(std::log(20e-6), 1.0);
  std::vector<double> values(kValues);
  for (auto& v : values) v = d(rng);

  // Baseline: raw samples into a vector.
  std::vector<double> raw;
  double base_insert = NanosPerOp(kValues, [&] {
    raw.reserve(kValues);
    for (double v : values) raw.push_back(v);
  });
  rocetune::QuantileSketch sketch;
  double sketch_insert = NanosPerOp(kValues, [&] {
    for (double v : values) sketch.Insert(v);
  });

  // Merge: 1000 per-host window sketches of 1000 samples each into one group sketch.
  constexpr int kParts = 1000;
  std::vector<rocetune::QuantileSketch> parts(kParts);
  std::vector<std::vector<double>> raw_parts(kParts);
  for (int i = 0; i < kParts; ++i) {
    for (int j = 0; j < 1000; ++j) {
      double v = values[(static_cast<size_t>(i) * 1000 + j) % kValues];
      parts[i].Insert(v);
      raw_parts[i].push_back(v);
    }
  }
  std::vector<double> merged_raw;
  double base_merge = NanosPerOp(kParts, [&] {
    for (const auto& p : raw_parts) merged_raw.insert(merged_raw.end(), p.begin(), p.end());
  });
  rocetune::QuantileSketch merged;
  double sketch_merge = NanosPerOp(kParts, [&] {
    for (const auto& p : parts) (void)merged.Merge(p);
  });
  // Exact p99 over raw samples costs a selection; the sketch answers from buckets.
  double base_p99 = NanosPerOp(1, [&] {
    std::nth_element(merged_raw.begin(), merged_raw.begin() + merged_raw.size() * 99 / 100,
                     merged_raw.end());
  });
  volatile double sink = 0;
  double sketch_p99 = NanosPerOp(1000, [&] {
    for (int i = 0; i < 1000; ++i) sink = sink + merged.Quantile(0.99);
  });

  std::printf("BENCH sketch_bench insert_ns=%.1f baseline_vector_push_ns=%.1f insert_ratio=%.2f\n",
              sketch_insert, base_insert, sketch_insert / base_insert);
  std::printf(
      "BENCH sketch_bench merge_ns_per_1k_sample_sketch=%.0f baseline_raw_concat_ns=%.0f "
      "merge_ratio=%.3f\n",
      sketch_merge, base_merge, sketch_merge / base_merge);
  std::printf("BENCH sketch_bench p99_ns=%.0f baseline_exact_p99_ns=%.0f p99_ratio=%.5f\n",
              sketch_p99, base_p99, sketch_p99 / base_p99);
  std::printf("BENCH sketch_bench sketch_bytes=%zu raw_bytes=%zu memory_ratio=%.5f\n",
              merged.MemoryBytes(), merged_raw.capacity() * sizeof(double),
              static_cast<double>(merged.MemoryBytes()) /
                  static_cast<double>(merged_raw.capacity() * sizeof(double)));
  return 0;
}
