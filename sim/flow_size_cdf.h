#ifndef ROCETUNE_SIM_FLOW_SIZE_CDF_H_
#define ROCETUNE_SIM_FLOW_SIZE_CDF_H_

#include <random>
#include <utility>
#include <vector>

#include "rocetune/v1/scenario.pb.h"

namespace rocetune::sim {

// A piecewise-linear flow-size CDF (points of (bytes, cumulative fraction)),
// sampled by inverse transform. The built-in tables are the WebSearch and
// FB_Hadoop distributions of the HPCC traffic generator (docs/dcqcn-model.md section 6).
class FlowSizeCdf {
 public:
  // REQUIRES: points sorted by both coordinates, first fraction 0, last 1.
  explicit FlowSizeCdf(std::vector<std::pair<double, double>> points);
  static FlowSizeCdf For(v1::FlowSizeDistribution distribution);

  // A flow size in bytes, at least 1.
  double Sample(std::mt19937_64& rng) const;
  double MeanBytes() const;

 private:
  std::vector<std::pair<double, double>> points_;
};

}  // namespace rocetune::sim

#endif  // ROCETUNE_SIM_FLOW_SIZE_CDF_H_
