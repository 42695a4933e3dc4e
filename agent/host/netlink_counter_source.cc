#include "agent/host/netlink_counter_source.h"

#include <linux/netlink.h>
#include <netlink/msg.h>
#include <netlink/netlink.h>
#include <netlink/socket.h>
#include <rdma/rdma_netlink.h>
#include <sys/socket.h>
#include <sys/time.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "agent/host/sysfs_file.h"
#include "daemon/logging.h"
#include "model/counter_names.h"

namespace rocetune {
namespace {

constexpr uint16_t kStatGetType = RDMA_NL_GET_TYPE(RDMA_NL_NLDEV, RDMA_NLDEV_CMD_STAT_GET);
constexpr uint16_t kDevGetType = RDMA_NL_GET_TYPE(RDMA_NL_NLDEV, RDMA_NLDEV_CMD_GET);
constexpr size_t kAttrHdr = 4;
constexpr size_t kReceiveBufferBytes = 64 * 1024;

// A view of one attribute inside a bounds-checked buffer.
struct Attr {
  uint16_t type = 0;
  const uint8_t* data = nullptr;
  size_t len = 0;
};

// Splits [data, data+len) into attributes. kInvalidArgument on any framing error.
absl::Status SplitAttrs(const uint8_t* data, size_t len, const char* where,
                        std::vector<Attr>* attrs) {
  size_t off = 0;
  while (off < len) {
    if (len - off < kAttrHdr) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": truncated attribute header at byte ", off));
    }
    uint16_t alen = 0, atype = 0;
    std::memcpy(&alen, data + off, 2);
    std::memcpy(&atype, data + off + 2, 2);
    if (alen < kAttrHdr || alen > len - off) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": attribute at byte ", off, " has bad length ", alen));
    }
    attrs->push_back({static_cast<uint16_t>(atype & NLA_TYPE_MASK), data + off + kAttrHdr,
                      size_t{alen} - kAttrHdr});
    off += NLA_ALIGN(alen);
  }
  return absl::OkStatus();
}

absl::StatusOr<uint32_t> AttrU32(const Attr& a, const char* what) {
  if (a.len != 4)
    return absl::InvalidArgumentError(absl::StrCat(what, ": u32 attribute has ", a.len, " bytes"));
  uint32_t v;
  std::memcpy(&v, a.data, 4);
  return v;
}

absl::StatusOr<uint64_t> AttrU64(const Attr& a, const char* what) {
  if (a.len != 8)
    return absl::InvalidArgumentError(absl::StrCat(what, ": u64 attribute has ", a.len, " bytes"));
  uint64_t v;
  std::memcpy(&v, a.data, 8);
  return v;
}

absl::StatusOr<std::string> AttrString(const Attr& a, const char* what) {
  if (a.len == 0 || a.data[a.len - 1] != '\0') {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": string attribute is not NUL-terminated"));
  }
  std::string s(reinterpret_cast<const char*>(a.data));
  if (s.empty()) return absl::InvalidArgumentError(absl::StrCat(what, ": empty string attribute"));
  return s;
}

absl::Status ErrnoStatus(int err) {
  const std::string msg = absl::StrCat("RDMA netlink error: ", std::strerror(err));
  if (err == ENODEV || err == EOPNOTSUPP || err == EPROTONOSUPPORT || err == ENOENT) {
    return absl::UnavailableError(msg);
  }
  if (err == EPERM || err == EACCES) return absl::PermissionDeniedError(msg);
  return absl::InternalError(msg);
}

