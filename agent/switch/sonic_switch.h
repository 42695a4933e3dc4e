#ifndef ROCETUNE_AGENT_SWITCH_SONIC_SWITCH_H_
#define ROCETUNE_AGENT_SWITCH_SONIC_SWITCH_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "agent/agent.h"
#include "agent/switch/redis_client.h"
#include "agent/switch/sonic_counter_source.h"
#include "agent/switch/sonic_discovery.h"
#include "agent/switch/sonic_qos_store.h"
#include "agent/switch/switch_applier.h"

namespace rocetune {

// SONiC database numbers (fixed on single-ASIC switches; see docs/sonic.md).
inline constexpr int kSonicApplDb = 0;
inline constexpr int kSonicCountersDb = 2;
inline constexpr int kSonicConfigDb = 4;
inline constexpr int kSonicStateDb = 6;

struct SonicSwitchOptions {
  std::string redis;  // "unix:PATH" or "HOST:PORT"
  RedisClientOptions client;
  SonicCounterSourceOptions counters;
  SwitchApplierOptions applier;
};

// The seams of a SONiC switch, the switch counterpart of RealHost: discovery,
// counters and the WRED/ECN + PFC applier over SONiC's Redis, one connection
// per database and user (the applier's CONFIG_DB connection carries its WATCH
// and is used by nothing else).
class SonicSwitch {
 public:
  // Fails only on a malformed endpoint: Redis is reached lazily (and again
  // after failures, with backoff).
  static absl::StatusOr<std::unique_ptr<SonicSwitch>> Create(const SonicSwitchOptions& options);

  // Agent seams: discovery, counters, applier, real clock, capability "switch.sonic".
  HostSeams seams();
  SonicDiscovery* discovery() { return discovery_.get(); }
  SonicCounterSource* counters() { return counters_.get(); }
  SwitchApplier* applier() { return applier_.get(); }
  RedisClient* counters_db() { return counters_db_.get(); }

 private:
  SonicSwitch() = default;
  std::unique_ptr<RedisClient> config_db_, apply_db_, counters_db_, state_db_, appl_db_;
  std::unique_ptr<SonicDiscovery> discovery_;
  std::unique_ptr<SonicCounterSource> counters_;
  std::unique_ptr<SonicQosStore> store_;
  std::unique_ptr<SwitchApplier> applier_;
};

}  // namespace rocetune

#endif  // ROCETUNE_AGENT_SWITCH_SONIC_SWITCH_H_
