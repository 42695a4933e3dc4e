#ifndef ROCETUNE_CONTROLLER_ROLLOUT_ROLLOUT_UTIL_H_
#define ROCETUNE_CONTROLLER_ROLLOUT_ROLLOUT_UTIL_H_

#include <algorithm>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/cord.h"
#include "absl/strings/numbers.h"
#include "absl/time/time.h"
#include "rocetune/v1/admin.pb.h"
#include "rocetune/v1/policy.pb.h"

// Small helpers shared by the rollout manager's files (rollout_manager.cc,
// rollout_manager_campaigns.cc).
namespace rocetune::controller::rollout_util {

// A refusal that may clear by itself: the job signal or the probes below the
// rate a baseline or bake needs (as while a training job checkpoints). The
// status keeps its code and message for an operator's proposal; a campaign
// waits and tries its trial again (RolloutOptions::campaign_trial_wait).
inline constexpr char kRetryLaterPayload[] = "rocetune/retry-later";
inline absl::Status RetryLater(absl::Status s) {
  s.SetPayload(kRetryLaterPayload, absl::Cord("1"));
  return s;
}
inline bool IsRetryLater(const absl::Status& s) {
  return s.GetPayload(kRetryLaterPayload).has_value();
}

inline bool IsActiveState(v1::ChangeState s) {
  return s == v1::PROPOSED || s == v1::APPROVED || s == v1::CANARY || s == v1::STAGE;
}

inline bool InFlight(v1::ChangeState s) { return s == v1::CANARY || s == v1::STAGE; }

inline int64_t IdNumber(const std::string& id) {
  int64_t n = 0;
  const size_t dash = id.find('-');
  if (dash == std::string::npos || !absl::SimpleAtoi(id.substr(dash + 1), &n)) return 0;
  return n;
}

inline std::string StateName(v1::ChangeState s) { return v1::ChangeState_Name(s); }

inline absl::Duration Secs(uint32_t s) { return absl::Seconds(static_cast<int64_t>(s)); }

inline uint32_t LooksOf(const v1::Policy& p) { return std::max<uint32_t>(1, p.rollout().looks()); }

// Number of stages after the canary (the plan's stages, ending at 1.0).
inline uint32_t StageCount(const v1::Policy& p) {
  const auto& st = p.rollout().stages();
  if (st.empty() || st[st.size() - 1] < 1.0) return static_cast<uint32_t>(st.size() + 1);
  return static_cast<uint32_t>(st.size());
}

// Whether `h` runs the change during `stage` (0 = the canary step).
inline bool RunsChangeAt(const v1::HostTarget& h, uint32_t stage) {
  return h.role() == v1::HostTarget::CANARY || (h.stage() != 0 && h.stage() <= stage);
}

}  // namespace rocetune::controller::rollout_util

#endif  // ROCETUNE_CONTROLLER_ROLLOUT_ROLLOUT_UTIL_H_
