#ifndef ROCETUNE_SIM_SUMMARY_H_
#define ROCETUNE_SIM_SUMMARY_H_

#include <cstdint>
#include <string>
#include <vector>

namespace rocetune::sim {

// What rocetune-fabricsim --output=json prints. Occupancies in bytes, times in
// microseconds, rates in Gb/s. Every figure covers one measurement window,
// [warmup, duration): rates, queues and counters count what happened in it;
// distributions (probe RTTs, FCTs, bursts, all-reduce steps) count what
// started in it; cnp_handled counts the CNPs of cnp_sent that reached their
// sender (equal unless some are still in flight at the end).
struct SimSummary {
  struct Queue {
    std::string name;  // "<switch>-><next hop>"
    int priority = 0;
    double mean_bytes = 0;
    double p99_bytes = 0;
    double max_bytes = 0;
  };
  struct Link {
    std::string name;
    double utilization = 0;
    uint64_t pause_frames = 0;  // PAUSE frames that stopped this link's transmitter
    double paused_us = 0;
  };
  struct Flow {
    uint64_t id = 0;
    std::string src, dst, tag;
    double bytes = 0;            // size; 0 = long-lived
    double throughput_gbps = 0;  // delivered in the measured window / window
    double fct_us = -1;          // -1 = unfinished
    double slowdown = 0;
  };
  struct FctBin {
    std::string label;
    uint64_t count = 0;
    double p50 = 0, p95 = 0, p99 = 0;
  };
  struct Distribution {
    uint64_t count = 0;
    double mean = 0, p50 = 0, p99 = 0, p999 = 0, max = 0;
  };

  std::string scenario;
  uint64_t seed = 0;
  double sim_seconds = 0;
  double measured_seconds = 0;
  double wall_seconds = 0;
  uint64_t steps = 0;
  uint64_t events = 0;
  std::vector<Queue> queues;  // queues that held at least one byte
  std::vector<Link> links;
  std::vector<Flow> flows;    // the scenario's long flows
  double jain_index = 0;      // over `flows` throughputs (1 when fewer than 2)
  double delivered_gbps = 0;  // all flows, measured window
  std::vector<FctBin> fct_slowdown;
  Distribution probe_rtt_us;  // quantiles within 0.5 %
  // The probes between two hosts of one ToR (the controller's "intra_tor"
  // peer class): they cross only their own ToR's queues.
  Distribution probe_rtt_intra_tor_us;
  Distribution incast_burst_us;  // first byte sent to last byte acked, per burst
  Distribution allreduce_step_us;
  uint64_t flows_started = 0;    // in the window
  uint64_t flows_completed = 0;  // in the window, whenever they started
  uint64_t cnp_sent = 0;
  uint64_t cnp_handled = 0;
  uint64_t ecn_marked_packets = 0;
  uint64_t pfc_pause_frames = 0;  // sent by every switch
  double pfc_paused_us = 0;       // summed over (link, priority)
  uint64_t host_rx_pause_frames = 0;
  double host_rx_paused_us = 0;
  double dropped_bytes = 0;

  std::string ToJson() const;
};

}  // namespace rocetune::sim

#endif  // ROCETUNE_SIM_SUMMARY_H_
