#ifndef ROCETUNE_SIM_ECN_MARKER_H_
#define ROCETUNE_SIM_ECN_MARKER_H_

#include "rocetune/v1/scenario.pb.h"

namespace rocetune::sim {

// RED/ECN marking of one switch egress queue: the probability that a packet
// leaving the queue is marked, given the bytes left behind it.
//   queue <= kmin         -> 0
//   kmin < queue <= kmax  -> pmax * (queue - kmin) / (kmax - kmin)
//   queue > kmax          -> 1
// A disabled marker never marks. The caller validates the settings
// (0 <= pmax <= 1, kmin <= kmax); with kmin == kmax the ramp is a step.
class EcnMarker {
 public:
  EcnMarker() = default;  // disabled
  EcnMarker(double kmin_bytes, double kmax_bytes, double pmax)
      : enabled_(true), kmin_(kmin_bytes), kmax_(kmax_bytes), pmax_(pmax) {}
  static EcnMarker FromSettings(const v1::EcnSettings& ecn);

  double Probability(double queue_bytes) const {
    if (!enabled_) return 0;
    if (queue_bytes <= kmin_) return 0;
    if (queue_bytes > kmax_) return 1;
    return pmax_ * (queue_bytes - kmin_) / (kmax_ - kmin_);
  }

  bool enabled() const { return enabled_; }
  double kmin_bytes() const { return kmin_; }
  double kmax_bytes() const { return kmax_; }
  double pmax() const { return pmax_; }

 private:
  bool enabled_ = false;
  double kmin_ = 0, kmax_ = 0, pmax_ = 0;
};

}  // namespace rocetune::sim

#endif  // ROCETUNE_SIM_ECN_MARKER_H_
