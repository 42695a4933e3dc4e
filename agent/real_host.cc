#include "agent/real_host.h"

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "agent/host/cc_store_detect.h"
#include "agent/host/counter_source_group.h"
#include "agent/host/counter_source_selector.h"
#include "agent/host/dcbnl_pfc_config.h"
#include "agent/host/ethtool_stats.h"
#include "agent/host/sysfs_nic_discovery.h"
#include "daemon/clock.h"

namespace rocetune {

PerDeviceCcParamStore::PerDeviceCcParamStore(std::string sysfs_root, std::string debugfs_root,
                                             absl::Duration write_delay)
    : sysfs_root_(std::move(sysfs_root)),
      debugfs_root_(std::move(debugfs_root)),
      write_delay_(write_delay) {}

std::string PerDeviceCcParamStore::LayoutFor(const std::string& device) {
  return DetectCcParamLayout(sysfs_root_, debugfs_root_, device);
}

absl::StatusOr<CcParamStore*> PerDeviceCcParamStore::StoreFor(const std::string& device) {
  absl::MutexLock lock(&mu_);
  auto it = stores_.find(device);
  if (it != stores_.end()) return it->second.get();
  absl::StatusOr<std::unique_ptr<CcParamStore>> store =
      DetectCcParamStore(sysfs_root_, debugfs_root_, device);
  if (!store.ok()) return store.status();
  CcParamStore* raw = store->get();
  stores_[device] = std::move(*store);
  return raw;
}

absl::StatusOr<v1::DeviceParameters> PerDeviceCcParamStore::Read(const std::string& device) {
  absl::StatusOr<CcParamStore*> store = StoreFor(device);
  if (!store.ok()) return store.status();
  return (*store)->Read(device);
}

absl::Status PerDeviceCcParamStore::Write(const std::string& device, const std::string& name,
                                          int64_t value) {
  absl::StatusOr<CcParamStore*> store = StoreFor(device);
  if (!store.ok()) return store.status();
  if (write_delay_ > absl::ZeroDuration()) absl::SleepFor(write_delay_);
  return (*store)->Write(device, name, value);
}

absl::StatusOr<std::unique_ptr<RealHost>> RealHost::Create(const RealHostOptions& options) {
  absl::StatusOr<CounterSourcePreference> prefer =
      ParseCounterSourcePreference(options.counter_source);
  if (!prefer.ok()) return prefer.status();
  auto host = std::unique_ptr<RealHost>(new RealHost());
  host->options_ = options;
  std::unique_ptr<CounterSource> rdma = MakeCounterSource(options.sysfs_root, *prefer);
  std::string source_name = rdma->name();
  host->discovery_ = std::make_unique<SysfsNicDiscovery>(options.sysfs_root, source_name);
  if (options.kernel_netdevs) {
    // PFC pause frames and durations per priority come only from ethtool stats.
    absl::StatusOr<std::vector<v1::NicDevice>> devices = host->discovery_->Discover();
    std::vector<EthtoolTarget> targets;
    if (devices.ok()) targets = EthtoolTargetsFromInventory(*devices);
    if (!targets.empty()) {
      std::vector<std::unique_ptr<CounterSource>> members;
      members.push_back(std::move(rdma));
      members.push_back(std::make_unique<EthtoolCounterSource>(std::move(targets)));
      rdma = std::make_unique<CounterSourceGroup>(source_name + "+ethtool", std::move(members));
    }
    host->pfc_ = std::make_unique<DcbnlPfcConfig>();
  }
  host->counters_ = std::move(rdma);
  host->cc_ = std::make_unique<PerDeviceCcParamStore>(options.sysfs_root, options.debugfs_root,
                                                      options.write_delay);
  return host;
}

absl::StatusOr<std::vector<v1::NicDevice>> RealHost::Discover() {
  absl::StatusOr<std::vector<v1::NicDevice>> devices = discovery_->Discover();
  if (!devices.ok()) return devices;
  for (auto& d : *devices) d.set_cc_param_layout(cc_->LayoutFor(d.name()));
  return devices;
}

HostSeams RealHost::seams() {
  HostSeams s;
  s.discovery = this;
  s.counters = counters_.get();
  s.cc = cc_.get();
  s.pfc = pfc_.get();
  s.clock = Clock::Real();
  return s;
}

}  // namespace rocetune
