#include "agent/host/dcbnl_pfc_config.h"

#include <errno.h>
#include <linux/dcbnl.h>
#include <linux/ethtool.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/sockios.h>
#include <net/if.h>
#include <netlink/attr.h>
#include <netlink/msg.h>
#include <netlink/netlink.h>
#include <netlink/socket.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cstring>
#include <memory>

#include "absl/strings/str_cat.h"
#include "agent/host/param_file_io.h"
#include "daemon/logging.h"

namespace rocetune {
namespace {

static_assert(sizeof(struct ieee_pfc) == 136, "struct ieee_pfc layout (docs/nic-facts.md 4.1)");

std::vector<uint8_t> Build(int type, const std::string& netdev, uint32_t seq,
                           const struct ieee_pfc* pfc) {
  std::unique_ptr<nl_msg, void (*)(nl_msg*)> msg(
      nlmsg_alloc_simple(type, NLM_F_REQUEST | NLM_F_ACK), nlmsg_free);
  if (msg == nullptr) return {};
  struct dcbmsg dcb = {};
  dcb.dcb_family = AF_UNSPEC;
  dcb.cmd = pfc == nullptr ? DCB_CMD_IEEE_GET : DCB_CMD_IEEE_SET;
  if (nlmsg_append(msg.get(), &dcb, sizeof(dcb), NLMSG_ALIGNTO) < 0) return {};
  if (nla_put_string(msg.get(), DCB_ATTR_IFNAME, netdev.c_str()) < 0) return {};
  if (pfc != nullptr) {
    struct nlattr* nest = nla_nest_start(msg.get(), DCB_ATTR_IEEE);
    if (nest == nullptr) return {};
    if (nla_put(msg.get(), DCB_ATTR_IEEE_PFC, sizeof(*pfc), pfc) < 0) return {};
    nla_nest_end(msg.get(), nest);
  }
  struct nlmsghdr* hdr = nlmsg_hdr(msg.get());
  hdr->nlmsg_seq = seq;
  const uint8_t* bytes = reinterpret_cast<const uint8_t*>(hdr);
  return std::vector<uint8_t>(bytes, bytes + hdr->nlmsg_len);
}

absl::Status Malformed(const std::string& what) {
  return absl::DataLossError(absl::StrCat("malformed dcbnl reply: ", what));
}

absl::Status DcbError(int err, const std::string& netdev, const char* op) {
  const int e = err < 0 ? -err : err;
  const std::string what = absl::StrCat("dcbnl ", op, " on netdev ", netdev);
  if (e == EOPNOTSUPP) {
    return absl::UnimplementedError(
        absl::StrCat(what, ": netdev ", netdev, " does not support DCB: ", strerror(e)));
  }
  if (e == ENODEV) {
    return absl::UnavailableError(absl::StrCat(what, ": no such netdev: ", strerror(e)));
  }
  return ErrnoToStatus(e, what);
}

absl::Status CheckName(const std::string& netdev) {
  if (netdev.empty() || netdev.size() >= IFNAMSIZ || netdev.find('/') != std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat("invalid netdev name \"", netdev, "\""));
  }
  return absl::OkStatus();
}

// struct ethtool_tunable followed by its u16 payload (data[] is a flexible array).
struct TunableReq {
  alignas(8) unsigned char bytes[sizeof(struct ethtool_tunable) + 8] = {};
  struct ethtool_tunable* t() {
    return reinterpret_cast<struct ethtool_tunable*>(bytes);
  }
  uint16_t value() const {
    uint16_t v;
    memcpy(&v, bytes + sizeof(struct ethtool_tunable), sizeof(v));
    return v;
  }
  void set_value(uint16_t v) { memcpy(bytes + sizeof(struct ethtool_tunable), &v, sizeof(v)); }
};

absl::Status TunableIoctl(const std::string& netdev, TunableReq* req, const char* op) {
  if (absl::Status st = CheckName(netdev); !st.ok()) return st;
  int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return ErrnoToStatus(errno, "socket(AF_INET) for ethtool");
  struct ifreq ifr = {};
  memcpy(ifr.ifr_name, netdev.c_str(), netdev.size());
  ifr.ifr_data = reinterpret_cast<char*>(req->bytes);
  int rc = ioctl(fd, SIOCETHTOOL, &ifr);
  int err = errno;
  close(fd);
  if (rc == 0) return absl::OkStatus();
  const std::string what = absl::StrCat("ethtool ", op, " pfc-prevention-tout on netdev ", netdev);
  if (err == EOPNOTSUPP || err == EINVAL) {
    return absl::UnimplementedError(
        absl::StrCat(what, ": not supported by the driver: ", strerror(err), " (errno ", err, ")"));
  }
  if (err == ENODEV) return absl::UnavailableError(absl::StrCat(what, ": no such netdev"));
  return ErrnoToStatus(err, what);
}

}  // namespace

