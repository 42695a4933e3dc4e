#include "agent/host/debugfs_cc_store.h"

#include <filesystem>
#include <system_error>
#include <utility>

#include "absl/strings/str_cat.h"
#include "agent/host/rdma_device_paths.h"
#include "model/cc_params.h"

namespace rocetune {

DebugfsCcStore::DebugfsCcStore(std::string sysfs_root, std::string debugfs_root, ParamFileIo* io)
    : sysfs_root_(std::move(sysfs_root)), debugfs_root_(std::move(debugfs_root)), io_(io) {}

absl::StatusOr<std::string> DebugfsCcStore::CcParamsDir(const std::string& device) const {
  absl::StatusOr<std::string> bdf = RdmaDevicePciAddress(sysfs_root_, device);
  if (!bdf.ok()) return bdf.status();
  std::string dir = absl::StrCat(debugfs_root_, "/mlx5/", *bdf, "/cc_params");
  std::error_code ec;
  if (std::filesystem::is_directory(dir, ec)) return dir;
  if (ec == std::errc::permission_denied) {
    // debugfs is mounted 0700 root: without CAP_DAC_OVERRIDE nothing below it
    // can be seen, which is not the same as the device having no cc_params.
    return absl::PermissionDeniedError(
        absl::StrCat("RDMA device ", device, " (", *bdf, "): cannot look into ", dir, ": ",
                     ec.message(), " (debugfs is root-only; the agent needs CAP_DAC_OVERRIDE)"));
  }
  return absl::UnavailableError(absl::StrCat("RDMA device ", device, " (", *bdf,
                                             ") has no debugfs cc_params directory ", dir));
}

absl::StatusOr<v1::DeviceParameters> DebugfsCcStore::Read(const std::string& device) {
  absl::StatusOr<std::string> dir = CcParamsDir(device);
  if (!dir.ok()) return dir.status();
  v1::DeviceParameters out;
  out.set_device(device);
  for (const CcParamSpec& spec : CcParamTable()) {
    if (spec.debugfs_file == nullptr) continue;
    const std::string path = absl::StrCat(*dir, "/", spec.debugfs_file);
    std::error_code ec;
    if (!std::filesystem::exists(path, ec)) continue;
    absl::StatusOr<std::string> text = io_->Read(path);
    if (!text.ok()) return text.status();
    absl::StatusOr<int64_t> value = ParseParamValue(*text, path);
    if (!value.ok()) return value.status();
    (*out.mutable_dcqcn())[spec.name] = *value;
  }
  return out;
}

absl::Status DebugfsCcStore::Write(const std::string& device, const std::string& name,
                                   int64_t value) {
  if (name == kRpEnableMask || name == kNpEnableMask) {
    return absl::FailedPreconditionError(
        absl::StrCat(device, ": ", name,
                     " cannot be set through the debugfs layout (no per-priority enable; "
                     "firmware ROCE_CC_PRIO_MASK decides)"));
  }
  const CcParamSpec* spec = FindCcParam(name);
  if (spec == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(device, ": unknown DCQCN parameter \"", name, "\""));
  }
  if (spec->debugfs_file == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat(device, ": parameter ", name, " is not exposed by the debugfs layout"));
  }
  absl::StatusOr<std::string> dir = CcParamsDir(device);
  if (!dir.ok()) return dir.status();
  const std::string path = absl::StrCat(*dir, "/", spec->debugfs_file);
  return WriteParamValue(io_, path, device, name, value);
}

}  // namespace rocetune
