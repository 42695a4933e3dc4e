#ifndef ROCETUNE_AGENT_PROBE_UDP_PROBER_H_
#define ROCETUNE_AGENT_PROBE_UDP_PROBER_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "agent/probe/probe_pacer.h"
#include "agent/probe/probe_tracker.h"
#include "agent/probe/prober.h"
#include "agent/probe/socket_address.h"
#include "daemon/clock.h"

namespace rocetune {

// Prober over UDP (hosts without RDMA, tests in network namespaces). Sends
// sequence-numbered probes from its own thread to every peer's udp_address at the
// plan's rate (jittered), with IP_TOS / IPV6_TCLASS set to the plan's
// traffic_class. The peer runs a UdpResponder. Clock "monotonic".
class UdpProber : public Prober {
 public:
  struct Options {
    Clock* clock = nullptr;  // nullptr: Clock::Real()
    uint64_t seed = 0;       // 0: random; seeds the session id and the jitter
    std::string bind_v4 = "0.0.0.0:0";
    std::string bind_v6 = "[::]:0";
  };

  // kUnavailable when no socket can be opened.
  static absl::StatusOr<std::unique_ptr<UdpProber>> Create(const Options& options);
  ~UdpProber() override;
  UdpProber(const UdpProber&) = delete;
  UdpProber& operator=(const UdpProber&) = delete;

  std::string kind() const override { return "udp"; }
  // kInvalidArgument for a malformed plan: bad rate / size / class / timeout, an
  // unparsable udp_address or one of a family without a socket. Nothing changes then.
  absl::Status SetPlan(const v1::ProbePlan& plan) override;
  std::vector<v1::LatencyWindow> TakeWindow() override;

  ProbeAnomalies anomalies() const { return tracker_.anomalies(); }
  uint64_t session() const { return session_; }
  // Local UDP port of the IPv4 socket (replies arrive there); 0 without one.
  int local_port_v4() const;
  // Stops sending and joins the thread. Idempotent; outstanding probes stay unresolved.
  void Stop();

 private:
  struct Peer {
    std::string peer_class;
    SocketAddress address;
  };
  struct Plan {
    std::vector<Peer> peers;
    std::optional<ProbePacer> pacer;
    uint32_t payload_bytes = 0;
    absl::Duration timeout;
  };

  UdpProber(const Options& options, int fd4, int fd6, int stop_fd, uint64_t seed);
  void Loop();
  void SendDue(absl::Duration now);
  void Drain(int fd);

  Clock* const clock_;
  const int fd4_;
  const int fd6_;
  const int stop_fd_;
  const uint64_t session_;
  uint64_t seed_;
  ProbeTracker tracker_;
  absl::Mutex mu_;
  Plan plan_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
  bool stopped_ = false;
};

}  // namespace rocetune

#endif  // ROCETUNE_AGENT_PROBE_UDP_PROBER_H_
