#ifndef ROCETUNE_TESTS_AGENT_SWITCH_SONIC_SEED_H_
#define ROCETUNE_TESTS_AGENT_SWITCH_SONIC_SEED_H_

#include <string>

#include "absl/status/status.h"

namespace rocetune::testing {

struct SonicSeedOptions {
  int ports = 32;  // Ethernet0, Ethernet4, ... Ethernet<4*(ports-1)>
  // Ports whose oper status is "down" (every one in `down_every`, 0 = none).
  int down_every = 8;
  int64_t egress_pool_bytes = 12766208;
};

// OIDs the seed uses (made up, in SONiC's text form).
std::string SeedPortOid(int port_index);              // port i = Ethernet<4i>
std::string SeedQueueOid(int port_index, int queue);  // unicast queues 0..7

// Writes a SONiC-shaped switch into the Redis at `endpoint`: CONFIG_DB (4)
// PORT, PORT_QOS_MAP (pfc_enable 3,4), QUEUE (3-4 -> AZURE_LOSSLESS, 0-2
// scheduler only), WRED_PROFILE AZURE_LOSSLESS and ROCE_TUNED, PFC_WD, BUFFER_POOL,
// FLEX_COUNTER_TABLE, DEVICE_METADATA; COUNTERS_DB (2) name maps (8 unicast +
// 2 multicast queues per port) and COUNTERS:oid hashes; STATE_DB (6) port
// table and the ECN counter capability; APPL_DB (0) oper status. Counter
// values derive from (port, queue, priority) so tests can predict them.
absl::Status SeedSonic(const std::string& endpoint, const SonicSeedOptions& options = {});

// The value the seed gives a port's PFC rx counter on priority p.
uint64_t SeedPfcRx(int port_index, int priority);

}  // namespace rocetune::testing

#endif  // ROCETUNE_TESTS_AGENT_SWITCH_SONIC_SEED_H_
