#ifndef ROCETUNE_SIM_PFC_PORT_H_
#define ROCETUNE_SIM_PFC_PORT_H_

#include <algorithm>
#include <array>
#include <cstdint>

namespace rocetune::sim {

// Resolved PFC settings of the switches (every switch uses the same ones).
struct PfcPortConfig {
  // > 0: a fixed XOFF in bytes; otherwise XOFF is dynamic_alpha times the free
  // shared buffer of the switch.
  double xoff_static_bytes = 0;
  double dynamic_alpha = 0.125;
  // A paused ingress resumes once it holds at most XOFF minus this.
  double xon_hysteresis_bytes = 0;
  // Bytes an ingress may take above XOFF (in flight when the pause takes
  // effect) before arrivals are dropped.
  double headroom_bytes = 0;
  // Interval at which a PAUSE is re-sent while the ingress stays paused (> 0).
  int64_t refresh_ns = 1;

  // XOFF of one ingress (port, priority) of a switch with `buffer_bytes` of
  // shared buffer of which `occupied_bytes` are in use.
  double Xoff(double buffer_bytes, double occupied_bytes) const {
    if (xoff_static_bytes > 0) return xoff_static_bytes;
    return dynamic_alpha * std::max(0.0, buffer_bytes - occupied_bytes);
  }
  double Xon(double xoff) const { return std::max(0.0, xoff - xon_hysteresis_bytes); }
  // Most bytes the ingress may hold; arrivals beyond it are dropped.
  double AdmitLimit(double xoff) const { return xoff + headroom_bytes; }
};

// The PFC state machine of the ingress side of one switch port, per priority:
// whether the upstream transmitter is paused, and when the next refresh PAUSE
// is due. Priorities are 0..7.
class PfcPort {
 public:
  // Bit p set: the transmitter upstream of this port may not send priority p.
  uint8_t paused_mask() const { return paused_; }
  bool paused(int prio) const { return (paused_ >> prio & 1) != 0; }

  // Advances priority `prio` by one step of `step_ns`, given the bytes this
  // port has buffered on that priority and the current XOFF:
  //  - not paused: pauses when ingress_bytes > xoff (a PAUSE frame goes out);
  //  - paused: resumes when ingress_bytes <= cfg.Xon(xoff); otherwise re-sends
  //    the PAUSE every cfg.refresh_ns.
  // Returns true when a PAUSE frame goes out in this step.
  bool Step(int prio, double ingress_bytes, double xoff, const PfcPortConfig& cfg, int64_t step_ns);
  // Ends the pauses of the priorities not in `keep` (PFC turned off on them).
  void ResumeAllBut(uint8_t keep) {
    paused_ &= keep;
    for (int p = 0; p < 8; ++p) {
      if (!(keep >> p & 1)) refresh_left_ns_[p] = 0;
    }
  }

 private:
  uint8_t paused_ = 0;
  std::array<int64_t, 8> refresh_left_ns_{};
};

}  // namespace rocetune::sim

#endif  // ROCETUNE_SIM_PFC_PORT_H_
