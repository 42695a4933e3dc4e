#ifndef ROCETUNE_AGENT_PROBE_PROBE_STACK_H_
#define ROCETUNE_AGENT_PROBE_PROBE_STACK_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "agent/probe/prober.h"
#include "agent/probe/udp_responder.h"
#include "agent/probe/verbs_endpoint.h"
#include "agent/probe/verbs_responder.h"

namespace rocetune {

// What an agent runs for latency probes: a Prober plus the responder peers probe
// it through. transport "verbs" uses RDMA UD verbs on one port; "udp" uses UDP;
// "auto" tries verbs and falls back to UDP when there is no usable RDMA port
// (logged once).
struct ProbeStackOptions {
  std::string transport = "auto";
  VerbsEndpoint::Options verbs;
  std::string udp_listen = "0.0.0.0:0";  // UDP responder address
};

struct ProbeStack {
  std::unique_ptr<Prober> prober;
  std::unique_ptr<VerbsResponder> verbs_responder;  // set for verbs
  std::unique_ptr<UdpResponder> udp_responder;      // set for udp
  // Capability to advertise in Hello: "probe.verbs" or "probe.udp".
  std::string capability;
  // Where peers reach this host's responder: "gid/qpn/qkey" (verbs) or "ip:port" (udp).
  std::string responder_address;
};

// kInvalidArgument for an unknown transport; kUnavailable when the chosen transport
// cannot start (for "verbs": no such RDMA device / port).
absl::StatusOr<ProbeStack> StartProbeStack(const ProbeStackOptions& options);

}  // namespace rocetune

#endif  // ROCETUNE_AGENT_PROBE_PROBE_STACK_H_
