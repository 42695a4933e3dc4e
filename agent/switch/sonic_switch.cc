#include "agent/switch/sonic_switch.h"

#include "agent/switch/switch_seams.h"

namespace rocetune {

absl::StatusOr<std::unique_ptr<SonicSwitch>> SonicSwitch::Create(
    const SonicSwitchOptions& options) {
  absl::StatusOr<RedisEndpoint> ep = RedisEndpoint::Parse(options.redis);
  if (!ep.ok()) return ep.status();
  auto sw = std::unique_ptr<SonicSwitch>(new SonicSwitch());
  sw->config_db_ = std::make_unique<RedisClient>(*ep, kSonicConfigDb, options.client);
  sw->apply_db_ = std::make_unique<RedisClient>(*ep, kSonicConfigDb, options.client);
  sw->counters_db_ = std::make_unique<RedisClient>(*ep, kSonicCountersDb, options.client);
  sw->state_db_ = std::make_unique<RedisClient>(*ep, kSonicStateDb, options.client);
  sw->appl_db_ = std::make_unique<RedisClient>(*ep, kSonicApplDb, options.client);
  sw->discovery_ = std::make_unique<SonicDiscovery>(sw->config_db_.get(), sw->state_db_.get(),
                                                    sw->appl_db_.get());
  sw->counters_ = std::make_unique<SonicCounterSource>(sw->counters_db_.get(), options.counters);
  sw->store_ = std::make_unique<SonicQosStore>(sw->apply_db_.get());
  sw->applier_ = std::make_unique<SwitchApplier>(sw->store_.get(), options.applier);
  return sw;
}

HostSeams SonicSwitch::seams() {
  return SwitchSeams("sonic", discovery_.get(), counters_.get(), applier_.get());
}

}  // namespace rocetune
