#ifndef ROCETUNE_AGENT_SWITCH_SWITCH_INVENTORY_H_
#define ROCETUNE_AGENT_SWITCH_SWITCH_INVENTORY_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "rocetune/v1/agent.pb.h"

namespace rocetune {

// The device name under which a switch's knobs travel in a v1::ParameterSet and
// its inventory in a Hello: one switch is one "device".
inline constexpr char kSwitchDevice[] = "switch";

struct SwitchPort {
  std::string name;  // "Ethernet0"
  int64_t speed_mbps = 0;
  int64_t mtu = 0;
  std::string admin_status;       // "up" / "down" ("" when not configured)
  std::string oper_status;        // "up" / "down" ("" when unknown)
  std::vector<int> pfc_enable;    // lossless priorities (PORT_QOS_MAP pfc_enable)
  std::vector<int> pfcwd_enable;  // priorities the PFC watchdog monitors
};

struct SwitchQueue {
  std::string port;
  int index = 0;  // position in the port's queue list
  std::string wred_profile;
  std::string scheduler;
};

struct SwitchWredProfile {
  std::string name;
  std::map<std::string, std::string> fields;  // as stored, e.g. green_min_threshold -> "1048576"
};

struct SwitchPfcWatchdog {
  std::string port;                           // or "GLOBAL"
  std::map<std::string, std::string> fields;  // action, detection_time (ms), ...
};

// What a switch holds: ports, queue-to-profile bindings, WRED/ECN profiles,
// PFC watchdog settings, the buffer limit thresholds are checked against.
struct SwitchInventory {
  std::string platform;  // "sonic", "sim"
  std::string hostname;
  std::string hwsku;
  std::vector<SwitchPort> ports;            // sorted by name (natural order)
  std::vector<SwitchQueue> queues;          // sorted by (port, index)
  std::vector<SwitchWredProfile> profiles;  // sorted by name
  std::vector<SwitchPfcWatchdog> pfc_watchdog;
  int64_t buffer_limit_bytes = 0;
  // Whether per-queue ECN-marked packet counters are supported (unknown: false).
  bool ecn_marked_counter_supported = false;
};

// The inventory as a JSON object (what `rocetune-agent --once` prints).
std::string SwitchInventoryJson(const SwitchInventory& inv);

// The inventory as the one NicDevice a Hello carries: name kSwitchDevice, one
// NicPort per switch port (port = 1-based position, netdev = port name, state
// "ACTIVE" / "DOWN", link_layer "Ethernet").
v1::NicDevice SwitchNicDevice(const SwitchInventory& inv);

// "Ethernet8" < "Ethernet16": by prefix, then by the trailing number.
bool PortNameLess(const std::string& a, const std::string& b);

}  // namespace rocetune

#endif  // ROCETUNE_AGENT_SWITCH_SWITCH_INVENTORY_H_
