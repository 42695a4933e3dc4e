#ifndef ROCETUNE_AGENT_HOST_NIC_DISCOVERY_H_
#define ROCETUNE_AGENT_HOST_NIC_DISCOVERY_H_

#include <vector>

#include "absl/status/statusor.h"
#include "rocetune/v1/agent.pb.h"

namespace rocetune {

// Hardware seam: the host's RDMA devices. Real implementation walks
// <sysfs_root>/class/infiniband; the simulator provides its own. A host with no
// RDMA device returns an empty list, not an error.
class NicDiscovery {
 public:
  virtual ~NicDiscovery() = default;
  virtual absl::StatusOr<std::vector<v1::NicDevice>> Discover() = 0;
};

}  // namespace rocetune

#endif  // ROCETUNE_AGENT_HOST_NIC_DISCOVERY_H_
