#ifndef ROCETUNE_SIM_SWITCH_ECN_CONFIG_H_
#define ROCETUNE_SIM_SWITCH_ECN_CONFIG_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "rocetune/v1/scenario.pb.h"

namespace rocetune::sim {

class Fabric;

// The switch-side ECN marking thresholds (Kmin, Kmax, Pmax) of the simulated
// fabric, the knob a controller may tune besides the NIC parameters.
class SwitchEcnConfig {
 public:
  virtual ~SwitchEcnConfig() = default;
  virtual absl::StatusOr<v1::EcnSettings> Read() = 0;
  // kInvalidArgument for pmax outside [0, 1] or kmin above kmax (nothing changes).
  virtual absl::Status Write(const v1::EcnSettings& settings) = 0;
};

// Every switch of one Fabric. Thread-safe; a write takes effect at the fabric's
// next synchronisation point.
class FabricEcnConfig : public SwitchEcnConfig {
 public:
  // REQUIRES: `fabric` outlives this object.
  explicit FabricEcnConfig(Fabric* fabric) : fabric_(fabric) {}
  absl::StatusOr<v1::EcnSettings> Read() override;
  absl::Status Write(const v1::EcnSettings& settings) override;

 private:
  Fabric* fabric_;
};

}  // namespace rocetune::sim

#endif  // ROCETUNE_SIM_SWITCH_ECN_CONFIG_H_
