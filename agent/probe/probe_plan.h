#ifndef ROCETUNE_AGENT_PROBE_PROBE_PLAN_H_
#define ROCETUNE_AGENT_PROBE_PROBE_PLAN_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "rocetune/v1/agent.pb.h"

namespace rocetune {

// Limits and defaults shared by every Prober. A plan field left at 0 takes the default.
struct ProbePlanLimits {
  static constexpr double kMaxProbesPerSecond = 10000;
  static constexpr uint32_t kDefaultPayloadBytes = 64;
  static constexpr uint32_t kDefaultTimeoutMs = 1000;
  static constexpr uint32_t kMaxTimeoutMs = 60000;
  static constexpr int kMaxPeers = 4096;
};

// Checks the transport-independent parts of a plan: rate in (0, kMaxProbesPerSecond]
// (0 only with no peers), payload 0 or within [ProbePacket::kHeaderBytes, max_payload],
// traffic_class <= 255, timeout_ms <= kMaxTimeoutMs, every peer has a peer_class.
// kInvalidArgument naming the field (and peer index) otherwise.
absl::Status ValidateProbePlanCommon(const v1::ProbePlan& plan, uint32_t max_payload);

uint32_t PlanPayloadBytes(const v1::ProbePlan& plan);
absl::Duration PlanTimeout(const v1::ProbePlan& plan);

}  // namespace rocetune

#endif  // ROCETUNE_AGENT_PROBE_PROBE_PLAN_H_
