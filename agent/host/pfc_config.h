#ifndef ROCETUNE_AGENT_HOST_PFC_CONFIG_H_
#define ROCETUNE_AGENT_HOST_PFC_CONFIG_H_

#include <array>
#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "rocetune/v1/params.pb.h"

namespace rocetune {

struct PfcState {
  uint8_t pfc_cap = 0;                            // number of TCs that may have PFC at once
  uint8_t enable_mask = 0;                        // bit p = priority p
  uint16_t delay = 0;                             // mlx5: cable length in metres
  std::array<uint64_t, 8> requests{};             // PFC frames sent per priority
  std::array<uint64_t, 8> indications{};          // PFC frames received per priority
  std::optional<uint16_t> prevention_timeout_ms;  // unset: driver lacks the tunable
};

// Hardware seam: per-priority PFC state of one netdev. Real implementation:
// dcbnl (DCB_CMD_IEEE_GET / _SET) through libnl plus the ethtool
// pfc-prevention-tout tunable; the simulator provides its own.
class PfcConfig {
 public:
  virtual ~PfcConfig() = default;
  virtual absl::StatusOr<PfcState> Read(const std::string& netdev) = 0;
  // On mlx5 a change of enable_mask flaps the link: callers treat it as disruptive.
  virtual absl::Status Write(const std::string& netdev, const v1::PfcSettings& settings) = 0;
};

}  // namespace rocetune

#endif  // ROCETUNE_AGENT_HOST_PFC_CONFIG_H_
