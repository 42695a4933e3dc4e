#ifndef ROCETUNE_AGENT_HOST_DEBUGFS_CC_STORE_H_
#define ROCETUNE_AGENT_HOST_DEBUGFS_CC_STORE_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "agent/host/cc_param_store.h"
#include "agent/host/param_file_io.h"

namespace rocetune {

// DCQCN parameters through the upstream mlx5 debugfs layout (docs/nic-facts.md 1.3):
//   <debugfs_root>/mlx5/<pci bdf>/cc_params/{rp_*,np_*,rtt_resp_dscp*}
// The BDF is the target of <sysfs_root>/class/infiniband/<dev>/device. This
// layout has no per-priority enable: masks are never read, and writing one
// fails with kFailedPrecondition.
class DebugfsCcStore : public CcParamStore {
 public:
  // `io` must outlive the store.
  DebugfsCcStore(std::string sysfs_root, std::string debugfs_root,
                 ParamFileIo* io = ParamFileIo::Real());

  std::string layout() const override { return "debugfs"; }
  // Every canonical parameter whose file is present. kUnavailable when the
  // device's cc_params/ directory is missing.
  absl::StatusOr<v1::DeviceParameters> Read(const std::string& device) override;
  // REQUIRES: the value was validated (ValidateParameters).
  absl::Status Write(const std::string& device, const std::string& name, int64_t value) override;

  // <debugfs_root>/mlx5/<bdf>/cc_params of `device`; kUnavailable if missing.
  absl::StatusOr<std::string> CcParamsDir(const std::string& device) const;

 private:
  std::string sysfs_root_;
  std::string debugfs_root_;
  ParamFileIo* io_;
};

}  // namespace rocetune

#endif  // ROCETUNE_AGENT_HOST_DEBUGFS_CC_STORE_H_