std::vector<uint8_t> BuildDcbIeeeGetRequest(const std::string& netdev, uint32_t seq) {
  return Build(RTM_GETDCB, netdev, seq, nullptr);
}

std::vector<uint8_t> BuildDcbIeeeSetPfcRequest(const std::string& netdev, const PfcState& state,
                                               uint32_t seq) {
  struct ieee_pfc pfc = {};
  pfc.pfc_cap = state.pfc_cap;
  pfc.pfc_en = state.enable_mask;
  pfc.mbc = 0;
  pfc.delay = state.delay;
  return Build(RTM_SETDCB, netdev, seq, &pfc);
}

absl::Status ParseDcbReplyDatagram(absl::Span<const uint8_t> datagram, uint32_t seq,
                                   DcbReply* reply) {
  if (datagram.size() < sizeof(struct nlmsghdr)) {
    return Malformed(absl::StrCat(datagram.size(), " bytes, shorter than a netlink header"));
  }
  // Copy into aligned storage: libnl walks headers and attributes in place.
  std::vector<uint64_t> storage((datagram.size() + 7) / 8);
  memcpy(storage.data(), datagram.data(), datagram.size());
  auto* hdr = reinterpret_cast<struct nlmsghdr*>(storage.data());
  int remaining = static_cast<int>(datagram.size());
  while (remaining > 0) {
    if (!nlmsg_ok(hdr, remaining)) {
      return Malformed(absl::StrCat("message length ", hdr->nlmsg_len, " does not fit in the ",
                                    remaining, " bytes left"));
    }
    if (hdr->nlmsg_seq == seq) {
      if (hdr->nlmsg_type == NLMSG_ERROR) {
        if (hdr->nlmsg_len < NLMSG_LENGTH(sizeof(struct nlmsgerr))) {
          return Malformed("truncated NLMSG_ERROR");
        }
        const auto* err = static_cast<const struct nlmsgerr*>(nlmsg_data(hdr));
        reply->done = true;
        if (err->error != 0) reply->error = err->error;
      } else if (hdr->nlmsg_type == NLMSG_DONE) {
        reply->done = true;
      } else if (hdr->nlmsg_type == RTM_GETDCB || hdr->nlmsg_type == RTM_SETDCB) {
        if (hdr->nlmsg_len < NLMSG_LENGTH(sizeof(struct dcbmsg))) {
          return Malformed("truncated struct dcbmsg");
        }
        const auto* dcb = static_cast<const struct dcbmsg*>(nlmsg_data(hdr));
        struct nlattr* tb[DCB_ATTR_MAX + 1] = {};
        if (nlmsg_parse(hdr, sizeof(struct dcbmsg), tb, DCB_ATTR_MAX, nullptr) < 0) {
          return Malformed("bad attribute lengths");
        }
        reply->got_message = true;
        if (tb[DCB_ATTR_IEEE] == nullptr) return Malformed("no DCB_ATTR_IEEE attribute");
        if (dcb->cmd == DCB_CMD_IEEE_SET) {
          if (nla_len(tb[DCB_ATTR_IEEE]) < 1) return Malformed("empty DCB_ATTR_IEEE in SET reply");
          // Formally u8, actually an i8 holding a negative errno (iproute2 dcb.c).
          const int8_t status = static_cast<int8_t>(nla_get_u8(tb[DCB_ATTR_IEEE]));
          if (status != 0) reply->error = status;
        } else if (dcb->cmd == DCB_CMD_IEEE_GET) {
          struct nlattr* ieee[DCB_ATTR_IEEE_MAX + 1] = {};
          if (nla_parse_nested(ieee, DCB_ATTR_IEEE_MAX, tb[DCB_ATTR_IEEE], nullptr) < 0) {
            return Malformed("bad DCB_ATTR_IEEE nest");
          }
          if (ieee[DCB_ATTR_IEEE_PFC] != nullptr) {
            if (nla_len(ieee[DCB_ATTR_IEEE_PFC]) < static_cast<int>(sizeof(struct ieee_pfc))) {
              return Malformed(absl::StrCat("DCB_ATTR_IEEE_PFC is ",
                                            nla_len(ieee[DCB_ATTR_IEEE_PFC]), " bytes, want ",
                                            sizeof(struct ieee_pfc)));
            }
            struct ieee_pfc pfc;
            memcpy(&pfc, nla_data(ieee[DCB_ATTR_IEEE_PFC]), sizeof(pfc));
            PfcState state;
            state.pfc_cap = pfc.pfc_cap;
            state.enable_mask = pfc.pfc_en;
            state.delay = pfc.delay;
            for (int i = 0; i < 8; ++i) {
              state.requests[i] = pfc.requests[i];
              state.indications[i] = pfc.indications[i];
            }
            reply->pfc = state;
          }
        } else {
          return Malformed(absl::StrCat("unexpected dcb command ", static_cast<int>(dcb->cmd)));
        }
      }
    }
    hdr = nlmsg_next(hdr, &remaining);
  }
  return absl::OkStatus();
}

