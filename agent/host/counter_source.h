#ifndef ROCETUNE_AGENT_HOST_COUNTER_SOURCE_H_
#define ROCETUNE_AGENT_HOST_COUNTER_SOURCE_H_

#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#include "absl/status/status.h"

namespace rocetune {

// Identifies one counter: (device, port[, priority], canonical name).
struct CounterKey {
  std::string device;  // RDMA device, e.g. "mlx5_0"
  uint32_t port = 1;
  int32_t priority = -1;  // -1: not per priority
  std::string name;       // canonical name (see agent/host/counter_names.h) or raw vendor name

  friend bool operator==(const CounterKey& a, const CounterKey& b) {
    return std::tie(a.device, a.port, a.priority, a.name) ==
           std::tie(b.device, b.port, b.priority, b.name);
  }
  friend bool operator<(const CounterKey& a, const CounterKey& b) {
    return std::tie(a.device, a.port, a.priority, a.name) <
           std::tie(b.device, b.port, b.priority, b.name);
  }
  template <typename H>
  friend H AbslHashValue(H h, const CounterKey& k) {
    return H::combine(std::move(h), k.device, k.port, k.priority, k.name);
  }
};

struct CounterValue {
  CounterKey key;
  uint64_t value = 0;
  // Hardware width of the counter: 32 or 64. A 32-bit counter that goes down
  // from near 2^32 wrapped; any other decrease is a reset (see the sampler).
  uint8_t width_bits = 64;
};

// Hardware seam: a snapshot of named u64 counters. Real implementations: sysfs
// hw_counters/ and counters/, RDMA netlink statistics, ethtool stats; the fabric
// simulator provides its own.
class CounterSource {
 public:
  virtual ~CounterSource() = default;
  // Short name of the mechanism: "sysfs", "netlink", "ethtool", "sim".
  virtual std::string name() const = 0;
  // Appends the current value of every counter this source knows to `out`.
  // A partially readable source appends what it could and returns OK; it fails
  // only when nothing could be read (kUnavailable for a missing device).
  virtual absl::Status Collect(std::vector<CounterValue>* out) = 0;
};

}  // namespace rocetune

#endif  // ROCETUNE_AGENT_HOST_COUNTER_SOURCE_H_
