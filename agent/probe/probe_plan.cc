#include "agent/probe/probe_plan.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "agent/probe/probe_packet.h"

namespace rocetune {

absl::Status ValidateProbePlanCommon(const v1::ProbePlan& plan, uint32_t max_payload) {
  if (plan.peers_size() > ProbePlanLimits::kMaxPeers) {
    return absl::InvalidArgumentError(absl::StrCat("probe plan has ", plan.peers_size(),
                                                   " peers, at most ", ProbePlanLimits::kMaxPeers,
                                                   " allowed"));
  }
  const double rate = plan.probes_per_second();
  if (!std::isfinite(rate) || rate < 0 || rate > ProbePlanLimits::kMaxProbesPerSecond ||
      (rate == 0 && plan.peers_size() > 0)) {
    return absl::InvalidArgumentError(absl::StrCat("probe plan probes_per_second=", rate,
                                                   " must be in (0, ",
                                                   ProbePlanLimits::kMaxProbesPerSecond, "]"));
  }
  if (plan.payload_bytes() != 0 &&
      (plan.payload_bytes() < ProbePacket::kHeaderBytes || plan.payload_bytes() > max_payload)) {
    return absl::InvalidArgumentError(
        absl::StrCat("probe plan payload_bytes=", plan.payload_bytes(), " must be in [",
                     ProbePacket::kHeaderBytes, ", ", max_payload, "]"));
  }
  if (plan.traffic_class() > 255) {
    return absl::InvalidArgumentError(
        absl::StrCat("probe plan traffic_class=", plan.traffic_class(), " must be <= 255"));
  }
  if (plan.timeout_ms() > ProbePlanLimits::kMaxTimeoutMs) {
    return absl::InvalidArgumentError(absl::StrCat("probe plan timeout_ms=", plan.timeout_ms(),
                                                   " must be <= ", ProbePlanLimits::kMaxTimeoutMs));
  }
  for (int i = 0; i < plan.peers_size(); ++i) {
    if (plan.peers(i).peer_class().empty()) {
      return absl::InvalidArgumentError(absl::StrCat("probe plan peers[", i, "] (host_id \"",
                                                     plan.peers(i).host_id(),
                                                     "\") has an empty peer_class"));
    }
  }
  return absl::OkStatus();
}

uint32_t PlanPayloadBytes(const v1::ProbePlan& plan) {
  return plan.payload_bytes() == 0 ? ProbePlanLimits::kDefaultPayloadBytes : plan.payload_bytes();
}

absl::Duration PlanTimeout(const v1::ProbePlan& plan) {
  return absl::Milliseconds(plan.timeout_ms() == 0 ? ProbePlanLimits::kDefaultTimeoutMs
                                                   : plan.timeout_ms());
}

}  // namespace rocetune
