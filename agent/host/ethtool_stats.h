#ifndef ROCETUNE_AGENT_HOST_ETHTOOL_STATS_H_
#define ROCETUNE_AGENT_HOST_ETHTOOL_STATS_H_

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "agent/host/counter_source.h"
#include "model/counter_names.h"
#include "rocetune/v1/agent.pb.h"

namespace rocetune {

// Issues one SIOCETHTOOL ioctl on interface `ifname`; `cmd` points at an
// ethtool command struct (first member: u32 cmd) that the call reads and
// fills. Returns 0 or -errno. The seam tests replace.
using EthtoolIoctl = std::function<int(const std::string& ifname, void* cmd)>;

// The real ioctl over an AF_INET datagram socket.
int RealEthtoolIoctl(const std::string& ifname, void* cmd);

// Which netdev's statistics belong to which RDMA (device, port).
struct EthtoolTarget {
  std::string device;  // RDMA device, e.g. "mlx5_0"
  uint32_t port = 1;
  std::string ifname;  // e.g. "ens1f0np0"
};

// One target per port that has a netdev.
std::vector<EthtoolTarget> EthtoolTargetsFromInventory(const std::vector<v1::NicDevice>& devices);

// CounterSource over the ethtool ioctl sequence, per target interface:
//   1. ETHTOOL_GSSET_INFO (ETH_SS_STATS) -> the current number of statistics;
//   2. when it differs from the cached name list: ETHTOOL_GSTRINGS with `len`
//      set to that count (re-enumerate);
//   3. ETHTOOL_GSTATS with `n_stats` set to the expected count. A reply whose
//      n_stats differs (new kernels answer 0 on a mismatch, old ones the new
//      count) means the set changed under us: re-enumerate and retry (at most
//      3 attempts). The buffer carries slack entries so an old kernel that
//      copies a grown set cannot overrun it (docs/nic-facts.md 3.2).
// Values are mapped by NAME, never by index (counter_names.h
// MapEthtoolCounter: per-priority PFC pause frames / durations / transitions
// both directions, pause-storm events, discards); other names pass through.
// Collect fails only when every target failed (the first error: kUnavailable
// for a missing interface, kUnimplemented when the driver has no statistics).
class EthtoolCounterSource : public CounterSource {
 public:
  explicit EthtoolCounterSource(std::vector<EthtoolTarget> targets,
                                EthtoolIoctl ioctl = RealEthtoolIoctl);

  std::string name() const override { return "ethtool"; }
  absl::Status Collect(std::vector<CounterValue>* out) override;
  absl::Status CollectInto(CounterBuffer* out) override;

  // Reads one interface: (vendor name, value) in driver order.
  absl::StatusOr<std::vector<std::pair<std::string, uint64_t>>> ReadInterface(
      const std::string& ifname);

  // Times a name list was (re)read after the first enumeration.
  uint64_t reenumerations() const { return reenumerations_; }

 private:
  // An interface's statistics names in driver order, and their mapping
  // (computed once per enumeration).
  struct StatNames {
    std::vector<std::string> vendor;
    std::vector<MappedCounter> mapped;
    uint64_t enumeration = 0;  // which enumeration made it (1, 2, ...; never reused)
  };
  // A target's counter keys for one enumeration of its interface, with ids
  // from NewCounterKeyIds (keys[i] has first_id + i): a round refills the
  // caller's buffer by id, without comparing or copying names.
  struct TargetKeys {
    uint64_t enumeration = 0;  // StatNames::enumeration the keys were made for
    uint64_t first_id = 0;
    std::vector<CounterKey> keys;
  };

  absl::StatusOr<uint32_t> StatCount(const std::string& ifname);
  absl::Status Enumerate(const std::string& ifname, uint32_t count);
  // Steps 1-3 for one interface: on success the values are in stats_buf_'s
  // ethtool_stats data, in the order of the returned names (valid until the
  // next call).
  absl::StatusOr<const StatNames*> ReadStats(const std::string& ifname);
  // `next(key_id, key)` gives the element for one counter; the caller's
  // element gets `key` and `key_id`, this sets value and width.
  absl::Status CollectWith(absl::FunctionRef<CounterValue&(uint64_t, const CounterKey&)> next);

  std::vector<EthtoolTarget> targets_;
  // Per target: its failure was passed to LogOnce already (a target that
  // fails every round, e.g. a netdev that does not exist, builds no log key
  // after the first).
  std::vector<bool> warned_;
  EthtoolIoctl ioctl_;
  absl::flat_hash_map<std::string, StatNames> names_;
  std::vector<TargetKeys> target_keys_;  // parallel to targets_
  std::vector<uint64_t> stats_buf_;      // ETHTOOL_GSTATS buffer, reused
  uint64_t enumerations_ = 0;
  uint64_t reenumerations_ = 0;
};

// Parses saved `ethtool -S <if>` output ("NIC statistics:" then
// "     name: value" lines) into mapped counters for (device, port).
// kInvalidArgument naming the line number for a line that is not "name: u64".
absl::StatusOr<std::vector<CounterValue>> ParseEthtoolDump(absl::string_view text,
                                                           const std::string& device,
                                                           uint32_t port);

}  // namespace rocetune

#endif  // ROCETUNE_AGENT_HOST_ETHTOOL_STATS_H_
