#ifndef ROCETUNE_AGENT_HOST_OFED_SYSFS_CC_STORE_H_
#define ROCETUNE_AGENT_HOST_OFED_SYSFS_CC_STORE_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "agent/host/cc_param_store.h"
#include "agent/host/param_file_io.h"

namespace rocetune {

// DCQCN parameters through the MLNX_OFED / DOCA-OFED netdev sysfs layout
// (docs/nic-facts.md 1.2):
//   <sysfs_root>/class/net/<if>/ecn/roce_rp/<param>   (reaction point)
//   <sysfs_root>/class/net/<if>/ecn/roce_np/<param>   (notification point)
//   <sysfs_root>/class/net/<if>/ecn/roce_{rp,np}/enable/<0..7>
// The netdev is found through <sysfs_root>/class/infiniband/<dev>/device/net/.
class OfedSysfsCcStore : public CcParamStore {
 public:
  // `io` must outlive the store; tests pass an error-injecting one.
  explicit OfedSysfsCcStore(std::string sysfs_root, ParamFileIo* io = ParamFileIo::Real());

  std::string layout() const override { return "ofed_sysfs"; }
  // Every parameter file present in roce_rp/ and roce_np/, plus both enable masks
  // when all eight enable/<p> files are present. kUnavailable when the device
  // has no ecn/ directory; an unreadable or garbled file fails the whole read.
  absl::StatusOr<v1::DeviceParameters> Read(const std::string& device) override;
  // REQUIRES: the value was validated (ValidateParameters); the kernel does not
  // check sscanf's result. kFailedPrecondition for parameters this layout lacks.
  // A mask writes only the enable/<p> files whose state changes.
  absl::Status Write(const std::string& device, const std::string& name, int64_t value) override;

  // <sysfs_root>/class/net/<if>/ecn for the first netdev of `device` that has
  // one; kUnavailable naming the paths tried otherwise.
  absl::StatusOr<std::string> EcnDir(const std::string& device) const;

 private:
  std::string sysfs_root_;
  ParamFileIo* io_;
};

}  // namespace rocetune

#endif  // ROCETUNE_AGENT_HOST_OFED_SYSFS_CC_STORE_H_
