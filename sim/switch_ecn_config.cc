#include "sim/switch_ecn_config.h"

#include "sim/fabric.h"

namespace rocetune::sim {

absl::StatusOr<v1::EcnSettings> FabricEcnConfig::Read() { return fabric_->Ecn(); }

absl::Status FabricEcnConfig::Write(const v1::EcnSettings& settings) {
  return fabric_->SetEcn(settings);
}

}  // namespace rocetune::sim
