#ifndef ROCETUNE_AGENT_PROBE_VERBS_RESPONDER_H_
#define ROCETUNE_AGENT_PROBE_VERBS_RESPONDER_H_

#include <infiniband/verbs.h>

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "agent/probe/verbs_endpoint.h"

namespace rocetune {

// Answers verbs probe requests on one UD QP from its own thread: an ACK at once
// (echoing session and sequence number), then, when the ACK's send completion
// arrives, a DELAY follow-up carrying receive-completion to send-completion time
// on the NIC clock. Without NIC timestamps the delay is receive-poll to just
// before the ACK's post_send on CLOCK_MONOTONIC, and the follow-up goes out right
// after the ACK. Replies use the responder's own qkey. Anything that is not a well-formed
// request is counted and logged once.
class VerbsResponder {
 public:
  struct Stats {
    uint64_t answered = 0;
    uint64_t malformed = 0;
    uint64_t ignored = 0;
    uint64_t errors = 0;  // reply could not be addressed or posted
  };

  // kUnavailable when there is no (such) RDMA device or port.
  static absl::StatusOr<std::unique_ptr<VerbsResponder>> Start(
      const VerbsEndpoint::Options& options);
  ~VerbsResponder();
  void Stop();

  std::string gid() const { return gid_; }
  uint32_t qpn() const { return qpn_; }
  uint32_t qkey() const { return qkey_; }
  std::string clock_name() const { return clock_name_; }
  Stats stats() const;

 private:
  struct InFlight {
    bool ack = false;
    ibv_ah* ah = nullptr;
    uint32_t qpn = 0;
    uint64_t session = 0;
    uint64_t seq = 0;
    absl::Duration t_recv;
    size_t length = 0;
  };

  VerbsResponder(std::unique_ptr<VerbsEndpoint> ep, int stop_fd);
  void Loop();
  void OnCompletion(const VerbsEndpoint::Completion& c);
  bool Send(const InFlight& f, uint64_t delay_ns);
  ibv_ah* ReplyAh(const VerbsEndpoint::Completion& c);

  std::unique_ptr<VerbsEndpoint> ep_;
  const int stop_fd_;
  const std::string gid_;
  const uint32_t qpn_;
  const uint32_t qkey_;
  const std::string clock_name_;
  std::vector<InFlight> in_flight_;
  std::map<std::string, ibv_ah*> ah_cache_;
  std::atomic<uint64_t> answered_{0};
  std::atomic<uint64_t> malformed_{0};
  std::atomic<uint64_t> ignored_{0};
  std::atomic<uint64_t> errors_{0};
  std::thread thread_;
  bool stopped_ = false;
};

}  // namespace rocetune

#endif  // ROCETUNE_AGENT_PROBE_VERBS_RESPONDER_H_
