#include "agent/host/sysfs_nic_discovery.h"

#include <sys/stat.h>

#include <utility>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "agent/host/sysfs_file.h"
#include "daemon/logging.h"

namespace rocetune {
namespace {

const char* PciVendorName(const std::string& id) {
  if (id == "0x15b3") return "Mellanox";
  if (id == "0x14e4") return "Broadcom";
  if (id == "0x8086") return "Intel";
  if (id == "0x1af4") return "Red Hat (virtio)";
  return "";
}

std::string OrEmpty(const absl::StatusOr<std::string>& s) { return s.ok() ? *s : ""; }

bool IsZeroGid(absl::string_view gid) {
  for (char c : gid) {
    if (c != '0' && c != ':') return false;
  }
  return true;
}

}  // namespace

SysfsNicDiscovery::SysfsNicDiscovery(std::string sysfs_root, std::string counter_source)
    : root_(std::move(sysfs_root)), counter_source_(std::move(counter_source)) {}

absl::StatusOr<uint64_t> SysfsNicDiscovery::ParseRateMbps(const std::string& rate) {
  // "<number> Gb/sec (<width>X <speed>)"
  std::vector<absl::string_view> parts = absl::StrSplit(rate, ' ', absl::SkipEmpty());
  double gbps = 0;
  if (parts.size() < 2 || parts[1] != "Gb/sec" || !absl::SimpleAtod(parts[0], &gbps) ||
      !(gbps >= 0) || gbps > 1e7) {
    return absl::InvalidArgumentError(absl::StrCat("unrecognised port rate \"", rate, "\""));
  }
  return static_cast<uint64_t>(gbps * 1000.0 + 0.5);
}

absl::StatusOr<std::vector<v1::NicDevice>> SysfsNicDiscovery::Discover() {
  struct stat st;
  if (stat(root_.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return absl::NotFoundError(absl::StrCat("sysfs root ", root_, " is not a directory"));
  }
  std::vector<v1::NicDevice> devices;
  const std::string ib = root_ + "/class/infiniband";
  absl::StatusOr<std::vector<std::string>> names = ListSysfsDir(ib);
  if (names.ok()) {
    for (const std::string& name : *names) {
      absl::StatusOr<v1::NicDevice> dev = ReadDevice(name);
      if (!dev.ok()) {
        LogWarning("skipping RDMA device", {{"device", name}, {"error", dev.status().ToString()}});
        continue;
      }
      devices.push_back(*std::move(dev));
    }
  }
  if (devices.empty()) {
    LogOnce(absl::StrCat("no_rdma_device:", root_), LogLevel::kInfo,
            "no RDMA device found; reporting an empty inventory", {{"path", ib}});
  }
  return devices;
}

absl::StatusOr<v1::NicDevice> SysfsNicDiscovery::ReadDevice(const std::string& name) {
  const std::string dir = root_ + "/class/infiniband/" + name;
  absl::StatusOr<std::vector<std::string>> ports = ListSysfsDir(dir + "/ports");
  if (!ports.ok()) return ports.status();

  v1::NicDevice d;
  d.set_name(name);
  d.set_firmware_version(OrEmpty(ReadSysfsString(dir + "/fw_ver")));
  d.set_node_guid(OrEmpty(ReadSysfsString(dir + "/node_guid")));
  d.set_counter_source(counter_source_);

  const std::string pci = dir + "/device";
  const std::string pci_address = SymlinkBasename(pci);
  std::string driver;
  if (!pci_address.empty()) {
    d.set_pci_address(pci_address);
    driver = SymlinkBasename(pci + "/driver");
    const std::string vendor_id = OrEmpty(ReadSysfsString(pci + "/vendor"));
    d.set_vendor(PciVendorName(vendor_id));
    if (d.vendor().empty()) d.set_vendor(vendor_id);
    std::string model = OrEmpty(ReadSysfsString(dir + "/hca_type"));
    if (model.empty()) model = OrEmpty(ReadSysfsString(pci + "/device"));
    d.set_model(model);
  } else if (absl::StartsWith(name, "rxe")) {
    driver = "rxe";
    d.set_vendor("Soft-RoCE");
    d.set_model("rxe");
  } else if (absl::StartsWith(name, "siw")) {
    driver = "siw";
  }
  d.set_driver(driver);

  const std::string parent = OrEmpty(ReadSysfsString(dir + "/parent"));
  std::string pci_netdev;
  if (absl::StatusOr<std::vector<std::string>> nets = ListSysfsDir(pci + "/net");
      nets.ok() && !nets->empty()) {
    pci_netdev = nets->front();
  }

  for (const std::string& p : *ports) {
    uint32_t port_num = 0;
    if (!absl::SimpleAtoi(p, &port_num)) continue;
    const std::string pdir = dir + "/ports/" + p;
    v1::NicPort* port = d.add_ports();
    port->set_port(port_num);
    port->set_link_layer(OrEmpty(ReadSysfsString(pdir + "/link_layer")));
    std::string state = OrEmpty(ReadSysfsString(pdir + "/state"));
    if (size_t colon = state.find(": "); colon != std::string::npos)
      state = state.substr(colon + 2);
    port->set_state(state);
    if (absl::StatusOr<std::string> rate = ReadSysfsString(pdir + "/rate"); rate.ok()) {
      absl::StatusOr<uint64_t> mbps = ParseRateMbps(*rate);
      if (mbps.ok()) {
        port->set_speed_mbps(*mbps);
      } else {
        LogOnce(absl::StrCat("bad_rate:", pdir), LogLevel::kWarning, "cannot parse port rate",
                {{"device", name}, {"port", p}, {"error", mbps.status().ToString()}});
      }
    }
    std::string netdev;
    if (absl::StatusOr<std::vector<std::string>> ndevs = ListSysfsDir(pdir + "/gid_attrs/ndevs");
        ndevs.ok()) {
      for (const std::string& i : *ndevs) {
        netdev = OrEmpty(ReadSysfsString(pdir + "/gid_attrs/ndevs/" + i));
        if (!netdev.empty()) break;
      }
    }
    if (netdev.empty()) netdev = pci_netdev;
    if (netdev.empty()) netdev = parent;
    port->set_netdev(netdev);
    if (absl::StatusOr<std::vector<std::string>> gids = ListSysfsDir(pdir + "/gids"); gids.ok()) {
      for (const std::string& i : *gids) {
        absl::StatusOr<std::string> gid = ReadSysfsString(pdir + "/gids/" + i);
        if (!gid.ok() || gid->empty() || IsZeroGid(*gid)) continue;
        // Real hosts list the same GID once per RoCE type (v1 and v2).
        bool seen = false;
        for (const std::string& g : port->gids()) seen = seen || g == *gid;
        if (!seen) port->add_gids(*gid);
      }
    }
  }
  return d;
}

}  // namespace rocetune
