// The RDMA netlink reply parsers (statistics and device dumps).
#include <cstddef>
#include <cstdint>
#include <vector>

#include "agent/host/netlink_counter_source.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<rocetune::RdmaNlPortStats> stats;
  (void)rocetune::ParseRdmaStatReply(data, size, &stats);
  std::vector<rocetune::RdmaNlDevice> devs;
  (void)rocetune::ParseRdmaDevReply(data, size, &devs);
  return 0;
}
