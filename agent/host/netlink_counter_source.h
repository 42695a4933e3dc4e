#ifndef ROCETUNE_AGENT_HOST_NETLINK_COUNTER_SOURCE_H_
#define ROCETUNE_AGENT_HOST_NETLINK_COUNTER_SOURCE_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "agent/host/counter_source.h"

struct nl_sock;

namespace rocetune {

// One RDMA device as listed by RDMA_NLDEV_CMD_GET.
struct RdmaNlDevice {
  uint32_t index = 0;
  std::string name;
  uint32_t ports = 0;  // PORT_INDEX in a GET reply is the number of ports
};

// One RDMA_NLDEV_CMD_STAT_GET answer: a port's hw counters.
struct RdmaNlPortStats {
  uint32_t dev_index = 0;
  std::string dev_name;
  uint32_t port = 0;
  std::vector<std::pair<std::string, uint64_t>> counters;  // name, value
};

// Pure parsers of a buffer as received from a NETLINK_RDMA socket (one or more
// nlmsghdr-framed messages). Messages of other types and NLMSG_DONE / ACKs are
// skipped; an NLMSG_ERROR with a non-zero error becomes a status carrying the
// errno (kUnavailable for ENODEV/EOPNOTSUPP, kPermissionDenied for EPERM,
// kInternal otherwise). Truncated or malformed messages / attributes give
// kInvalidArgument naming what was wrong; nothing is appended then.
absl::Status ParseRdmaStatReply(const uint8_t* data, size_t len, std::vector<RdmaNlPortStats>* out);
absl::Status ParseRdmaDevReply(const uint8_t* data, size_t len, std::vector<RdmaNlDevice>* out);

// CounterSource over RDMA netlink statistics: one STAT_GET request and one
// reply per port (no NLM_F_ACK), covering the default counters and the enabled
// optional ones (which sysfs never shows). Names are mapped with
// counter_names.h MapHwCounter; the vendor comes from
// <sysfs_root>/class/infiniband/<dev>/device/driver or the device name.
// Holds one NETLINK_RDMA socket (libnl-3). Not thread-safe.
class NetlinkCounterSource : public CounterSource {
 public:
  // Opens the socket and lists the devices. kUnavailable when the kernel has
  // no RDMA netlink (no RDMA core: socket() fails with EPROTONOSUPPORT) or
  // does not answer.
  static absl::StatusOr<std::unique_ptr<NetlinkCounterSource>> Create(std::string sysfs_root);
  ~NetlinkCounterSource() override;

  std::string name() const override { return "netlink"; }
  absl::Status Collect(std::vector<CounterValue>* out) override;
  // Fills the buffer's kept elements in place, with key ids: while a port's
  // reply carries the same names in the same order, a round maps nothing.
  absl::Status CollectInto(CounterBuffer* out) override;

  const std::vector<RdmaNlDevice>& devices() const { return devices_; }

 private:
  NetlinkCounterSource(std::string sysfs_root, nl_sock* sock)
      : root_(std::move(sysfs_root)), sock_(sock) {}
  absl::Status ListDevices();
  absl::StatusOr<RdmaNlPortStats> QueryPort(uint32_t dev_index, uint32_t port);
  // Receives until `done` says the reply is complete. REQUIRES: a request was sent.
  absl::Status Receive(const std::function<absl::Status(const uint8_t*, size_t, bool*)>& handle);

  // The mapping of one port's STAT_GET reply (names in reply order), kept
  // while the kernel answers with the same names in the same order.
  struct PortPlan {
    std::vector<std::string> vendor_names;
    std::vector<CounterKey> keys;
    std::vector<uint64_t> multipliers;
    std::vector<uint8_t> widths;
    uint64_t first_key_id = 0;  // keys[j] has id first_key_id + j
  };
  // The plan for devices_[device] port `port` matching `stats`, remapped when
  // the reply's names changed.
  const PortPlan& PlanFor(size_t device, uint32_t port, const RdmaNlPortStats& stats);
  // Collect / CollectInto: `next(plan, j)` gives the element for entry j.
  template <typename Next>
  absl::Status CollectWith(Next next);

  std::string root_;
  nl_sock* sock_;
  std::vector<std::vector<PortPlan>> plans_;  // [device][port - 1]; reset by ListDevices
  std::vector<RdmaNlDevice> devices_;
  std::vector<int> vendors_;  // CounterVendor per device, parallel to devices_
};

}  // namespace rocetune

#endif  // ROCETUNE_AGENT_HOST_NETLINK_COUNTER_SOURCE_H_
