#ifndef ROCETUNE_CONTROLLER_FLEET_PROBE_PLANNER_H_
#define ROCETUNE_CONTROLLER_FLEET_PROBE_PLANNER_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "rocetune/v1/agent.pb.h"

namespace rocetune::controller {

struct ProbePlannerOptions {
  double probes_per_second = 10;  // per peer
  uint32_t payload_bytes = 64;
  // DSCP 26 (the usual RoCE class) with ECT(0), so probes ride the RoCE priority
  // and see the same ECN marking as the traffic they measure.
  uint32_t traffic_class = (26 << 2) | 2;
  uint32_t timeout_ms = 100;
  // Peers per host, bounded so a fleet of N hosts costs O(N) probes, not O(N^2).
  int max_peers = 16;
  // Hosts with the same value of this label are "near" (peer class
  // "intra_<label>"), others "far" ("inter_<label>").
  std::string locality_label = "tor";
  // Hosts probe only hosts with the same value of this label (absent = ""), so
  // separate fabrics (or a simulated fabric beside real hosts) never mix.
  std::string partition_label = "fabric";
};

struct ProbeTarget {
  std::string host_id;
  std::map<std::string, std::string> labels;
  v1::ProbeEndpoint endpoint;  // hosts without any endpoint are not probed
};

// Builds every host's pinglist (R-Pingmesh style): up to max_peers peers, half
// from the host's own locality group and half from others when both exist,
// picked by rotation through the sorted host list so every host is probed by
// about as many peers as it probes. Deterministic for a given input. Each plan's
// version is a content hash, so an unchanged plan keeps its version across
// recomputations and reconnects. A host that has a verbs endpoint is probed
// over verbs (gid/qpn/qkey) and otherwise over UDP.
std::map<std::string, v1::ProbePlan> PlanProbes(const std::vector<ProbeTarget>& hosts,
                                                const ProbePlannerOptions& options);

}  // namespace rocetune::controller

#endif  // ROCETUNE_CONTROLLER_FLEET_PROBE_PLANNER_H_
