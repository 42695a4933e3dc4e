#ifndef ROCETUNE_AGENT_SWITCH_SONIC_DISCOVERY_H_
#define ROCETUNE_AGENT_SWITCH_SONIC_DISCOVERY_H_

#include "agent/switch/redis_client.h"
#include "agent/switch/switch_discovery.h"

namespace rocetune {

// SwitchDiscovery over SONiC's Redis: CONFIG_DB PORT, PORT_QOS_MAP, QUEUE,
// WRED_PROFILE, PFC_WD, BUFFER_POOL and DEVICE_METADATA|localhost; oper status
// from APPL_DB PORT_TABLE:<port> (STATE_DB PORT_TABLE|<port> when APPL_DB has
// none); STATE_DB QUEUE_COUNTER_CAPABILITIES for ECN-marked counter support.
// Keys are found with SCAN, hashes read in one pipeline per database. QUEUE
// keys with port lists and queue ranges ("Ethernet0,Ethernet4|3-4") are expanded.
class SonicDiscovery : public SwitchDiscovery {
 public:
  // Clients for CONFIG_DB (4), STATE_DB (6) and APPL_DB (0); not owned. `appl`
  // and `state` may be null (oper status then unknown).
  SonicDiscovery(RedisClient* config, RedisClient* state, RedisClient* appl);

  absl::StatusOr<SwitchInventory> DiscoverSwitch() override;

 private:
  RedisClient* config_;
  RedisClient* state_;
  RedisClient* appl_;
};

}  // namespace rocetune

#endif  // ROCETUNE_AGENT_SWITCH_SONIC_DISCOVERY_H_
