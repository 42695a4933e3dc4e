#ifndef ROCETUNE_AGENT_PROBE_VERBS_PROBER_H_
#define ROCETUNE_AGENT_PROBE_VERBS_PROBER_H_

#include <infiniband/verbs.h>

#include <cstdint>
#include <deque>
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
#include "agent/probe/verbs_endpoint.h"

namespace rocetune {

// Prober over RDMA UD verbs: one UD QP on one local port, an address handle per
// peer GID, sequence-numbered probes at the plan's (jittered) rate with the plan's
// traffic class in the GRH. The peer runs a VerbsResponder, which answers with an
// immediate ACK and then a follow-up carrying its receive-completion to
// send-completion delay; network RTT = round trip - that delay (R-Pingmesh).
// Samples are on the NIC completion clock when the device has one
// ("nic_completion"), else "monotonic". A peer whose GID cannot be resolved
// (unknown, down) or a device that fails is counted as loss and logged once.
class VerbsProber : public Prober {
 public:
  struct Options {
    VerbsEndpoint::Options endpoint;
    uint64_t seed = 0;  // 0: random
  };

  // kUnavailable when there is no (such) RDMA device or port; nothing is started.
  static absl::StatusOr<std::unique_ptr<VerbsProber>> Create(const Options& options);
  ~VerbsProber() override;

  std::string kind() const override { return "verbs"; }
  // kInvalidArgument for a malformed plan (rate, size above the port MTU, class,
  // timeout, a GID that does not parse, qpn 0 or above 2^24). Nothing changes then.
  absl::Status SetPlan(const v1::ProbePlan& plan) override;
  std::vector<v1::LatencyWindow> TakeWindow() override;

  ProbeAnomalies anomalies() const { return tracker_.anomalies(); }
  std::string gid() const { return gid_; }
  uint32_t qpn() const { return qpn_; }
  std::string clock_name() const { return clock_name_; }
  // Stops probing and joins the threads. May wait for an address resolution in
  // progress (bounded by the kernel's resolution timeout). Idempotent.
  void Stop();

 private:
  struct Peer {
    std::string peer_class;
    ibv_gid gid;
    std::string gid_text;
    uint32_t qpn = 0;
    uint32_t qkey = 0;
    ibv_ah* ah = nullptr;
    bool resolving = false;
    bool failed_once = false;
    absl::Duration resolve_started;
    absl::Duration next_resolve;
  };
  struct ResolveJob {
    uint64_t generation = 0;
    int peer = 0;
    ibv_gid gid{};
    uint8_t traffic_class = 0;
  };
  struct ResolveResult {
    uint64_t generation = 0;
    int peer = 0;
    ibv_ah* ah = nullptr;  // nullptr: failed
    std::string error;
  };
  struct Plan {
    std::vector<Peer> peers;
    std::optional<ProbePacer> pacer;
    uint32_t payload_bytes = 0;
    uint8_t traffic_class = 0;
    absl::Duration timeout;
  };

  VerbsProber(std::unique_ptr<VerbsEndpoint> ep, uint64_t seed, int stop_fd);
  void Loop();
  // Address resolution can block (ARP / ND), so it runs on its own thread, which
  // shares only this state (and the endpoint) with the prober: a resolver stuck
  // in the kernel at Stop() is left to finish on its own.
  struct Resolver {
    absl::Mutex mu;
    std::deque<ResolveJob> jobs ABSL_GUARDED_BY(mu);
    std::vector<ResolveResult> results ABSL_GUARDED_BY(mu);
    bool stop ABSL_GUARDED_BY(mu) = false;
    bool busy ABSL_GUARDED_BY(mu) = false;  // inside CreateAh
    std::shared_ptr<VerbsEndpoint> ep;
  };
  static void ResolverLoop(std::shared_ptr<Resolver> r);
  void StartResolve(int peer_index, absl::Duration now);
  void TakeResolved(absl::Duration now);
  void SendDue(absl::Duration now);
  void OnCompletion(const VerbsEndpoint::Completion& c);

  std::shared_ptr<VerbsEndpoint> ep_;
  const uint64_t session_;
  uint64_t seed_;
  const int stop_fd_;
  const std::string gid_;
  const uint32_t qpn_;
  const std::string clock_name_;
  ProbeTracker tracker_;
  absl::Mutex mu_;
  std::optional<Plan> next_plan_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<Resolver> resolver_;
  std::thread resolver_thread_;
  // Owned by the loop thread.
  Plan plan_;
  uint64_t generation_ = 0;
  std::vector<uint64_t> slot_seq_;
  bool device_ok_ = true;
  std::thread thread_;
  bool stopped_ = false;
};

}  // namespace rocetune

#endif  // ROCETUNE_AGENT_PROBE_VERBS_PROBER_H_
