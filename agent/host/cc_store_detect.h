#ifndef ROCETUNE_AGENT_HOST_CC_STORE_DETECT_H_
#define ROCETUNE_AGENT_HOST_CC_STORE_DETECT_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "agent/host/cc_param_store.h"
#include "agent/host/param_file_io.h"

namespace rocetune {

// The DCQCN parameter layout of `device`: "ofed_sysfs" when one of its netdevs has
// <sysfs_root>/class/net/<if>/ecn/roce_{rp,np}/ (preferred: it also carries the
// per-priority enable), else "debugfs" when <debugfs_root>/mlx5/<bdf>/cc_params/
// exists, else "none".
std::string DetectCcParamLayout(const std::string& sysfs_root, const std::string& debugfs_root,
                                const std::string& device);

// A store for the detected layout. kUnavailable naming the device and both
// places looked at when the layout is "none". `io` must outlive the store.
absl::StatusOr<std::unique_ptr<CcParamStore>> DetectCcParamStore(
    const std::string& sysfs_root, const std::string& debugfs_root, const std::string& device,
    ParamFileIo* io = ParamFileIo::Real());

}  // namespace rocetune

#endif  // ROCETUNE_AGENT_HOST_CC_STORE_DETECT_H_
