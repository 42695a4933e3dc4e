#include "sim/reaction_point.h"

#include <algorithm>
#include <limits>

namespace rocetune::sim {
namespace {
constexpr int64_t kNever = std::numeric_limits<int64_t>::max();
constexpr int64_t kUs = 1000;
}  // namespace

ReactionPoint::ReactionPoint(const RpParams& params, double line_rate_mbps)
    : p_(params),
      line_rate_(line_rate_mbps),
      rc_(line_rate_mbps),
      rt_(line_rate_mbps),
      next_alpha_ns_(kNever),
      next_decrease_ns_(kNever),
      next_increase_ns_(kNever) {
  rc_ = std::min(rc_, max_rate());
  rt_ = rc_;
}

double ReactionPoint::max_rate() const {
  return p_.rpg_max_rate_mbps > 0 ? std::min(p_.rpg_max_rate_mbps, line_rate_) : line_rate_;
}

int64_t ReactionPoint::next_event_ns() const {
  return std::min({next_alpha_ns_, next_decrease_ns_, next_increase_ns_});
}

ReactionPoint::Phase ReactionPoint::phase() const {
  if (!active_) return Phase::kLineRate;
  const int64_t f = p_.rpg_threshold;
  if (std::max(time_stage_, byte_stage_) <= f) return Phase::kFastRecovery;
  if (std::min(time_stage_, byte_stage_) > f) return Phase::kHyper;
  return Phase::kAdditive;
}

void ReactionPoint::OnCnp(int64_t now_ns) {
  AdvanceTo(now_ns);
  ++cnps_;
  if (!active_) {
    active_ = true;
    alpha_fp_ = static_cast<double>(p_.initial_alpha_value);
    if (p_.rate_to_set_on_first_cnp_mbps > 0) {
      rc_ = std::min(p_.rate_to_set_on_first_cnp_mbps, max_rate());
    }
    rt_ = rc_;
    time_stage_ = byte_stage_ = 0;
    bytes_since_reset_ = 0;
    // The initial alpha already accounts for this CNP; the cut waits for the
    // end of the first monitor period.
    alpha_cnp_ = false;
    decrease_cnp_ = true;
    next_alpha_ns_ = now_ns + p_.dce_tcp_rtt_us * kUs;
    next_decrease_ns_ = now_ns + p_.rate_reduce_monitor_period_us * kUs;
    next_increase_ns_ = kNever;
    return;
  }
  alpha_cnp_ = true;
  decrease_cnp_ = true;
}

void ReactionPoint::OnBytesSent(int64_t bytes, int64_t now_ns) {
  AdvanceTo(now_ns);
  if (!active_ || p_.rpg_byte_reset_bytes <= 0) return;
  bytes_since_reset_ += bytes;
  while (bytes_since_reset_ >= p_.rpg_byte_reset_bytes) {
    bytes_since_reset_ -= p_.rpg_byte_reset_bytes;
    ++byte_stage_;
    IncreaseEvent();
  }
}

void ReactionPoint::AdvanceTo(int64_t now_ns) {
  while (active_) {
    const int64_t next = next_event_ns();
    if (next > now_ns) break;
    if (next_alpha_ns_ == next) {
      AlphaTimer();
      next_alpha_ns_ += p_.dce_tcp_rtt_us * kUs;
    } else if (next_decrease_ns_ == next) {
      next_decrease_ns_ += p_.rate_reduce_monitor_period_us * kUs;
      DecreaseTimer(next);
    } else {
      ++time_stage_;
      IncreaseEvent();
      next_increase_ns_ += p_.rpg_time_reset_us * kUs;
    }
  }
}

void ReactionPoint::AlphaTimer() {
  const int64_t g = p_.dce_tcp_g;
  if (p_.alpha_integer_10bit) {
    int64_t a = (g * static_cast<int64_t>(alpha_fp_)) >> 10;
    if (alpha_cnp_) a += 1024 - g;
    alpha_fp_ = static_cast<double>(std::min<int64_t>(a, 1023));
  } else {
    alpha_fp_ = static_cast<double>(g) * alpha_fp_ / 1024.0;
    if (alpha_cnp_) alpha_fp_ += static_cast<double>(1024 - g);
    alpha_fp_ = std::min(alpha_fp_, 1024.0);
  }
  alpha_cnp_ = false;
}

void ReactionPoint::DecreaseTimer(int64_t at_ns) {
  if (!decrease_cnp_) return;
  decrease_cnp_ = false;
  if (p_.clamp_tgt_rate || byte_stage_ > 0 ||
      (p_.clamp_tgt_rate_after_time_inc && time_stage_ > 0)) {
    rt_ = rc_;
  }
  const double by_alpha = rc_ * alpha_fp_ / static_cast<double>(int64_t{1} << p_.rpg_gd);
  const double by_floor = rc_ * static_cast<double>(100 - p_.rpg_min_dec_fac) / 100.0;
  rc_ = std::max(p_.rpg_min_rate_mbps, rc_ - std::min(by_alpha, by_floor));
  time_stage_ = byte_stage_ = 0;
  bytes_since_reset_ = 0;
  ++cuts_;
  next_increase_ns_ = at_ns + p_.rpg_time_reset_us * kUs;
}

void ReactionPoint::IncreaseEvent() {
  const int64_t f = p_.rpg_threshold;
  const int64_t hi = std::max(time_stage_, byte_stage_);
  const int64_t lo = std::min(time_stage_, byte_stage_);
  if (hi <= f) {
    // Fast recovery: the target stays.
  } else if (lo > f) {
    rt_ = std::min(rt_ + p_.rpg_hai_rate_mbps, max_rate());
  } else {
    rt_ = std::min(rt_ + p_.rpg_ai_rate_mbps, max_rate());
  }
  rc_ = std::min((rt_ + rc_) / 2.0, max_rate());
}

void ReactionPoint::SetParams(const RpParams& params, int64_t now_ns) {
  AdvanceTo(now_ns);
  p_ = params;
  rc_ = std::min(rc_, max_rate());
  rt_ = std::min(rt_, max_rate());
  if (!active_) return;
  next_alpha_ns_ = now_ns + p_.dce_tcp_rtt_us * kUs;
  next_decrease_ns_ = now_ns + p_.rate_reduce_monitor_period_us * kUs;
  if (next_increase_ns_ != kNever) next_increase_ns_ = now_ns + p_.rpg_time_reset_us * kUs;
}

}  // namespace rocetune::sim
