#include "sim/ecn_marker.h"

namespace rocetune::sim {

EcnMarker EcnMarker::FromSettings(const v1::EcnSettings& ecn) {
  if (ecn.disabled()) return EcnMarker();
  return EcnMarker(static_cast<double>(ecn.kmin_bytes()), static_cast<double>(ecn.kmax_bytes()),
                   ecn.pmax());
}

}  // namespace rocetune::sim
