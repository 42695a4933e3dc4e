#include "sim/pfc_port.h"

namespace rocetune::sim {

bool PfcPort::Step(int prio, double ingress_bytes, double xoff, const PfcPortConfig& cfg,
                   int64_t step_ns) {
  const uint8_t bit = static_cast<uint8_t>(1 << prio);
  int64_t& refresh_left = refresh_left_ns_[prio];
  if (!(paused_ & bit)) {
    if (ingress_bytes > xoff) {
      paused_ |= bit;
      refresh_left = cfg.refresh_ns;
      return true;
    }
    return false;
  }
  if (ingress_bytes <= cfg.Xon(xoff)) {
    paused_ &= static_cast<uint8_t>(~bit);
    return false;
  }
  refresh_left -= step_ns;
  if (refresh_left <= 0) {
    refresh_left += cfg.refresh_ns;
    return true;
  }
  return false;
}

}  // namespace rocetune::sim
