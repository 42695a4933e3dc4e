#ifndef ROCETUNE_SIM_REACTION_POINT_H_
#define ROCETUNE_SIM_REACTION_POINT_H_

#include <cstdint>

namespace rocetune::sim {

// DCQCN reaction-point parameters in mlx5 firmware names and units
// (docs/dcqcn-model.md section 3). Defaults are the ConnectX-5 firmware defaults.
struct RpParams {
  bool clamp_tgt_rate = false;
  bool clamp_tgt_rate_after_time_inc = true;
  int64_t rpg_time_reset_us = 300;
  int64_t rpg_byte_reset_bytes = 32767 * 64;  // 0 disables the byte counter
  int64_t rpg_threshold = 1;                  // F
  double rpg_max_rate_mbps = 0;               // 0 = line rate
  double rpg_ai_rate_mbps = 5;
  double rpg_hai_rate_mbps = 50;
  int64_t rpg_gd = 11;
  int64_t rpg_min_dec_fac = 50;  // percent
  double rpg_min_rate_mbps = 1;
  double rate_to_set_on_first_cnp_mbps = 0;  // 0 = keep the current rate
  int64_t dce_tcp_g = 1019;                  // 1/1024 fixed point
  int64_t dce_tcp_rtt_us = 1;
  int64_t rate_reduce_monitor_period_us = 4;
  int64_t initial_alpha_value = 1023;  // 1/1024 fixed point
  // How alpha is kept between updates. false (default): exactly (a double in
  // units of 1/1024), so its fixed point is the DCQCN fluid model's. true: as a
  // 10-bit integer rounded down on every update, (G * alpha) >> 10. The
  // firmware's parameters are 10-bit fixed point, but its internal precision
  // for alpha is not documented; with G near 1024 the integer form moves alpha
  // by a constant step per period whatever its value (see sim/README.md).
  bool alpha_integer_10bit = false;
};

// The DCQCN reaction point of one flow as the mlx5 firmware runs it:
//  - Until the first CNP the flow sends at line rate and no timer runs. The first
//    CNP allocates the rate limiter: alpha = initial_alpha_value, R_T = R_C =
//    rate_to_set_on_first_cnp (or the current rate), and starts the alpha timer
//    (dce_tcp_rtt) and the rate-decrease timer (rate_reduce_monitor_period).
//  - Alpha timer, each period: alpha = G * alpha / 1024 + (1024 - G) if a CNP
//    arrived in the period, else alpha = G * alpha / 1024 (alpha in 1/1024;
//    rounded down to an integer when alpha_integer_10bit), at most 1024
//    (1023 in integer mode).
//  - Rate-decrease timer, each period in which a CNP arrived: clamp the target
//    (R_T = R_C if clamp_tgt_rate, or a byte-counter stage is > 0, or
//    clamp_tgt_rate_after_time_inc and a timer stage is > 0), then
//    R_C -= min(R_C * alpha >> rpg_gd, R_C * (100 - rpg_min_dec_fac) / 100),
//    floor rpg_min_rate; both stages and the byte counter reset; the increase
//    timer restarts. Alpha is updated before the cut when both fall due at once.
//  - Increase events: the timer (every rpg_time_reset) and the byte counter
//    (every rpg_byte_reset bytes sent) each advance their own stage, then:
//    fast recovery while max(stages) <= F: R_C = (R_T + R_C) / 2;
//    hyper increase when min(stages) > F: R_T += rpg_hai_rate, R_C = (R_T + R_C) / 2;
//    additive increase otherwise: R_T += rpg_ai_rate, R_C = (R_T + R_C) / 2.
//    A disabled byte counter stays at stage 0 (so there is no hyper increase).
//    R_T is capped at rpg_max_rate (or line rate).
// Time is in integer nanoseconds; rates in Mb/s. Not thread-safe.
class ReactionPoint {
 public:
  enum class Phase { kLineRate, kFastRecovery, kAdditive, kHyper };

  // REQUIRES: line_rate_mbps > 0, params within the firmware ranges.
  ReactionPoint(const RpParams& params, double line_rate_mbps);

  // A CNP arrives at `now_ns`. Runs due timers first.
  void OnCnp(int64_t now_ns);
  // `bytes` were sent by `now_ns` (feeds the byte counter). Runs due timers first.
  void OnBytesSent(int64_t bytes, int64_t now_ns);
  // Runs every timer expiry at or before `now_ns`, in time order (alpha, then
  // decrease, then increase at equal times).
  void AdvanceTo(int64_t now_ns);
  // New parameters take effect at the next timer expiry; periods restart at `now_ns`.
  void SetParams(const RpParams& params, int64_t now_ns);

  double rate_mbps() const { return rc_; }
  double target_mbps() const { return rt_; }
  double alpha() const { return alpha_fp_ / 1024.0; }
  // Alpha in units of 1/1024 (a whole number when alpha_integer_10bit).
  double alpha_fp() const { return alpha_fp_; }
  bool limiter_active() const { return active_; }
  int64_t time_stage() const { return time_stage_; }
  int64_t byte_stage() const { return byte_stage_; }
  Phase phase() const;
  uint64_t cnps() const { return cnps_; }
  uint64_t cuts() const { return cuts_; }
  // Earliest pending timer expiry (INT64_MAX when none runs).
  int64_t next_event_ns() const;

 private:
  double max_rate() const;
  void AlphaTimer();
  void DecreaseTimer(int64_t at_ns);
  void IncreaseEvent();

  RpParams p_;
  double line_rate_;
  double rc_;
  double rt_;
  double alpha_fp_ = 1023;
  bool active_ = false;
  bool alpha_cnp_ = false;
  bool decrease_cnp_ = false;
  int64_t time_stage_ = 0;
  int64_t byte_stage_ = 0;
  int64_t bytes_since_reset_ = 0;
  int64_t next_alpha_ns_;
  int64_t next_decrease_ns_;
  int64_t next_increase_ns_;
  uint64_t cnps_ = 0;
  uint64_t cuts_ = 0;
};

}  // namespace rocetune::sim

#endif  // ROCETUNE_SIM_REACTION_POINT_H_
