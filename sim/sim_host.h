#ifndef ROCETUNE_SIM_SIM_HOST_H_
#define ROCETUNE_SIM_SIM_HOST_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "agent/host/cc_param_store.h"
#include "agent/host/counter_source.h"
#include "agent/host/nic_discovery.h"
#include "agent/host/pfc_config.h"
#include "agent/probe/prober.h"
#include "sim/fabric.h"

namespace rocetune::sim {

// One simulated host as the agent sees it: an mlx5-like NIC "mlx5_0" (port 1,
// netdev "eth0") whose counters, DCQCN parameters, PFC state and probes come
// from the Fabric. Every view is thread-safe (agents run on their own threads
// while the fabric steps on another).
//
// Counters (device "mlx5_0", port 1): per port (priority -1) "tx_bytes",
// "rx_bytes", "tx_packets", "rx_packets", "cnp_sent", "cnp_handled",
// "ecn_marked_packets"; per priority 0..7 "rx_pfc_pause_frames",
// "tx_pfc_pause_frames", "rx_pfc_pause_duration_us", "tx_pfc_pause_duration_us".
class SimHost {
 public:
  static constexpr char kDevice[] = "mlx5_0";
  static constexpr char kNetdev[] = "eth0";

  // REQUIRES: `fabric` outlives this object; 0 <= host < fabric->host_count().
  SimHost(Fabric* fabric, int host);
  ~SimHost();

  const std::string& host_id() const { return host_id_; }
  NicDiscovery* discovery() { return discovery_.get(); }
  CounterSource* counters() { return counters_.get(); }
  CcParamStore* cc() { return cc_.get(); }
  PfcConfig* pfc() { return pfc_.get(); }
  Prober* prober() { return prober_.get(); }

 private:
  class Discovery;
  class Counters;
  class Cc;
  class Pfc;
  class Probes;

  std::string host_id_;
  std::unique_ptr<NicDiscovery> discovery_;
  std::unique_ptr<CounterSource> counters_;
  std::unique_ptr<CcParamStore> cc_;
  std::unique_ptr<PfcConfig> pfc_;
  std::unique_ptr<Prober> prober_;
};

}  // namespace rocetune::sim

#endif  // ROCETUNE_SIM_SIM_HOST_H_
