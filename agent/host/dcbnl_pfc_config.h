#ifndef ROCETUNE_AGENT_HOST_DCBNL_PFC_CONFIG_H_
#define ROCETUNE_AGENT_HOST_DCBNL_PFC_CONFIG_H_

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "agent/host/pfc_config.h"

namespace rocetune {

// ---- dcbnl message encoding (pure; docs/nic-facts.md 4.1) ------------------------

// RTM_GETDCB / DCB_CMD_IEEE_GET for `netdev` (NLM_F_REQUEST | NLM_F_ACK).
// REQUIRES: netdev is a non-empty interface name shorter than IFNAMSIZ.
std::vector<uint8_t> BuildDcbIeeeGetRequest(const std::string& netdev, uint32_t seq);

// RTM_SETDCB / DCB_CMD_IEEE_SET carrying the whole 136-byte struct ieee_pfc built
// from `state` (pfc_cap, enable_mask -> pfc_en, delay; mbc 0, requests and
// indications zero) nested in DCB_ATTR_IEEE, as iproute2 `dcb pfc set` does.
std::vector<uint8_t> BuildDcbIeeeSetPfcRequest(const std::string& netdev, const PfcState& state,
                                               uint32_t seq);

// What the replies to one request said so far. Replies may span several datagrams.
struct DcbReply {
  bool done = false;            // the ACK (NLMSG_ERROR 0), an error or NLMSG_DONE was seen
  int error = 0;                // negative errno: from NLMSG_ERROR, or the i8 a SET reply carries
  bool got_message = false;     // an RTM_GETDCB / RTM_SETDCB reply was seen
  std::optional<PfcState> pfc;  // DCB_ATTR_IEEE / DCB_ATTR_IEEE_PFC of a GET reply
};

// Folds one received datagram into `reply`; messages with another sequence
// number are skipped. kDataLoss describing the defect on a malformed datagram
// (truncated header, bad lengths, short ieee_pfc).
absl::Status ParseDcbReplyDatagram(absl::Span<const uint8_t> datagram, uint32_t seq,
                                   DcbReply* reply);

// ---- the real PfcConfig ------------------------------------------------------

// PFC through dcbnl (NETLINK_ROUTE, libnl-3) plus the ethtool
// pfc-prevention-tout tunable (ETHTOOL_GTUNABLE / ETHTOOL_STUNABLE).
// Errors name the netdev: kUnimplemented when the netdev has no DCB support
// (dcbnl answers EOPNOTSUPP, e.g. `lo`), kUnavailable when it does not exist,
// kPermissionDenied without CAP_NET_ADMIN for writes.
class DcbnlPfcConfig : public PfcConfig {
 public:
  explicit DcbnlPfcConfig(absl::Duration timeout = absl::Seconds(2));

  // prevention_timeout_ms is unset when the driver lacks the tunable.
  absl::StatusOr<PfcState> Read(const std::string& netdev) override;
  // Read-modify-write: sends IEEE_SET only when pfc_en or delay change (on mlx5
  // a pfc_en change flaps the link); sets the tunable only when asked and different.
  absl::Status Write(const std::string& netdev, const v1::PfcSettings& settings) override;

 private:
  absl::StatusOr<DcbReply> Transact(const std::string& netdev, bool set, const PfcState* state);
  absl::Duration timeout_;
  std::atomic<uint32_t> seq_{1};
};

// ETHTOOL_GTUNABLE pfc-prevention-tout on `netdev`, in ms (0xffff = auto).
// kUnimplemented when the driver lacks it.
absl::StatusOr<uint16_t> ReadPfcPreventionTimeout(const std::string& netdev);
absl::Status WritePfcPreventionTimeout(const std::string& netdev, uint16_t ms);

}  // namespace rocetune

#endif  // ROCETUNE_AGENT_HOST_DCBNL_PFC_CONFIG_H_
