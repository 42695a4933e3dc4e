#ifndef ROCETUNE_AGENT_SWITCH_SWITCH_DISCOVERY_H_
#define ROCETUNE_AGENT_SWITCH_SWITCH_DISCOVERY_H_

#include <vector>

#include "absl/status/statusor.h"
#include "agent/host/nic_discovery.h"
#include "agent/switch/switch_inventory.h"

namespace rocetune {

// Switch seam: what a switch holds (ports, queues, WRED/ECN profiles, PFC and
// its watchdog). Real implementation: SonicDiscovery (SONiC's Redis); the
// simulator's switches provide their own. As a NicDiscovery it reports the
// switch as one device (SwitchNicDevice), so the agent's Hello carries it.
class SwitchDiscovery : public NicDiscovery {
 public:
  virtual absl::StatusOr<SwitchInventory> DiscoverSwitch() = 0;

  absl::StatusOr<std::vector<v1::NicDevice>> Discover() override {
    absl::StatusOr<SwitchInventory> inv = DiscoverSwitch();
    if (!inv.ok()) return inv.status();
    return std::vector<v1::NicDevice>{SwitchNicDevice(*inv)};
  }
};

}  // namespace rocetune

#endif  // ROCETUNE_AGENT_SWITCH_SWITCH_DISCOVERY_H_
