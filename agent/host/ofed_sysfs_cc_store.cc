#include "agent/host/ofed_sysfs_cc_store.h"

#include <filesystem>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "agent/host/rdma_device_paths.h"
#include "model/cc_params.h"

namespace rocetune {
namespace {

const char* SideDir(CcSide side) { return side == CcSide::kRp ? "roce_rp" : "roce_np"; }

bool IsDir(const std::string& path) {
  std::error_code ec;
  return std::filesystem::is_directory(path, ec);
}

bool Exists(const std::string& path) {
  std::error_code ec;
  return std::filesystem::exists(path, ec);
}

}  // namespace

OfedSysfsCcStore::OfedSysfsCcStore(std::string sysfs_root, ParamFileIo* io)
    : sysfs_root_(std::move(sysfs_root)), io_(io) {}

absl::StatusOr<std::string> OfedSysfsCcStore::EcnDir(const std::string& device) const {
  absl::StatusOr<std::vector<std::string>> netdevs = RdmaDeviceNetdevs(sysfs_root_, device);
  if (!netdevs.ok()) return netdevs.status();
  std::vector<std::string> tried;
  for (const std::string& netdev : *netdevs) {
    std::string dir = absl::StrCat(sysfs_root_, "/class/net/", netdev, "/ecn");
    if (IsDir(dir + "/roce_rp") || IsDir(dir + "/roce_np")) return dir;
    tried.push_back(dir);
  }
  return absl::UnavailableError(absl::StrCat("RDMA device ", device,
                                             " has no OFED ecn/ directory (tried ",
                                             absl::StrJoin(tried, ", "), ")"));
}

absl::StatusOr<v1::DeviceParameters> OfedSysfsCcStore::Read(const std::string& device) {
  absl::StatusOr<std::string> ecn = EcnDir(device);
  if (!ecn.ok()) return ecn.status();
  v1::DeviceParameters out;
  out.set_device(device);
  for (const CcParamSpec& spec : CcParamTable()) {
    if (spec.ofed_file == nullptr) continue;
    const std::string path = absl::StrCat(*ecn, "/", SideDir(spec.side), "/", spec.ofed_file);
    if (!Exists(path)) continue;
    absl::StatusOr<std::string> text = io_->Read(path);
    if (!text.ok()) return text.status();
    absl::StatusOr<int64_t> value = ParseParamValue(*text, path);
    if (!value.ok()) return value.status();
    (*out.mutable_dcqcn())[spec.name] = *value;
  }
  for (CcSide side : {CcSide::kRp, CcSide::kNp}) {
    const std::string dir = absl::StrCat(*ecn, "/", SideDir(side), "/enable");
    if (!IsDir(dir)) continue;
    uint32_t mask = 0;
    bool complete = true;
    for (int p = 0; p < 8; ++p) {
      const std::string path = absl::StrCat(dir, "/", p);
      if (!Exists(path)) {
        complete = false;
        break;
      }
      absl::StatusOr<std::string> text = io_->Read(path);
      if (!text.ok()) return text.status();
      absl::StatusOr<int64_t> value = ParseParamValue(*text, path);
      if (!value.ok()) return value.status();
      if (*value & 1) mask |= 1u << p;
    }
    if (!complete) continue;
    if (side == CcSide::kRp) {
      out.set_rp_enable_mask(mask);
    } else {
      out.set_np_enable_mask(mask);
    }
  }
  return out;
}

absl::Status OfedSysfsCcStore::Write(const std::string& device, const std::string& name,
                                     int64_t value) {
  absl::StatusOr<std::string> ecn = EcnDir(device);
  if (!ecn.ok()) return ecn.status();
  if (name == kRpEnableMask || name == kNpEnableMask) {
    if (value < 0 || value > 255) {
      return absl::InvalidArgumentError(
          absl::StrCat(device, ": ", name, "=", value, " outside [0, 255]"));
    }
    const std::string dir =
        absl::StrCat(*ecn, "/", name == kRpEnableMask ? "roce_rp" : "roce_np", "/enable");
    for (int p = 0; p < 8; ++p) {
      const std::string path = absl::StrCat(dir, "/", p);
      const int64_t bit = (value >> p) & 1;
      // Only priorities whose state changes are written (the driver also
      // skips the firmware command for an unchanged value).
      if (absl::StatusOr<std::string> cur = io_->Read(path); cur.ok()) {
        absl::StatusOr<int64_t> v = ParseParamValue(*cur, path);
        if (v.ok() && (*v & 1) == bit) continue;
      }
      absl::Status st = io_->Write(path, bit ? "1\n" : "0\n");
      if (!st.ok()) {
        return absl::Status(st.code(), absl::StrCat(device, ": ", name, "=", value, " (priority ",
                                                    p, "): ", st.message()));
      }
    }
    return absl::OkStatus();
  }
  const CcParamSpec* spec = FindCcParam(name);
  if (spec == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(device, ": unknown DCQCN parameter \"", name, "\""));
  }
  if (spec->ofed_file == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat(device, ": parameter ", name, " is not exposed by the ofed_sysfs layout"));
  }
  const std::string path = absl::StrCat(*ecn, "/", SideDir(spec->side), "/", spec->ofed_file);
  return WriteParamValue(io_, path, device, name, value);
}

}  // namespace rocetune
