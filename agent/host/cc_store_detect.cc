#include "agent/host/cc_store_detect.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "agent/host/debugfs_cc_store.h"
#include "agent/host/ofed_sysfs_cc_store.h"

namespace rocetune {

std::string DetectCcParamLayout(const std::string& sysfs_root, const std::string& debugfs_root,
                                const std::string& device) {
  if (OfedSysfsCcStore(sysfs_root).EcnDir(device).ok()) return "ofed_sysfs";
  if (DebugfsCcStore(sysfs_root, debugfs_root).CcParamsDir(device).ok()) return "debugfs";
  return "none";
}

absl::StatusOr<std::unique_ptr<CcParamStore>> DetectCcParamStore(const std::string& sysfs_root,
                                                                 const std::string& debugfs_root,
                                                                 const std::string& device,
                                                                 ParamFileIo* io) {
  auto ofed = std::make_unique<OfedSysfsCcStore>(sysfs_root, io);
  absl::StatusOr<std::string> ecn = ofed->EcnDir(device);
  if (ecn.ok()) return std::unique_ptr<CcParamStore>(std::move(ofed));
  auto debugfs = std::make_unique<DebugfsCcStore>(sysfs_root, debugfs_root, io);
  absl::StatusOr<std::string> cc = debugfs->CcParamsDir(device);
  if (cc.ok()) return std::unique_ptr<CcParamStore>(std::move(debugfs));
  // A layout the agent may not look into is a permission problem, not a missing layout.
  const bool denied =
      absl::IsPermissionDenied(ecn.status()) || absl::IsPermissionDenied(cc.status());
  return absl::Status(denied ? absl::StatusCode::kPermissionDenied : absl::StatusCode::kUnavailable,
                      absl::StrCat("no DCQCN parameter layout for RDMA device ", device,
                                   " (ofed_sysfs: ", ecn.status().message(),
                                   "; debugfs: ", cc.status().message(), ")"));
}

}  // namespace rocetune
