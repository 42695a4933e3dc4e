#ifndef ROCETUNE_AGENT_PROBE_VERBS_ENDPOINT_H_
#define ROCETUNE_AGENT_PROBE_VERBS_ENDPOINT_H_

#include <infiniband/verbs.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "daemon/clock.h"

namespace rocetune {

// One UD queue pair on one local RDMA port, with its CQ, completion channel,
// registered receive and send buffers. Completion times come from the NIC's
// completion timestamps when the device has them (converted to nanoseconds
// through hca_core_clock), otherwise from CLOCK_MONOTONIC when the completion is
// polled; clock_name() says which. Not thread-safe: one owner thread.
class VerbsEndpoint {
 public:
  struct Options {
    std::string device;  // "" = first device
    int port = 1;
    int gid_index = -1;  // -1 = first RoCEv2 IPv4-mapped GID, else first nonzero GID
    uint32_t qkey = 0x11111111;
    int recv_depth = 128;
    int send_depth = 128;
    bool use_nic_timestamps = true;
    Clock* clock = nullptr;  // nullptr: Clock::Real(); used without NIC timestamps
  };
  struct Completion {
    uint64_t wr_id = 0;
    bool ok = false;
    bool is_recv = false;
    std::string error;              // set when !ok
    absl::Duration time;            // completion time on clock_name()'s clock
    uint32_t src_qp = 0;            // receives
    const uint8_t* data = nullptr;  // receives: payload after the 40-byte GRH area
    size_t length = 0;              // receives: payload bytes
    ibv_wc wc{};                    // receives: for ibv_create_ah_from_wc
  };

  // kUnavailable when there is no RDMA device (or not the named one), the port is
  // not usable, or a verbs resource cannot be created; the message says which.
  static absl::StatusOr<std::unique_ptr<VerbsEndpoint>> Open(const Options& options);
  ~VerbsEndpoint();
  VerbsEndpoint(const VerbsEndpoint&) = delete;
  VerbsEndpoint& operator=(const VerbsEndpoint&) = delete;

  const std::string& device() const { return device_; }
  int port() const { return options_.port; }
  uint32_t qpn() const { return qp_->qp_num; }
  uint32_t qkey() const { return options_.qkey; }
  int send_depth() const { return options_.send_depth; }
  int gid_index() const { return gid_index_; }
  // The local GID in IPv6 text form (e.g. "::ffff:10.77.0.1").
  std::string gid() const { return gid_text_; }
  const std::string& clock_name() const { return clock_name_; }
  // Largest UD payload the port's MTU allows.
  uint32_t max_payload() const { return max_payload_; }
  // Completion channel fd, readable when completions may be pending.
  int event_fd() const;
  // Async event fd (device fatal / port events).
  int async_fd() const;

  // Address handle to a peer GID on this port. kUnavailable when it cannot be
  // resolved (peer unknown or down); may block for address resolution. Owned by
  // the endpoint. CreateAh and DestroyAh may be called from any thread.
  absl::StatusOr<ibv_ah*> CreateAh(const ibv_gid& dgid, uint8_t traffic_class);
  // Address handle for answering a received packet. Owned by the endpoint.
  absl::StatusOr<ibv_ah*> CreateAhFromRecv(const Completion& c);

  // Destroys an address handle made by this endpoint.
  void DestroyAh(ibv_ah* ah);
  // Free send slot index or -1 when all are in flight.
  int AcquireSendSlot();
  uint8_t* send_buffer(int slot);
  // Posts send slot `slot` (`length` bytes) to (ah, remote_qpn, remote_qkey), signaled.
  // wr_id of the completion is `slot`. On error the slot is released.
  absl::Status PostSend(int slot, size_t length, ibv_ah* ah, uint32_t remote_qpn,
                        uint32_t remote_qkey);
  // Releases a send slot after its completion.
  void ReleaseSendSlot(int slot);

  // Polls up to `max` completions. Receive buffers are reposted after the caller
  // returns from `handle`. Returns false when the CQ is in error (device gone).
  bool Poll(const std::function<void(const Completion&)>& handle, int max = 64);
  // Re-arms the completion channel after an event (call, then Poll again).
  void AckEvents();
  // Drains async events; returns false when the device reported a fatal error.
  bool HandleAsyncEvents();
  absl::Duration Now() const;

 private:
  explicit VerbsEndpoint(const Options& options);
  absl::Status Init();
  absl::Status PostRecv(int slot);

  Options options_;
  Clock* clock_;
  std::string device_;
  std::string clock_name_ = "monotonic";
  ibv_context* ctx_ = nullptr;
  ibv_pd* pd_ = nullptr;
  ibv_comp_channel* channel_ = nullptr;
  ibv_cq* cq_ = nullptr;
  ibv_cq_ex* cq_ex_ = nullptr;  // set when NIC timestamps are in use
  ibv_qp* qp_ = nullptr;
  ibv_mr* mr_ = nullptr;
  std::vector<uint8_t> buffer_;
  size_t slot_bytes_ = 0;
  int gid_index_ = 0;
  std::string gid_text_;
  uint32_t max_payload_ = 0;
  uint64_t hca_core_clock_khz_ = 0;
  std::vector<int> free_send_slots_;
  absl::Mutex ah_mu_;
  std::vector<ibv_ah*> ahs_ ABSL_GUARDED_BY(ah_mu_);
};

}  // namespace rocetune

#endif  // ROCETUNE_AGENT_PROBE_VERBS_ENDPOINT_H_
