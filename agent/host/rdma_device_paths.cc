#include "agent/host/rdma_device_paths.h"

#include <algorithm>
#include <filesystem>
#include <system_error>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace rocetune {

absl::StatusOr<std::vector<std::string>> RdmaDeviceNetdevs(const std::string& sysfs_root,
                                                           const std::string& device) {
  const std::string dir = absl::StrCat(sysfs_root, "/class/infiniband/", device, "/device/net");
  std::error_code ec;
  std::filesystem::directory_iterator it(dir, ec);
  if (ec) {
    return absl::UnavailableError(
        absl::StrCat("RDMA device ", device, " has no netdev: ", dir, ": ", ec.message()));
  }
  std::vector<std::string> out;
  for (const auto& entry : it) out.push_back(entry.path().filename().string());
  std::sort(out.begin(), out.end());
  if (out.empty()) {
    return absl::UnavailableError(
        absl::StrCat("RDMA device ", device, " has no netdev: ", dir, " is empty"));
  }
  return out;
}

absl::StatusOr<std::string> RdmaDevicePciAddress(const std::string& sysfs_root,
                                                 const std::string& device) {
  const std::string link = absl::StrCat(sysfs_root, "/class/infiniband/", device, "/device");
  std::error_code ec;
  std::filesystem::path target = std::filesystem::read_symlink(link, ec);
  if (ec) {
    return absl::UnavailableError(
        absl::StrCat("RDMA device ", device, " has no PCI address: ", link, ": ", ec.message()));
  }
  std::string bdf = target.filename().string();
  if (bdf.empty()) bdf = target.parent_path().filename().string();
  if (bdf.empty()) {
    return absl::UnavailableError(
        absl::StrCat("RDMA device ", device, ": cannot read a PCI address from ", link));
  }
  return bdf;
}

}  // namespace rocetune
