#include "agent/probe/verbs_endpoint.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>

#include <algorithm>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "daemon/logging.h"

namespace rocetune {
namespace {

constexpr size_t kGrhBytes = 40;
constexpr size_t kMaxSlotPayload = 4096;

uint32_t MtuBytes(ibv_mtu mtu) {
  switch (mtu) {
    case IBV_MTU_256:
      return 256;
    case IBV_MTU_512:
      return 512;
    case IBV_MTU_1024:
      return 1024;
    case IBV_MTU_2048:
      return 2048;
    case IBV_MTU_4096:
      return 4096;
  }
  return 256;
}

bool IsZeroGid(const ibv_gid& g) {
  for (uint8_t b : g.raw) {
    if (b != 0) return false;
  }
  return true;
}

bool IsV4Mapped(const ibv_gid& g) {
  static const uint8_t kPrefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  return std::memcmp(g.raw, kPrefix, sizeof(kPrefix)) == 0;
}

std::string GidText(const ibv_gid& g) {
  char buf[INET6_ADDRSTRLEN] = {};
  inet_ntop(AF_INET6, g.raw, buf, sizeof(buf));
  return buf;
}

void SetNonBlocking(int fd) {
  int flags = fcntl(fd, F_GETFL);
  if (flags >= 0) fcntl(fd, F_SETFL, flags | O_NONBLOCK);
}

}  // namespace

absl::StatusOr<std::unique_ptr<VerbsEndpoint>> VerbsEndpoint::Open(const Options& options) {
  std::unique_ptr<VerbsEndpoint> ep(new VerbsEndpoint(options));
  absl::Status s = ep->Init();
  if (!s.ok()) return s;
  return ep;
}

VerbsEndpoint::VerbsEndpoint(const Options& options)
    : options_(options), clock_(options.clock != nullptr ? options.clock : Clock::Real()) {}

absl::Status VerbsEndpoint::Init() {
  int num = 0;
  ibv_device** list = ibv_get_device_list(&num);
  if (list == nullptr || num == 0) {
    if (list != nullptr) ibv_free_device_list(list);
    return absl::UnavailableError("verbs: no RDMA device on this host");
  }
  ibv_device* dev = nullptr;
  std::vector<std::string> names;
  for (int i = 0; i < num; ++i) {
    names.push_back(ibv_get_device_name(list[i]));
    if (dev == nullptr && (options_.device.empty() || names.back() == options_.device)) {
      dev = list[i];
    }
  }
  if (dev == nullptr) {
    ibv_free_device_list(list);
    return absl::UnavailableError(absl::StrCat("verbs: RDMA device \"", options_.device,
                                               "\" not found (have: ", absl::StrJoin(names, ","),
                                               ")"));
  }
  device_ = ibv_get_device_name(dev);
  ctx_ = ibv_open_device(dev);
  ibv_free_device_list(list);
  if (ctx_ == nullptr) {
    return absl::UnavailableError(
        absl::StrCat("verbs: cannot open ", device_, ": ", strerror(errno)));
  }
  const std::string where = absl::StrCat(device_, " port ", options_.port);
  ibv_port_attr pattr{};
  if (ibv_query_port(ctx_, static_cast<uint8_t>(options_.port), &pattr) != 0) {
    return absl::UnavailableError(absl::StrCat("verbs: cannot query ", where));
  }
  if (pattr.state != IBV_PORT_ACTIVE) {
    return absl::UnavailableError(absl::StrCat("verbs: ", where, " is not active (state ",
                                               ibv_port_state_str(pattr.state), ")"));
  }
  max_payload_ = std::min<uint32_t>(MtuBytes(pattr.active_mtu), kMaxSlotPayload);

  // GID selection.
  gid_index_ = -1;
  ibv_gid chosen{};
  if (options_.gid_index >= 0) {
    if (options_.gid_index >= pattr.gid_tbl_len ||
        ibv_query_gid(ctx_, static_cast<uint8_t>(options_.port), options_.gid_index, &chosen) !=
            0 ||
        IsZeroGid(chosen)) {
      return absl::UnavailableError(
          absl::StrCat("verbs: ", where, " has no GID at index ", options_.gid_index));
    }
    gid_index_ = options_.gid_index;
  } else {
    int fallback = -1;
    ibv_gid fallback_gid{};
    for (int i = 0; i < pattr.gid_tbl_len && i < 256; ++i) {
      ibv_gid g{};
      if (ibv_query_gid(ctx_, static_cast<uint8_t>(options_.port), i, &g) != 0 || IsZeroGid(g)) {
        continue;
      }
      ibv_gid_entry entry{};
      const bool v2 = ibv_query_gid_ex(ctx_, static_cast<uint32_t>(options_.port),
                                       static_cast<uint32_t>(i), &entry, 0) == 0 &&
                      entry.gid_type == IBV_GID_TYPE_ROCE_V2;
      if (v2 && IsV4Mapped(g)) {
        gid_index_ = i;
        chosen = g;
        break;
      }
      if (fallback < 0) {
        fallback = i;
        fallback_gid = g;
      }
    }
    if (gid_index_ < 0 && fallback >= 0) {
      gid_index_ = fallback;
      chosen = fallback_gid;
    }
    if (gid_index_ < 0) {
      return absl::UnavailableError(absl::StrCat("verbs: ", where, " has no usable GID"));
    }
  }
  gid_text_ = GidText(chosen);

  pd_ = ibv_alloc_pd(ctx_);
  if (pd_ == nullptr) return absl::UnavailableError(absl::StrCat("verbs: alloc_pd on ", device_));
  channel_ = ibv_create_comp_channel(ctx_);
  if (channel_ == nullptr) {
    return absl::UnavailableError(absl::StrCat("verbs: create_comp_channel on ", device_));
  }
  SetNonBlocking(channel_->fd);
  SetNonBlocking(ctx_->async_fd);
  const int cqe = options_.recv_depth + options_.send_depth;

  if (options_.use_nic_timestamps) {
    ibv_device_attr_ex dattr{};
    if (ibv_query_device_ex(ctx_, nullptr, &dattr) == 0 && dattr.completion_timestamp_mask != 0 &&
        dattr.hca_core_clock != 0) {
      ibv_cq_init_attr_ex cq_attr{};
      cq_attr.cqe = static_cast<uint32_t>(cqe);
      cq_attr.channel = channel_;
      cq_attr.wc_flags = IBV_WC_EX_WITH_COMPLETION_TIMESTAMP | IBV_WC_EX_WITH_BYTE_LEN |
                         IBV_WC_EX_WITH_SRC_QP | IBV_WC_EX_WITH_SLID | IBV_WC_EX_WITH_SL |
                         IBV_WC_EX_WITH_DLID_PATH_BITS;
      cq_ex_ = ibv_create_cq_ex(ctx_, &cq_attr);
      if (cq_ex_ != nullptr) {
        cq_ = ibv_cq_ex_to_cq(cq_ex_);
        hca_core_clock_khz_ = dattr.hca_core_clock;
        clock_name_ = "nic_completion";
      }
    }
  }
  if (cq_ == nullptr) {
    cq_ = ibv_create_cq(ctx_, cqe, nullptr, channel_, 0);
    if (cq_ == nullptr) {
      return absl::UnavailableError(
          absl::StrCat("verbs: create_cq on ", device_, ": ", strerror(errno)));
    }
  }
  if (ibv_req_notify_cq(cq_, 0) != 0) {
    return absl::UnavailableError(absl::StrCat("verbs: req_notify_cq on ", device_));
  }

  ibv_qp_init_attr qattr{};
  qattr.send_cq = cq_;
  qattr.recv_cq = cq_;
  qattr.qp_type = IBV_QPT_UD;
  qattr.cap.max_send_wr = static_cast<uint32_t>(options_.send_depth);
  qattr.cap.max_recv_wr = static_cast<uint32_t>(options_.recv_depth);
  qattr.cap.max_send_sge = 1;
  qattr.cap.max_recv_sge = 1;
  qp_ = ibv_create_qp(pd_, &qattr);
  if (qp_ == nullptr) {
    return absl::UnavailableError(
        absl::StrCat("verbs: create UD QP on ", where, ": ", strerror(errno)));
  }
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.pkey_index = 0;
  a.port_num = static_cast<uint8_t>(options_.port);
  a.qkey = options_.qkey;
  if (ibv_modify_qp(qp_, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY) != 0) {
    return absl::UnavailableError(absl::StrCat("verbs: UD QP to INIT on ", where));
  }
  a = {};
  a.qp_state = IBV_QPS_RTR;
  if (ibv_modify_qp(qp_, &a, IBV_QP_STATE) != 0) {
    return absl::UnavailableError(absl::StrCat("verbs: UD QP to RTR on ", where));
  }
  a = {};
  a.qp_state = IBV_QPS_RTS;
  a.sq_psn = 0;
  if (ibv_modify_qp(qp_, &a, IBV_QP_STATE | IBV_QP_SQ_PSN) != 0) {
    return absl::UnavailableError(absl::StrCat("verbs: UD QP to RTS on ", where));
  }

  slot_bytes_ = kGrhBytes + kMaxSlotPayload;
  buffer_.assign(slot_bytes_ * static_cast<size_t>(options_.recv_depth + options_.send_depth), 0);
  mr_ = ibv_reg_mr(pd_, buffer_.data(), buffer_.size(), IBV_ACCESS_LOCAL_WRITE);
  if (mr_ == nullptr) {
    return absl::UnavailableError(
        absl::StrCat("verbs: reg_mr on ", device_, ": ", strerror(errno)));
  }
  for (int i = 0; i < options_.recv_depth; ++i) {
    absl::Status s = PostRecv(i);
    if (!s.ok()) return s;
  }
  for (int i = options_.send_depth - 1; i >= 0; --i) free_send_slots_.push_back(i);
  return absl::OkStatus();
}

VerbsEndpoint::~VerbsEndpoint() {
  if (qp_ != nullptr) ibv_destroy_qp(qp_);
  {
    absl::MutexLock l(&ah_mu_);
    for (ibv_ah* ah : ahs_) ibv_destroy_ah(ah);
  }
  if (mr_ != nullptr) ibv_dereg_mr(mr_);
  if (cq_ != nullptr) ibv_destroy_cq(cq_);
  if (channel_ != nullptr) ibv_destroy_comp_channel(channel_);
  if (pd_ != nullptr) ibv_dealloc_pd(pd_);
  if (ctx_ != nullptr) ibv_close_device(ctx_);
}

int VerbsEndpoint::event_fd() const { return channel_->fd; }
int VerbsEndpoint::async_fd() const { return ctx_->async_fd; }

absl::Duration VerbsEndpoint::Now() const { return clock_->Monotonic(); }

absl::Status VerbsEndpoint::PostRecv(int slot) {
  ibv_sge sge{};
  sge.addr = reinterpret_cast<uintptr_t>(buffer_.data() + slot_bytes_ * static_cast<size_t>(slot));
  sge.length = static_cast<uint32_t>(slot_bytes_);
  sge.lkey = mr_->lkey;
  ibv_recv_wr wr{};
  wr.wr_id = static_cast<uint64_t>(slot);
  wr.sg_list = &sge;
  wr.num_sge = 1;
  ibv_recv_wr* bad = nullptr;
  if (ibv_post_recv(qp_, &wr, &bad) != 0) {
    return absl::UnavailableError(
        absl::StrCat("verbs: post_recv on ", device_, ": ", strerror(errno)));
  }
  return absl::OkStatus();
}

absl::StatusOr<ibv_ah*> VerbsEndpoint::CreateAh(const ibv_gid& dgid, uint8_t traffic_class) {
  ibv_ah_attr attr{};
  attr.is_global = 1;
  attr.grh.dgid = dgid;
  attr.grh.sgid_index = static_cast<uint8_t>(gid_index_);
  attr.grh.hop_limit = 64;
  attr.grh.traffic_class = traffic_class;
  attr.port_num = static_cast<uint8_t>(options_.port);
  ibv_ah* ah = ibv_create_ah(pd_, &attr);
  if (ah == nullptr) {
    return absl::UnavailableError(absl::StrCat("verbs: cannot resolve GID ", GidText(dgid),
                                               " from ", device_, ": ", strerror(errno)));
  }
  absl::MutexLock l(&ah_mu_);
  ahs_.push_back(ah);
  return ah;
}

absl::StatusOr<ibv_ah*> VerbsEndpoint::CreateAhFromRecv(const Completion& c) {
  ibv_wc wc = c.wc;
  auto* grh = reinterpret_cast<ibv_grh*>(const_cast<uint8_t*>(c.data - kGrhBytes));
  ibv_ah* ah = ibv_create_ah_from_wc(pd_, &wc, grh, static_cast<uint8_t>(options_.port));
  if (ah == nullptr) {
    return absl::UnavailableError(
        absl::StrCat("verbs: cannot create reply AH on ", device_, ": ", strerror(errno)));
  }
  absl::MutexLock l(&ah_mu_);
  ahs_.push_back(ah);
  return ah;
}

void VerbsEndpoint::DestroyAh(ibv_ah* ah) {
  absl::MutexLock l(&ah_mu_);
  auto it = std::find(ahs_.begin(), ahs_.end(), ah);
  if (it == ahs_.end()) return;
  ahs_.erase(it);
  ibv_destroy_ah(ah);
}

int VerbsEndpoint::AcquireSendSlot() {
  if (free_send_slots_.empty()) return -1;
  int s = free_send_slots_.back();
  free_send_slots_.pop_back();
  return s;
}

uint8_t* VerbsEndpoint::send_buffer(int slot) {
  return buffer_.data() + slot_bytes_ * static_cast<size_t>(options_.recv_depth + slot);
}

void VerbsEndpoint::ReleaseSendSlot(int slot) { free_send_slots_.push_back(slot); }

absl::Status VerbsEndpoint::PostSend(int slot, size_t length, ibv_ah* ah, uint32_t remote_qpn,
                                     uint32_t remote_qkey) {
  ibv_sge sge{};
  sge.addr = reinterpret_cast<uintptr_t>(send_buffer(slot));
  sge.length = static_cast<uint32_t>(length);
  sge.lkey = mr_->lkey;
  ibv_send_wr wr{};
  wr.wr_id = static_cast<uint64_t>(slot);
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_SEND;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.wr.ud.ah = ah;
  wr.wr.ud.remote_qpn = remote_qpn;
  wr.wr.ud.remote_qkey = remote_qkey;
  ibv_send_wr* bad = nullptr;
  int rc = ibv_post_send(qp_, &wr, &bad);
  if (rc != 0) {
    ReleaseSendSlot(slot);
    return absl::UnavailableError(
        absl::StrCat("verbs: post_send on ", device_, ": ", strerror(rc)));
  }
  return absl::OkStatus();
}

void VerbsEndpoint::AckEvents() {
  ibv_cq* ev_cq = nullptr;
  void* ev_ctx = nullptr;
  unsigned n = 0;
  while (ibv_get_cq_event(channel_, &ev_cq, &ev_ctx) == 0) ++n;
  if (n > 0) ibv_ack_cq_events(cq_, n);
  ibv_req_notify_cq(cq_, 0);
}

bool VerbsEndpoint::HandleAsyncEvents() {
  bool alive = true;
  ibv_async_event ev{};
  while (ibv_get_async_event(ctx_, &ev) == 0) {
    if (ev.event_type == IBV_EVENT_DEVICE_FATAL) alive = false;
    LogOnce(absl::StrCat("probe.verbs.async.", device_, ".", ev.event_type), LogLevel::kWarning,
            "verbs: async event",
            {{"device", device_}, {"event", ibv_event_type_str(ev.event_type)}});
    ibv_ack_async_event(&ev);
  }
  return alive;
}

bool VerbsEndpoint::Poll(const std::function<void(const Completion&)>& handle, int max) {
  auto finish_recv = [&](Completion& c, uint32_t byte_len) {
    const size_t slot = c.wr_id;
    c.data = buffer_.data() + slot_bytes_ * slot + kGrhBytes;
    c.length = byte_len > kGrhBytes ? byte_len - kGrhBytes : 0;
  };
  if (cq_ex_ != nullptr) {
    ibv_poll_cq_attr attr{};
    int rc = ibv_start_poll(cq_ex_, &attr);
    if (rc == ENOENT) return true;
    if (rc != 0) return false;
    int n = 0;
    do {
      Completion c;
      c.wr_id = cq_ex_->wr_id;
      c.ok = cq_ex_->status == IBV_WC_SUCCESS;
      if (!c.ok) c.error = ibv_wc_status_str(cq_ex_->status);
      const ibv_wc_opcode op = ibv_wc_read_opcode(cq_ex_);
      c.is_recv = (op & IBV_WC_RECV) != 0;
      const uint64_t ticks = ibv_wc_read_completion_ts(cq_ex_);
      c.time = absl::Nanoseconds(static_cast<int64_t>(static_cast<__int128>(ticks) * 1000000 /
                                                      static_cast<__int128>(hca_core_clock_khz_)));
      if (c.is_recv) {
        c.src_qp = ibv_wc_read_src_qp(cq_ex_);
        c.wc.wr_id = c.wr_id;
        c.wc.status = cq_ex_->status;
        c.wc.opcode = op;
        c.wc.wc_flags = ibv_wc_read_wc_flags(cq_ex_);
        c.wc.src_qp = c.src_qp;
        c.wc.slid = static_cast<uint16_t>(ibv_wc_read_slid(cq_ex_));
        c.wc.sl = ibv_wc_read_sl(cq_ex_);
        c.wc.dlid_path_bits = ibv_wc_read_dlid_path_bits(cq_ex_);
        c.wc.qp_num = qp_->qp_num;
        finish_recv(c, ibv_wc_read_byte_len(cq_ex_));
      }
      handle(c);
      if (c.is_recv) PostRecv(static_cast<int>(c.wr_id)).IgnoreError();
      ++n;
    } while (n < max && ibv_next_poll(cq_ex_) == 0);
    ibv_end_poll(cq_ex_);
    return true;
  }
  ibv_wc wcs[64];
  int n = ibv_poll_cq(cq_, std::min(max, 64), wcs);
  if (n < 0) return false;
  const absl::Duration now = Now();
  for (int i = 0; i < n; ++i) {
    Completion c;
    c.wr_id = wcs[i].wr_id;
    c.ok = wcs[i].status == IBV_WC_SUCCESS;
    if (!c.ok) c.error = ibv_wc_status_str(wcs[i].status);
    c.is_recv = (wcs[i].opcode & IBV_WC_RECV) != 0;
    c.time = now;
    if (c.is_recv) {
      c.src_qp = wcs[i].src_qp;
      c.wc = wcs[i];
      finish_recv(c, wcs[i].byte_len);
    }
    handle(c);
    if (c.is_recv) PostRecv(static_cast<int>(c.wr_id)).IgnoreError();
  }
  return true;
}

}  // namespace rocetune
