#ifndef ROCETUNE_SIM_FABRIC_INTERNAL_H_
#define ROCETUNE_SIM_FABRIC_INTERNAL_H_

// Constants and conversions shared by the files that implement Fabric (one per
// role: topology, traffic, queues, reaction, probes, summary). Not part of the
// public API.

#include <cstdint>
#include <limits>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "rocetune/v1/scenario.pb.h"

namespace rocetune::sim::fabric_internal {

inline constexpr double kInf = std::numeric_limits<double>::infinity();
inline constexpr double kEps = 1e-9;
// Bytes below which a flow counts as fully sent or delivered (floating-point
// dust from splitting segments, not data).
inline constexpr double kByteDust = 1e-3;

// kInvalidArgument naming the scenario field.
inline absl::Status Invalid(const std::string& field, const std::string& why) {
  return absl::InvalidArgumentError(absl::StrCat("scenario: ", field, ": ", why));
}

// Microseconds to nanoseconds, saturating (scenario times are untrusted doubles).
inline int64_t UsToNs(double us) {
  if (!(us > 0)) return 0;
  return us >= 4e15 ? int64_t{4000000000000000000} : static_cast<int64_t>(us * 1000);
}

// A priority field where 0 means the default data priority 3.
inline int PrioOr3(uint32_t p) { return p == 0 ? 3 : static_cast<int>(p); }

// The ToRs' own marking: the scenario's `ecn` with `tor_ecn`'s nonzero
// fields (and `disabled`) over it.
inline v1::EcnSettings TorEcnOf(const v1::Scenario& s) {
  v1::EcnSettings out = s.ecn();
  const v1::EcnSettings& over = s.tor_ecn();
  if (over.kmin_bytes() > 0) out.set_kmin_bytes(over.kmin_bytes());
  if (over.kmax_bytes() > 0) out.set_kmax_bytes(over.kmax_bytes());
  if (over.pmax() > 0) out.set_pmax(over.pmax());
  if (over.disabled()) out.set_disabled(true);
  return out;
}

}  // namespace rocetune::sim::fabric_internal

#endif  // ROCETUNE_SIM_FABRIC_INTERNAL_H_
