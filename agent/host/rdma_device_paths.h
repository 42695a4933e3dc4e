#ifndef ROCETUNE_AGENT_HOST_RDMA_DEVICE_PATHS_H_
#define ROCETUNE_AGENT_HOST_RDMA_DEVICE_PATHS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace rocetune {

// Netdevs of RDMA device `device`: the entries of
// <sysfs_root>/class/infiniband/<device>/device/net/, sorted. kUnavailable
// naming the path when the device or its net/ directory is missing.
absl::StatusOr<std::vector<std::string>> RdmaDeviceNetdevs(const std::string& sysfs_root,
                                                           const std::string& device);

// PCI address of RDMA device `device`: the last component of the
// <sysfs_root>/class/infiniband/<device>/device symlink ("0000:3b:00.0").
// kUnavailable naming the path when it is missing or not a symlink.
absl::StatusOr<std::string> RdmaDevicePciAddress(const std::string& sysfs_root,
                                                 const std::string& device);

}  // namespace rocetune

#endif  // ROCETUNE_AGENT_HOST_RDMA_DEVICE_PATHS_H_
