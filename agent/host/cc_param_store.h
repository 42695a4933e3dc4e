#ifndef ROCETUNE_AGENT_HOST_CC_PARAM_STORE_H_
#define ROCETUNE_AGENT_HOST_CC_PARAM_STORE_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "rocetune/v1/params.pb.h"

namespace rocetune {

// Hardware seam: DCQCN reaction-point / notification-point parameters of one
// RDMA device, under canonical names (model/cc_params.h). Real
// implementations: OFED sysfs /sys/class/net/<if>/ecn/roce_{rp,np}/ and upstream
// debugfs mlx5/<bdf>/cc_params/; the simulator provides its own.
class CcParamStore {
 public:
  virtual ~CcParamStore() = default;
  // "ofed_sysfs", "debugfs", "sim", ...
  virtual std::string layout() const = 0;
  // Reads every DCQCN parameter and the per-priority enable masks (pfc unset).
  // kUnavailable when the device or its parameter directory is missing.
  virtual absl::StatusOr<v1::DeviceParameters> Read(const std::string& device) = 0;
  // Writes one parameter ("rp_enable_mask" / "np_enable_mask" for the masks).
  // Errors name the parameter and the path or mechanism that failed.
  virtual absl::Status Write(const std::string& device, const std::string& name, int64_t value) = 0;
};

}  // namespace rocetune

#endif  // ROCETUNE_AGENT_HOST_CC_PARAM_STORE_H_
