#include "sim/flow_size_cdf.h"

#include <algorithm>

namespace rocetune::sim {

FlowSizeCdf::FlowSizeCdf(std::vector<std::pair<double, double>> points)
    : points_(std::move(points)) {}

FlowSizeCdf FlowSizeCdf::For(v1::FlowSizeDistribution distribution) {
  if (distribution == v1::FB_HADOOP) {
    return FlowSizeCdf({{0, 0},       {100, .01},   {200, .02},  {300, .05},  {350, .15},
                        {400, .20},   {500, .30},   {600, .40},  {700, .50},  {1e3, .60},
                        {2e3, .67},   {7e3, .70},   {30e3, .72}, {50e3, .82}, {80e3, .87},
                        {120e3, .90}, {300e3, .95}, {1e6, .975}, {2e6, .99},  {10e6, 1.0}});
  }
  return FlowSizeCdf({{0, 0},
                      {10e3, .15},
                      {20e3, .20},
                      {30e3, .30},
                      {50e3, .40},
                      {80e3, .53},
                      {200e3, .60},
                      {1e6, .70},
                      {2e6, .80},
                      {5e6, .90},
                      {10e6, .97},
                      {30e6, 1.0}});
}

double FlowSizeCdf::Sample(std::mt19937_64& rng) const {
  const double u = std::uniform_real_distribution<double>(0.0, 1.0)(rng);
  auto it =
      std::lower_bound(points_.begin(), points_.end(), u,
                       [](const std::pair<double, double>& p, double v) { return p.second < v; });
  if (it == points_.begin()) return std::max(1.0, it->first);
  if (it == points_.end()) return points_.back().first;
  const auto& hi = *it;
  const auto& lo = *(it - 1);
  const double f = hi.second > lo.second ? (u - lo.second) / (hi.second - lo.second) : 1.0;
  return std::max(1.0, lo.first + f * (hi.first - lo.first));
}

double FlowSizeCdf::MeanBytes() const {
  double mean = 0;
  for (size_t i = 1; i < points_.size(); ++i) {
    mean += (points_[i].second - points_[i - 1].second) *
            (points_[i].first + points_[i - 1].first) / 2.0;
  }
  return mean;
}

}  // namespace rocetune::sim
