#ifndef ROCETUNE_AGENT_REAL_HOST_H_
#define ROCETUNE_AGENT_REAL_HOST_H_

#include <map>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "agent/agent.h"
#include "agent/host/cc_param_store.h"
#include "agent/host/counter_source.h"
#include "agent/host/nic_discovery.h"
#include "agent/host/pfc_config.h"

namespace rocetune {

struct RealHostOptions {
  std::string sysfs_root = "/sys";
  std::string debugfs_root = "/sys/kernel/debug";
  // "auto" (netlink, falling back to sysfs), "netlink" or "sysfs".
  std::string counter_source = "auto";
  // Use the running kernel's netdevs: ethtool statistics (PFC pause counters,
  // storm events, discards) and dcbnl PFC. Off when sysfs_root is a fixture tree,
  // whose netdevs do not exist in this kernel.
  bool kernel_netdevs = true;
  // Fault-injection tests only: a pause before each DCQCN parameter write,
  // so that a kill can land between two writes of one apply. 0 = none.
  absl::Duration write_delay = absl::ZeroDuration();
};

// A CcParamStore that picks the layout (OFED sysfs or upstream debugfs) per
// device on first use, as devices on one host may differ.
class PerDeviceCcParamStore : public CcParamStore {
 public:
  PerDeviceCcParamStore(std::string sysfs_root, std::string debugfs_root,
                        absl::Duration write_delay = absl::ZeroDuration());
  std::string layout() const override { return "per_device"; }
  std::string LayoutFor(const std::string& device);
  absl::StatusOr<v1::DeviceParameters> Read(const std::string& device) override;
  absl::Status Write(const std::string& device, const std::string& name, int64_t value) override;

 private:
  absl::StatusOr<CcParamStore*> StoreFor(const std::string& device);
  std::string sysfs_root_, debugfs_root_;
  absl::Duration write_delay_;
  absl::Mutex mu_;
  std::map<std::string, std::unique_ptr<CcParamStore>> stores_ ABSL_GUARDED_BY(mu_);
};

// The seams of a real host: sysfs discovery (annotated with each device's counter
// source and DCQCN layout), counters, DCQCN stores, PFC, real clock.
class RealHost : public NicDiscovery {
 public:
  static absl::StatusOr<std::unique_ptr<RealHost>> Create(const RealHostOptions& options);

  absl::StatusOr<std::vector<v1::NicDevice>> Discover() override;
  HostSeams seams();
  CounterSource* counters() { return counters_.get(); }

 private:
  RealHost() = default;
  RealHostOptions options_;
  std::unique_ptr<NicDiscovery> discovery_;
  std::unique_ptr<CounterSource> counters_;
  std::unique_ptr<PerDeviceCcParamStore> cc_;
  std::unique_ptr<PfcConfig> pfc_;
};

}  // namespace rocetune

#endif  // ROCETUNE_AGENT_REAL_HOST_H_
