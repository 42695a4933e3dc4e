#ifndef ROCETUNE_AGENT_PROBE_PROBER_H_
#define ROCETUNE_AGENT_PROBE_PROBER_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "rocetune/v1/agent.pb.h"

namespace rocetune {

// Hardware seam: latency probes to a pinglist. Real implementations: RDMA UD
// verbs with completion timestamps, and UDP; the simulator provides its own.
class Prober {
 public:
  virtual ~Prober() = default;
  // "verbs", "udp", "sim".
  virtual std::string kind() const = 0;
  // Replaces the pinglist. kInvalidArgument for a malformed plan (nothing changes).
  virtual absl::Status SetPlan(const v1::ProbePlan& plan) = 0;
  // Results since the previous call, one entry per peer class: mergeable
  // sketches of network RTT and responder host delay, sent and lost counts.
  virtual std::vector<v1::LatencyWindow> TakeWindow() = 0;
};

}  // namespace rocetune

#endif  // ROCETUNE_AGENT_PROBE_PROBER_H_
