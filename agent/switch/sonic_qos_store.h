#ifndef ROCETUNE_AGENT_SWITCH_SONIC_QOS_STORE_H_
#define ROCETUNE_AGENT_SWITCH_SONIC_QOS_STORE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "agent/switch/redis_client.h"
#include "agent/switch/switch_qos_store.h"

namespace rocetune {

// SwitchQosStore over SONiC's CONFIG_DB: WRED_PROFILE|<name> fields,
// PORT_QOS_MAP|<port> pfc_enable, and BUFFER_POOL|* sizes for the buffer limit.
// Snapshot WATCHes every key it reads on its own connection; Commit sends
// MULTI, one multi-field HSET per key (orchagent sees each profile's fields
// together), EXEC, so a watched key changed by anyone else aborts the whole
// write. PORT_QOS_MAP keys naming several ports are not handled (one port per key).
class SonicQosStore : public SwitchQosStore {
 public:
  // `config_db` is connected to database 4 and used by nobody else (the WATCH
  // lives on its connection); not owned.
  explicit SonicQosStore(RedisClient* config_db);

  std::string name() const override { return "sonic_config_db"; }
  absl::StatusOr<SwitchQosState> Read(const SwitchQosKeys& keys) override;
  absl::StatusOr<SwitchQosState> Snapshot(const SwitchQosKeys& keys) override;
  absl::Status Commit(const SwitchQosWrite& write) override;
  void Release() override;

 private:
  absl::StatusOr<SwitchQosState> ReadKeys(const SwitchQosKeys& keys, bool watch);

  RedisClient* db_;
  uint64_t watch_generation_ = 0;  // the connection the WATCH was taken on
  std::vector<std::string> watched_;
};

}  // namespace rocetune

#endif  // ROCETUNE_AGENT_SWITCH_SONIC_QOS_STORE_H_
