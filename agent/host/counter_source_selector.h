#ifndef ROCETUNE_AGENT_HOST_COUNTER_SOURCE_SELECTOR_H_
#define ROCETUNE_AGENT_HOST_COUNTER_SOURCE_SELECTOR_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "agent/host/counter_source.h"

namespace rocetune {

enum class CounterSourcePreference { kAuto, kNetlink, kSysfs };

// "auto", "netlink", "sysfs"; kInvalidArgument otherwise.
absl::StatusOr<CounterSourcePreference> ParseCounterSourcePreference(absl::string_view text);

// The RDMA counter source for this host. kAuto and kNetlink try RDMA netlink
// first: when it opens and lists at least one device, the result is named
// "netlink" and reads hw counters through STAT_GET plus the PMA counters/
// files (which netlink does not carry) from sysfs. When netlink is unavailable
// (no RDMA core, as on this CI host) or lists no device, it falls back to the
// sysfs source named "sysfs" and logs the reason once. kSysfs skips netlink.
// The returned source's name() is the inventory's counter_source field.
std::unique_ptr<CounterSource> MakeCounterSource(
    const std::string& sysfs_root, CounterSourcePreference prefer = CounterSourcePreference::kAuto);

}  // namespace rocetune

#endif  // ROCETUNE_AGENT_HOST_COUNTER_SOURCE_SELECTOR_H_
