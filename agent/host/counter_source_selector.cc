#include "agent/host/counter_source_selector.h"

#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "agent/host/counter_source_group.h"
#include "agent/host/netlink_counter_source.h"
#include "agent/host/sysfs_counter_source.h"
#include "daemon/logging.h"

namespace rocetune {

absl::StatusOr<CounterSourcePreference> ParseCounterSourcePreference(absl::string_view text) {
  if (text == "auto") return CounterSourcePreference::kAuto;
  if (text == "netlink") return CounterSourcePreference::kNetlink;
  if (text == "sysfs") return CounterSourcePreference::kSysfs;
  return absl::InvalidArgumentError(
      absl::StrCat("counter source \"", text, "\" is not one of auto, netlink, sysfs"));
}

std::unique_ptr<CounterSource> MakeCounterSource(const std::string& sysfs_root,
                                                 CounterSourcePreference prefer) {
  if (prefer != CounterSourcePreference::kSysfs) {
    absl::StatusOr<std::unique_ptr<NetlinkCounterSource>> nl =
        NetlinkCounterSource::Create(sysfs_root);
    absl::Status why = nl.status();
    if (nl.ok() && (*nl)->devices().empty()) {
      why = absl::UnavailableError("RDMA netlink lists no device");
    }
    if (why.ok()) {
      SysfsCounterOptions pma;
      pma.hw_counters = false;
      std::vector<std::unique_ptr<CounterSource>> members;
      members.push_back(*std::move(nl));
      members.push_back(std::make_unique<SysfsCounterSource>(sysfs_root, pma));
      LogInfo("counter source selected", {{"source", "netlink"}});
      return std::make_unique<CounterSourceGroup>("netlink", std::move(members));
    }
    LogOnce("counter_source_fallback", LogLevel::kInfo,
            "RDMA netlink statistics unavailable; reading counters from sysfs",
            {{"reason", why.ToString()}});
  }
  return std::make_unique<SysfsCounterSource>(sysfs_root);
}

}  // namespace rocetune
