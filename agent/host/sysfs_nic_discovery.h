#ifndef ROCETUNE_AGENT_HOST_SYSFS_NIC_DISCOVERY_H_
#define ROCETUNE_AGENT_HOST_SYSFS_NIC_DISCOVERY_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "agent/host/nic_discovery.h"
#include "rocetune/v1/agent.pb.h"

namespace rocetune {

// NicDiscovery over <sysfs_root>/class/infiniband, laid out as on a real host:
//   class/infiniband/<dev>/{fw_ver,node_guid,hca_type?,device -> PCI function,
//                           ports/<p>/{link_layer,state,rate,gids/<i>,gid_attrs/ndevs/<i>}}
//   <PCI function>/{vendor,device,driver -> .../drivers/<name>,net/<if>}
// Per device: name, driver (basename of device/driver: mlx5_core, bnxt_en,
// ice for irdma; "rxe" / "siw" for the software devices, whose `device` link is
// absent or names the netdev's parent), vendor (from the PCI vendor id), model
// (hca_type, else the PCI device id), firmware (fw_ver), node GUID, PCI address
// (basename of the device link when it is a BDF), and per port: link layer, state
// ("ACTIVE" from "4: ACTIVE"), speed in Mb/s (from "100 Gb/sec (4X EDR)"),
// netdev (gid_attrs/ndevs/<first readable>, else device/net/<first>, else the
// `parent` file rxe has), and the non-zero GIDs in index order.
// A device that vanishes or cannot be read mid-walk is skipped with a log line.
//
// Cost: a device is read in full when first seen and then every
// `full_refresh_every` calls; in between, a call lists class/infiniband and
// re-reads only each port's state and rate through descriptors kept open
// (pread at offset 0; sysfs regenerates the text on every such read). A
// device whose node was removed (pread fails, or the file is unlinked) is
// read in full again at once. GIDs, netdev, firmware and the rest are thus
// at most `full_refresh_every` calls old.
// A host without class/infiniband or with no device in it yields an empty list
// and one log line per process (LogOnce).
class SysfsNicDiscovery : public NicDiscovery {
 public:
  // `sysfs_root` is the directory that plays /sys. `counter_source` is copied
  // into every NicDevice.counter_source ("" leaves it empty).
  explicit SysfsNicDiscovery(std::string sysfs_root, std::string counter_source = "",
                             int full_refresh_every = 30);
  ~SysfsNicDiscovery() override;
  SysfsNicDiscovery(const SysfsNicDiscovery&) = delete;
  SysfsNicDiscovery& operator=(const SysfsNicDiscovery&) = delete;

  // kNotFound when sysfs_root itself does not exist (a misconfigured flag).
  absl::StatusOr<std::vector<v1::NicDevice>> Discover() override;

  void set_counter_source(std::string name) { counter_source_ = std::move(name); }

  // Parses sysfs `rate` text ("100 Gb/sec (4X EDR)", "2.5 Gb/sec (1X SDR)") to
  // Mb/s. kInvalidArgument for anything else.
  static absl::StatusOr<uint64_t> ParseRateMbps(const std::string& rate);

 private:
  struct CachedPort {
    int state_fd = -1;
    int rate_fd = -1;
  };
  struct Cached {
    v1::NicDevice device;
    std::vector<CachedPort> ports;  // parallel to device.ports()
    int calls_since_full = 0;
  };

  absl::StatusOr<v1::NicDevice> ReadDevice(const std::string& name);
  void OpenPortFds(const std::string& name, Cached* cached);
  // Re-reads state and rate; false when the device must be read in full.
  bool RefreshPorts(Cached* cached);
  static void CloseFds(Cached* cached);

  std::string root_;
  std::string counter_source_;
  int full_refresh_every_;
  std::map<std::string, Cached> cache_;
};

}  // namespace rocetune

#endif  // ROCETUNE_AGENT_HOST_SYSFS_NIC_DISCOVERY_H_
