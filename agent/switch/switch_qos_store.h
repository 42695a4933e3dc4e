#ifndef ROCETUNE_AGENT_SWITCH_SWITCH_QOS_STORE_H_
#define ROCETUNE_AGENT_SWITCH_SWITCH_QOS_STORE_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace rocetune {

// The tunable QoS state of a switch, as stored (strings, unvalidated).
struct SwitchQosState {
  // WRED/ECN profile name -> its fields. A profile that does not exist is absent.
  std::map<std::string, std::map<std::string, std::string>> profiles;
  // Port -> its pfc_enable text ("3,4"; "" when the field is unset). A port
  // without a PORT_QOS_MAP entry is absent.
  std::map<std::string, std::string> pfc_enable;
  // The largest threshold the buffer allows (bytes).
  int64_t buffer_limit_bytes = 0;
};

// What to read: the named profiles and ports; both empty means everything.
struct SwitchQosKeys {
  std::vector<std::string> profiles;
  std::vector<std::string> ports;
  bool all() const { return profiles.empty() && ports.empty(); }
};

// Fields to write: profile -> field -> value, port -> pfc_enable text.
struct SwitchQosWrite {
  std::map<std::string, std::map<std::string, std::string>> profile_fields;
  std::map<std::string, std::string> pfc_enable;
  bool empty() const { return profile_fields.empty() && pfc_enable.empty(); }
};

// Switch seam: reads and writes WRED/ECN profile fields and PFC enables.
// Writes are all-or-nothing and conditional on what was read: Snapshot reads
// the keys and watches them; Commit writes every field at once and fails with
// kAborted, writing nothing, when any watched key changed since. Real
// implementation: SonicQosStore (CONFIG_DB, WATCH + MULTI/EXEC); the simulator's
// switches provide their own. Not thread-safe: one Snapshot/Commit at a time
// (SwitchApplier serialises them).
class SwitchQosStore {
 public:
  virtual ~SwitchQosStore() = default;
  virtual std::string name() const = 0;  // "sonic_config_db", "sim"
  // Reads without watching.
  virtual absl::StatusOr<SwitchQosState> Read(const SwitchQosKeys& keys) = 0;
  // Reads and starts watching the keys read (and the buffer limit's inputs).
  virtual absl::StatusOr<SwitchQosState> Snapshot(const SwitchQosKeys& keys) = 0;
  // Writes `write` all-or-nothing. kAborted: a watched key changed (nothing
  // written). kUnavailable: the store could not be reached; whether the write
  // happened is unknown, but it happened wholly or not at all. Ends the watch.
  virtual absl::Status Commit(const SwitchQosWrite& write) = 0;
  // Ends a watch without writing.
  virtual void Release() = 0;
};

}  // namespace rocetune

#endif  // ROCETUNE_AGENT_SWITCH_SWITCH_QOS_STORE_H_