DcbnlPfcConfig::DcbnlPfcConfig(absl::Duration timeout) : timeout_(timeout) {}

absl::StatusOr<DcbReply> DcbnlPfcConfig::Transact(const std::string& netdev, bool set,
                                                  const PfcState* state) {
  if (absl::Status st = CheckName(netdev); !st.ok()) return st;
  const char* op = set ? "IEEE_SET" : "IEEE_GET";
  const uint32_t seq = seq_.fetch_add(1);
  std::vector<uint8_t> req =
      set ? BuildDcbIeeeSetPfcRequest(netdev, *state, seq) : BuildDcbIeeeGetRequest(netdev, seq);
  if (req.empty()) return absl::InternalError("cannot build a dcbnl request");

  std::unique_ptr<nl_sock, void (*)(nl_sock*)> sk(nl_socket_alloc(), nl_socket_free);
  if (sk == nullptr) return absl::ResourceExhaustedError("nl_socket_alloc failed");
  nl_socket_disable_seq_check(sk.get());
  int rc = nl_connect(sk.get(), NETLINK_ROUTE);
  if (rc < 0) {
    return absl::UnavailableError(
        absl::StrCat("dcbnl ", op, " on netdev ", netdev, ": netlink connect: ", nl_geterror(rc)));
  }
  struct timeval tv = absl::ToTimeval(timeout_);
  setsockopt(nl_socket_get_fd(sk.get()), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  rc = nl_sendto(sk.get(), req.data(), req.size());
  if (rc < 0) {
    return absl::UnavailableError(
        absl::StrCat("dcbnl ", op, " on netdev ", netdev, ": send: ", nl_geterror(rc)));
  }
  DcbReply reply;
  for (int i = 0; i < 16 && !reply.done; ++i) {
    unsigned char* buf = nullptr;
    struct sockaddr_nl from = {};
    int n = nl_recv(sk.get(), &from, &buf, nullptr);
    if (n <= 0) {
      free(buf);
      return absl::DeadlineExceededError(absl::StrCat(
          "dcbnl ", op, " on netdev ", netdev, ": no reply: ", n < 0 ? nl_geterror(n) : "EOF"));
    }
    absl::Status st =
        ParseDcbReplyDatagram(absl::MakeConstSpan(buf, static_cast<size_t>(n)), seq, &reply);
    free(buf);
    if (!st.ok()) {
      return absl::Status(st.code(),
                          absl::StrCat("dcbnl ", op, " on netdev ", netdev, ": ", st.message()));
    }
  }
  if (reply.error != 0) return DcbError(reply.error, netdev, op);
  return reply;
}

absl::StatusOr<PfcState> DcbnlPfcConfig::Read(const std::string& netdev) {
  absl::StatusOr<DcbReply> reply = Transact(netdev, /*set=*/false, nullptr);
  if (!reply.ok()) return reply.status();
  if (!reply->pfc.has_value()) {
    return absl::UnimplementedError(
        absl::StrCat("dcbnl IEEE_GET on netdev ", netdev, ": the reply carries no PFC state"));
  }
  PfcState state = *reply->pfc;
  absl::StatusOr<uint16_t> tout = ReadPfcPreventionTimeout(netdev);
  if (tout.ok()) {
    state.prevention_timeout_ms = *tout;
  } else if (tout.status().code() != absl::StatusCode::kUnimplemented) {
    LogOnce(absl::StrCat("pfc_tout_read:", netdev), LogLevel::kWarning,
            "cannot read pfc-prevention-tout", {{"error", std::string(tout.status().message())}});
  }
  return state;
}

absl::Status DcbnlPfcConfig::Write(const std::string& netdev, const v1::PfcSettings& settings) {
  absl::StatusOr<PfcState> cur = Read(netdev);
  if (!cur.ok()) return cur.status();
  PfcState want = *cur;
  want.enable_mask = static_cast<uint8_t>(settings.enable_mask());
  if (settings.has_delay()) want.delay = static_cast<uint16_t>(settings.delay());
  if (want.enable_mask != cur->enable_mask || want.delay != cur->delay) {
    absl::StatusOr<DcbReply> reply = Transact(netdev, /*set=*/true, &want);
    if (!reply.ok()) return reply.status();
  }
  if (settings.has_prevention_timeout_ms() &&
      cur->prevention_timeout_ms != settings.prevention_timeout_ms()) {
    return WritePfcPreventionTimeout(netdev,
                                     static_cast<uint16_t>(settings.prevention_timeout_ms()));
  }
  return absl::OkStatus();
}

absl::StatusOr<uint16_t> ReadPfcPreventionTimeout(const std::string& netdev) {
  TunableReq req;
  req.t()->cmd = ETHTOOL_GTUNABLE;
  req.t()->id = ETHTOOL_PFC_PREVENTION_TOUT;
  req.t()->type_id = ETHTOOL_TUNABLE_U16;
  req.t()->len = sizeof(uint16_t);
  if (absl::Status st = TunableIoctl(netdev, &req, "GTUNABLE"); !st.ok()) return st;
  return req.value();
}

absl::Status WritePfcPreventionTimeout(const std::string& netdev, uint16_t ms) {
  TunableReq req;
  req.t()->cmd = ETHTOOL_STUNABLE;
  req.t()->id = ETHTOOL_PFC_PREVENTION_TOUT;
  req.t()->type_id = ETHTOOL_TUNABLE_U16;
  req.t()->len = sizeof(uint16_t);
  req.set_value(ms);
  return TunableIoctl(netdev, &req, "STUNABLE");
}

}  // namespace rocetune