// Calls `fn(type, payload, payload_len)` for each message of interest.
absl::Status WalkMessages(const uint8_t* data, size_t len,
                          const std::function<absl::Status(uint16_t, const uint8_t*, size_t)>& fn) {
  if (data == nullptr && len != 0) return absl::InvalidArgumentError("null netlink buffer");
  size_t off = 0;
  while (off < len) {
    if (len - off < sizeof(struct nlmsghdr)) {
      return absl::InvalidArgumentError(absl::StrCat("truncated netlink header at byte ", off));
    }
    struct nlmsghdr h;
    std::memcpy(&h, data + off, sizeof(h));
    if (h.nlmsg_len < NLMSG_HDRLEN || h.nlmsg_len > len - off) {
      return absl::InvalidArgumentError(
          absl::StrCat("netlink message at byte ", off, " has bad length ", h.nlmsg_len));
    }
    const uint8_t* payload = data + off + NLMSG_HDRLEN;
    const size_t plen = h.nlmsg_len - NLMSG_HDRLEN;
    if (h.nlmsg_type == NLMSG_DONE) return absl::OkStatus();
    if (h.nlmsg_type == NLMSG_ERROR) {
      if (plen < sizeof(int)) return absl::InvalidArgumentError("truncated NLMSG_ERROR");
      int error = 0;
      std::memcpy(&error, payload, sizeof(int));
      if (error != 0) {
        const int64_t e = error;  // -INT_MIN overflows an int
        return ErrnoStatus(
            static_cast<int>(e < 0 ? (-e > 4095 ? EPROTO : -e) : (e > 4095 ? EPROTO : e)));
      }
    } else if (absl::Status s = fn(h.nlmsg_type, payload, plen); !s.ok()) {
      return s;
    }
    const size_t step = NLMSG_ALIGN(h.nlmsg_len);
    if (step > len - off) break;
    off += step;
  }
  return absl::OkStatus();
}

absl::StatusOr<RdmaNlPortStats> ParseStatPayload(const uint8_t* p, size_t len) {
  std::vector<Attr> attrs;
  if (absl::Status s = SplitAttrs(p, len, "STAT_GET reply", &attrs); !s.ok()) return s;
  RdmaNlPortStats stats;
  bool have_counters = false;
  for (const Attr& a : attrs) {
    switch (a.type) {
      case RDMA_NLDEV_ATTR_DEV_INDEX: {
        absl::StatusOr<uint32_t> v = AttrU32(a, "DEV_INDEX");
        if (!v.ok()) return v.status();
        stats.dev_index = *v;
        break;
      }
      case RDMA_NLDEV_ATTR_DEV_NAME: {
        absl::StatusOr<std::string> v = AttrString(a, "DEV_NAME");
        if (!v.ok()) return v.status();
        stats.dev_name = *v;
        break;
      }
      case RDMA_NLDEV_ATTR_PORT_INDEX: {
        absl::StatusOr<uint32_t> v = AttrU32(a, "PORT_INDEX");
        if (!v.ok()) return v.status();
        stats.port = *v;
        break;
      }
      case RDMA_NLDEV_ATTR_STAT_HWCOUNTERS: {
        have_counters = true;
        std::vector<Attr> entries;
        if (absl::Status s = SplitAttrs(a.data, a.len, "STAT_HWCOUNTERS", &entries); !s.ok()) {
          return s;
        }
        for (const Attr& e : entries) {
          if (e.type != RDMA_NLDEV_ATTR_STAT_HWCOUNTER_ENTRY) continue;
          std::vector<Attr> fields;
          if (absl::Status s = SplitAttrs(e.data, e.len, "STAT_HWCOUNTER_ENTRY", &fields);
              !s.ok()) {
            return s;
          }
          std::string name;
          bool have_value = false;
          uint64_t value = 0;
          for (const Attr& f : fields) {
            if (f.type == RDMA_NLDEV_ATTR_STAT_HWCOUNTER_ENTRY_NAME) {
              absl::StatusOr<std::string> v = AttrString(f, "HWCOUNTER_ENTRY_NAME");
              if (!v.ok()) return v.status();
              name = *v;
            } else if (f.type == RDMA_NLDEV_ATTR_STAT_HWCOUNTER_ENTRY_VALUE) {
              absl::StatusOr<uint64_t> v = AttrU64(f, "HWCOUNTER_ENTRY_VALUE");
              if (!v.ok()) return v.status();
              value = *v;
              have_value = true;
            }
          }
          if (name.empty() || !have_value) {
            return absl::InvalidArgumentError("STAT_HWCOUNTER_ENTRY without a name and a value");
          }
          stats.counters.emplace_back(std::move(name), value);
        }
        break;
      }
      default:
        break;
    }
  }
  if (!have_counters) return absl::InvalidArgumentError("STAT_GET reply without STAT_HWCOUNTERS");
  if (stats.port == 0) return absl::InvalidArgumentError("STAT_GET reply without PORT_INDEX");
  return stats;
}

}  // namespace

