#ifndef ROCETUNE_SIM_SIM_SWITCH_H_
#define ROCETUNE_SIM_SIM_SWITCH_H_

#include <memory>
#include <string>

#include "agent/agent.h"
#include "agent/host/counter_source.h"
#include "agent/switch/switch_applier.h"
#include "agent/switch/switch_discovery.h"
#include "agent/switch/switch_qos_store.h"
#include "sim/fabric.h"

namespace rocetune::sim {

// One simulated ToR as a switch agent sees it, behind the same seams as a
// SONiC switch (agent/switch/): discovery, counters and a SwitchQosStore that
// SwitchApplier writes through. Thread-safe like SimHost: every view goes
// through the Fabric's host-facing API; writes take effect at the fabric's
// next synchronisation point.
//
// What the switch holds: ports "Ethernet0", "Ethernet4", ... (hosts below,
// then one uplink per spine), eight queues per port, every queue bound to the
// one WRED/ECN profile kProfile (the simulator marks every egress queue of a
// switch alike), whose green_min_threshold / green_max_threshold (bytes) and
// green_drop_probability (percent) are the ToR's Kmin, Kmax and Pmax x 100;
// with PFC on in the scenario, each port's pfc_enable (the priorities on which
// it pauses its peer). The buffer limit is the scenario's switch buffer.
//
// Counters (device = port): per queue (key port = queue) queue_packets,
// queue_bytes, queue_dropped_packets, queue_dropped_bytes,
// queue_ecn_marked_packets and the level (CounterKind::kLevel)
// queue_occupancy_bytes; per priority
// rx_pfc_pause_frames and tx_pfc_pause_frames.
class SimSwitch {
 public:
  static constexpr char kProfile[] = "AZURE_LOSSLESS";

  // REQUIRES: `fabric` outlives this object; 0 <= tor < fabric->tor_count().
  SimSwitch(Fabric* fabric, int tor);
  ~SimSwitch();

  // "sim-tor<N>".
  const std::string& host_id() const { return host_id_; }
  SwitchDiscovery* discovery() { return discovery_.get(); }
  CounterSource* counters() { return counters_.get(); }
  SwitchQosStore* store() { return store_.get(); }
  SwitchApplier* applier() { return applier_.get(); }
  // Agent seams: discovery, counters, applier, real clock, capability "switch.sim"
  // (rocetune-fabricsim replaces the clock with its SimClock).
  HostSeams seams();

 private:
  class Discovery;
  class Counters;
  class Store;

  std::string host_id_;
  std::unique_ptr<SwitchDiscovery> discovery_;
  std::unique_ptr<CounterSource> counters_;
  std::unique_ptr<SwitchQosStore> store_;
  std::unique_ptr<SwitchApplier> applier_;
};

}  // namespace rocetune::sim

#endif  // ROCETUNE_SIM_SIM_SWITCH_H_
