#include "agent/host/sysfs_nic_discovery.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
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

// "dddd:bb:dd.f"
bool IsPciAddress(absl::string_view s) {
  if (s.size() != 12 || s[4] != ':' || s[7] != ':' || s[10] != '.') return false;
  for (size_t i : {0, 1, 2, 3, 5, 6, 8, 9, 11}) {
    if (!absl::ascii_isxdigit(static_cast<unsigned char>(s[i]))) return false;
  }
  return true;
}

bool IsZeroGid(absl::string_view gid) {
  for (char c : gid) {
    if (c != '0' && c != ':') return false;
  }
  return true;
}

}  // namespace

SysfsNicDiscovery::SysfsNicDiscovery(std::string sysfs_root, std::string counter_source,
                                     int full_refresh_every)
    : root_(std::move(sysfs_root)),
      counter_source_(std::move(counter_source)),
      full_refresh_every_(full_refresh_every < 1 ? 1 : full_refresh_every) {}

SysfsNicDiscovery::~SysfsNicDiscovery() {
  for (auto& [name, cached] : cache_) CloseFds(&cached);
}

void SysfsNicDiscovery::CloseFds(Cached* cached) {
  for (CachedPort& p : cached->ports) {
    if (p.state_fd >= 0) close(p.state_fd);
    if (p.rate_fd >= 0) close(p.rate_fd);
    p = CachedPort();
  }
  cached->ports.clear();
}

void SysfsNicDiscovery::OpenPortFds(const std::string& name, Cached* cached) {
  const std::string dir = root_ + "/class/infiniband/" + name + "/ports/";
  for (const v1::NicPort& p : cached->device.ports()) {
    CachedPort cp;
    const std::string pdir = absl::StrCat(dir, p.port());
    cp.state_fd = open((pdir + "/state").c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    cp.rate_fd = open((pdir + "/rate").c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    cached->ports.push_back(cp);
  }
}

namespace {

// pread at offset 0 of a small attribute; false on error or a removed file.
bool PreadText(int fd, bool check_unlinked, std::string* text) {
  if (fd < 0) return false;
  char buf[128];
  const ssize_t n = pread(fd, buf, sizeof(buf), 0);
  if (n < 0) return false;
  if (check_unlinked) {
    struct stat st;
    if (fstat(fd, &st) != 0 || st.st_nlink == 0) return false;
  }
  text->assign(buf, static_cast<size_t>(n));
  while (!text->empty() && (text->back() == '\n' || text->back() == ' ')) text->pop_back();
  return true;
}

std::string StateName(std::string state) {
  if (size_t colon = state.find(": "); colon != std::string::npos) state = state.substr(colon + 2);
  return state;
}

}  // namespace

bool SysfsNicDiscovery::RefreshPorts(Cached* cached) {
  if (cached->ports.size() != static_cast<size_t>(cached->device.ports_size())) return false;
  std::string text;
  for (size_t i = 0; i < cached->ports.size(); ++i) {
    const CachedPort& cp = cached->ports[i];
    v1::NicPort* port = cached->device.mutable_ports(static_cast<int>(i));
    if (!PreadText(cp.state_fd, i == 0, &text)) return false;
    const std::string state = StateName(text);
    if (state != port->state()) return false;  // a state change: read everything again
    if (!PreadText(cp.rate_fd, false, &text)) return false;
    absl::StatusOr<uint64_t> mbps = ParseRateMbps(text);
    port->set_speed_mbps(mbps.ok() ? *mbps : 0);
  }
  return true;
}

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
  if (!names.ok()) names = std::vector<std::string>();
  for (auto it = cache_.begin(); it != cache_.end();) {
    if (std::find(names->begin(), names->end(), it->first) == names->end()) {
      CloseFds(&it->second);
      it = cache_.erase(it);
    } else {
      ++it;
    }
  }
  for (const std::string& name : *names) {
    auto it = cache_.find(name);
    if (it != cache_.end() && ++it->second.calls_since_full < full_refresh_every_ &&
        RefreshPorts(&it->second)) {
      it->second.device.set_counter_source(counter_source_);
      devices.push_back(it->second.device);
      continue;
    }
    if (it != cache_.end()) {
      CloseFds(&it->second);
      cache_.erase(it);
    }
    absl::StatusOr<v1::NicDevice> dev = ReadDevice(name);
    if (!dev.ok()) {
      LogWarning("skipping RDMA device", {{"device", name}, {"error", dev.status().ToString()}});
      continue;
    }
    devices.push_back(*dev);
    if (full_refresh_every_ > 1) {
      Cached& cached = cache_[name];
      cached.device = *std::move(dev);
      OpenPortFds(name, &cached);
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
  std::string driver;
  if (absl::StartsWith(name, "rxe") || absl::StartsWith(name, "siw")) {
    // Software RDMA over a netdev. Depending on the kernel, `device` is absent
    // or points at the netdev's parent (a virtio or PCI function that is not
    // the RDMA device): report the software driver and no PCI identity.
    driver = name.substr(0, 3);
    d.set_vendor(driver == "rxe" ? "Soft-RoCE" : "Soft-iWARP");
    d.set_model(driver);
  } else if (const std::string link = SymlinkBasename(pci); IsPciAddress(link)) {
    d.set_pci_address(link);
    driver = SymlinkBasename(pci + "/driver");
    const std::string vendor_id = OrEmpty(ReadSysfsString(pci + "/vendor"));
    d.set_vendor(PciVendorName(vendor_id));
    if (d.vendor().empty()) d.set_vendor(vendor_id);
    std::string model = OrEmpty(ReadSysfsString(dir + "/hca_type"));
    if (model.empty()) model = OrEmpty(ReadSysfsString(pci + "/device"));
    d.set_model(model);
  } else if (!link.empty()) {
    driver = SymlinkBasename(pci + "/driver");
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