absl::Status ParseRdmaStatReply(const uint8_t* data, size_t len,
                                std::vector<RdmaNlPortStats>* out) {
  std::vector<RdmaNlPortStats> parsed;
  absl::Status s = WalkMessages(data, len, [&](uint16_t type, const uint8_t* p, size_t plen) {
    if (type != kStatGetType) return absl::OkStatus();
    absl::StatusOr<RdmaNlPortStats> stats = ParseStatPayload(p, plen);
    if (!stats.ok()) return stats.status();
    parsed.push_back(*std::move(stats));
    return absl::OkStatus();
  });
  if (!s.ok()) return s;
  for (RdmaNlPortStats& p : parsed) out->push_back(std::move(p));
  return absl::OkStatus();
}

absl::Status ParseRdmaDevReply(const uint8_t* data, size_t len, std::vector<RdmaNlDevice>* out) {
  std::vector<RdmaNlDevice> parsed;
  absl::Status s = WalkMessages(data, len, [&](uint16_t type, const uint8_t* p, size_t plen) {
    if (type != kDevGetType) return absl::OkStatus();
    std::vector<Attr> attrs;
    if (absl::Status st = SplitAttrs(p, plen, "GET reply", &attrs); !st.ok()) return st;
    RdmaNlDevice d;
    bool have_index = false;
    for (const Attr& a : attrs) {
      if (a.type == RDMA_NLDEV_ATTR_DEV_INDEX) {
        absl::StatusOr<uint32_t> v = AttrU32(a, "DEV_INDEX");
        if (!v.ok()) return v.status();
        d.index = *v;
        have_index = true;
      } else if (a.type == RDMA_NLDEV_ATTR_DEV_NAME) {
        absl::StatusOr<std::string> v = AttrString(a, "DEV_NAME");
        if (!v.ok()) return v.status();
        d.name = *v;
      } else if (a.type == RDMA_NLDEV_ATTR_PORT_INDEX) {
        absl::StatusOr<uint32_t> v = AttrU32(a, "PORT_INDEX");
        if (!v.ok()) return v.status();
        d.ports = *v;
      }
    }
    if (!have_index || d.name.empty()) {
      return absl::InvalidArgumentError("GET reply without DEV_INDEX and DEV_NAME");
    }
    parsed.push_back(std::move(d));
    return absl::OkStatus();
  });
  if (!s.ok()) return s;
  for (RdmaNlDevice& d : parsed) out->push_back(std::move(d));
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<NetlinkCounterSource>> NetlinkCounterSource::Create(
    std::string sysfs_root) {
  nl_sock* sock = nl_socket_alloc();
  if (sock == nullptr) return absl::ResourceExhaustedError("nl_socket_alloc failed");
  if (int rc = nl_connect(sock, NETLINK_RDMA); rc < 0) {
    const std::string why = nl_geterror(rc);
    nl_socket_free(sock);
    return absl::UnavailableError(absl::StrCat("RDMA netlink is not available: ", why));
  }
  struct timeval tv = {1, 0};
  setsockopt(nl_socket_get_fd(sock), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  // One recvmsg per reply: libnl otherwise peeks at each message first to size
  // its buffer (a second syscall every STAT_GET). A STAT_GET reply is a few KiB
  // and the kernel splits dumps into messages of at most 32 KiB; one larger
  // than the buffer fails the receive (NLE_MSG_TRUNC) instead of being cut.
  nl_socket_disable_msg_peek(sock);
  nl_socket_set_msg_buf_size(sock, kReceiveBufferBytes);
  std::unique_ptr<NetlinkCounterSource> src(new NetlinkCounterSource(std::move(sysfs_root), sock));
  if (absl::Status s = src->ListDevices(); !s.ok()) {
    return absl::UnavailableError(absl::StrCat("RDMA netlink device list failed: ", s.message()));
  }
  return src;
}

NetlinkCounterSource::~NetlinkCounterSource() {
  if (sock_ != nullptr) nl_socket_free(sock_);
}

absl::Status NetlinkCounterSource::Receive(
    const std::function<absl::Status(const uint8_t*, size_t, bool*)>& handle) {
  bool done = false;
  while (!done) {
    unsigned char* buf = nullptr;
    struct sockaddr_nl peer;
    const int n = nl_recv(sock_, &peer, &buf, nullptr);
    if (n <= 0) {
      std::free(buf);
      return absl::UnavailableError(
          absl::StrCat("RDMA netlink receive failed: ", n < 0 ? nl_geterror(n) : "no data"));
    }
    absl::Status s = handle(buf, static_cast<size_t>(n), &done);
    std::free(buf);
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status NetlinkCounterSource::ListDevices() {
  struct nl_msg* msg = nlmsg_alloc_simple(kDevGetType, NLM_F_REQUEST | NLM_F_DUMP);
  if (msg == nullptr) return absl::ResourceExhaustedError("nlmsg_alloc_simple failed");
  const int rc = nl_send_auto(sock_, msg);
  nlmsg_free(msg);
  if (rc < 0) return absl::UnavailableError(absl::StrCat("RDMA netlink send: ", nl_geterror(rc)));
  std::vector<RdmaNlDevice> devices;
  absl::Status s = Receive([&](const uint8_t* data, size_t len, bool* done) {
    // A dump ends with NLMSG_DONE; look for it in this batch.
    size_t off = 0;
    while (off + sizeof(struct nlmsghdr) <= len) {
      struct nlmsghdr h;
      std::memcpy(&h, data + off, sizeof(h));
      if (h.nlmsg_type == NLMSG_DONE || h.nlmsg_type == NLMSG_ERROR) *done = true;
      if (h.nlmsg_len < NLMSG_HDRLEN) break;
      off += NLMSG_ALIGN(h.nlmsg_len);
    }
    return ParseRdmaDevReply(data, len, &devices);
  });
  if (!s.ok()) return s;
  devices_ = std::move(devices);
  plans_.clear();
  vendors_.clear();
  for (const RdmaNlDevice& d : devices_) {
    const std::string driver =
        SymlinkBasename(root_ + "/class/infiniband/" + d.name + "/device/driver");
    vendors_.push_back(static_cast<int>(CounterVendorFor(driver, d.name)));
  }
  return absl::OkStatus();
}

absl::StatusOr<RdmaNlPortStats> NetlinkCounterSource::QueryPort(uint32_t dev_index, uint32_t port) {
  struct nl_msg* msg = nlmsg_alloc_simple(kStatGetType, NLM_F_REQUEST);
  if (msg == nullptr) return absl::ResourceExhaustedError("nlmsg_alloc_simple failed");
  if (nla_put_u32(msg, RDMA_NLDEV_ATTR_DEV_INDEX, dev_index) < 0 ||
      nla_put_u32(msg, RDMA_NLDEV_ATTR_PORT_INDEX, port) < 0) {
    nlmsg_free(msg);
    return absl::InternalError("cannot build STAT_GET request");
  }
  const int rc = nl_send_auto(sock_, msg);
  nlmsg_free(msg);
  if (rc < 0) return absl::UnavailableError(absl::StrCat("RDMA netlink send: ", nl_geterror(rc)));
  std::vector<RdmaNlPortStats> replies;
  absl::Status s = Receive([&](const uint8_t* data, size_t len, bool* done) {
    absl::Status p = ParseRdmaStatReply(data, len, &replies);
    *done = !replies.empty() || !p.ok();
    return p;
  });
  if (!s.ok()) return s;
  return std::move(replies.front());
}

const NetlinkCounterSource::PortPlan& NetlinkCounterSource::PlanFor(size_t device, uint32_t port,
                                                                    const RdmaNlPortStats& stats) {
  if (plans_.size() != devices_.size()) plans_.assign(devices_.size(), {});
  std::vector<PortPlan>& ports = plans_[device];
  if (ports.size() < port) ports.resize(port);
  PortPlan& plan = ports[port - 1];
  bool same = plan.vendor_names.size() == stats.counters.size();
  for (size_t j = 0; same && j < stats.counters.size(); ++j) {
    same = plan.vendor_names[j] == stats.counters[j].first;
  }
  if (same) return plan;
  const CounterVendor vendor = static_cast<CounterVendor>(vendors_[device]);
  plan = PortPlan();
  std::vector<std::string> used;
  for (const auto& [vendor_name, value] : stats.counters) {
    MappedCounter m = MapHwCounter(vendor, vendor_name);
    if (m.mapped) {
      bool dup = false;
      for (const std::string& u : used) dup = dup || u == m.name;
      if (dup) {
        m.name = vendor_name;
      } else {
        used.push_back(m.name);
      }
    }
    plan.vendor_names.push_back(vendor_name);
    CounterKey& key = plan.keys.emplace_back();
    key.device = devices_[device].name;
    key.port = port;
    key.priority = m.priority;
    key.name = std::move(m.name);
    plan.multipliers.push_back(m.multiplier);
    plan.widths.push_back(m.width_bits);
  }
  plan.first_key_id = NewCounterKeyIds(plan.keys.size());
  return plan;
}

absl::Status NetlinkCounterSource::Collect(std::vector<CounterValue>* out) {
  return CollectWith([out](const PortPlan& plan, size_t j) -> CounterValue& {
    CounterValue& v = out->emplace_back();
    v.key = plan.keys[j];
    v.key_id = plan.first_key_id + j;
    return v;
  });
}

absl::Status NetlinkCounterSource::CollectInto(CounterBuffer* out) {
  return CollectWith([out](const PortPlan& plan, size_t j) -> CounterValue& {
    return out->AppendKeyed(plan.first_key_id + j, plan.keys[j]);
  });
}

template <typename Next>
absl::Status NetlinkCounterSource::CollectWith(Next next) {
  size_t ok_ports = 0;
  absl::Status first_error;
  bool relist = false;
  for (size_t i = 0; i < devices_.size(); ++i) {
    const RdmaNlDevice& d = devices_[i];
    for (uint32_t port = 1; port <= d.ports; ++port) {
      absl::StatusOr<RdmaNlPortStats> stats = QueryPort(d.index, port);
      if (!stats.ok()) {
        if (first_error.ok()) first_error = stats.status();
        relist = relist || absl::IsUnavailable(stats.status());
        LogOnce(absl::StrCat("netlink_stat_failed:", d.name, "/", port), LogLevel::kWarning,
                "RDMA netlink STAT_GET failed",
                {{"device", d.name},
                 {"port", absl::StrCat(port)},
                 {"error", stats.status().ToString()}});
        continue;
      }
      ++ok_ports;
      const PortPlan& plan = PlanFor(i, port, *stats);
      for (size_t j = 0; j < stats->counters.size(); ++j) {
        CounterValue& cv = next(plan, j);
        cv.value = stats->counters[j].second * plan.multipliers[j];
        cv.width_bits = plan.widths[j];
      }
    }
  }
  if (relist) {
    if (absl::Status s = ListDevices(); !s.ok()) {
      LogOnce("netlink_relist_failed", LogLevel::kWarning, "RDMA netlink device list failed",
              {{"error", s.ToString()}});
    }
  }
  if (ok_ports == 0) {
    if (!first_error.ok()) return first_error;
    return absl::UnavailableError("RDMA netlink lists no device");
  }
  return absl::OkStatus();
}

}  // namespace rocetune
