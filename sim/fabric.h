#ifndef ROCETUNE_SIM_FABRIC_H_
#define ROCETUNE_SIM_FABRIC_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "model/quantile_sketch.h"
#include "rocetune/v1/agent.pb.h"
#include "rocetune/v1/scenario.pb.h"
#include "sim/byte_fifo.h"
#include "sim/dcqcn_config.h"
#include "sim/ecn_marker.h"
#include "sim/flow_size_cdf.h"
#include "sim/pfc_port.h"
#include "sim/reaction_point.h"
#include "sim/summary.h"

namespace rocetune::sim {

// Counters one simulated host's NIC exposes (canonical names in sim_host.cc).
struct HostCounters {
  uint64_t tx_bytes = 0, rx_bytes = 0, tx_packets = 0, rx_packets = 0;
  uint64_t cnp_sent = 0, cnp_handled = 0, ecn_marked_packets = 0;
  std::array<uint64_t, 8> rx_pause_frames{}, tx_pause_frames{};
  std::array<uint64_t, 8> rx_pause_us{}, tx_pause_us{};
};

// One port of a simulated ToR: a host below it or a spine above it.
struct TorPort {
  std::string name;  // "Ethernet0", "Ethernet4", ... (SONiC style, 4 lanes per port)
  std::string peer;  // "h3", "spine1"
  double gbps = 0;
};

// Counters of one egress queue (priority) of a ToR port, since the start.
// Packets are the fluid model's bytes / MTU; ECN-marked packets are expected
// marks (bytes dequeued / MTU x marking probability), rounded down.
struct TorQueueCounters {
  uint64_t packets = 0, bytes = 0, ecn_marked_packets = 0, dropped_packets = 0, dropped_bytes = 0;
  uint64_t occupancy_bytes = 0;  // a level: bytes queued at the last synchronisation
};

// Counters of one ToR port: its eight egress queues and the PFC frames it sent
// (to pause its peer) and received (paused by its peer), per priority.
struct TorPortCounters {
  std::array<TorQueueCounters, 8> queues{};
  std::array<uint64_t, 8> tx_pfc_frames{}, rx_pfc_frames{};
};

// A RoCE fabric as a fixed-time-step fluid model (docs/design.md;
// facts in docs/dcqcn-model.md). Each step of step_ns:
//  - every NIC sends each active flow's bytes at its DCQCN rate (flows of one
//    NIC share its link in proportion to demand; nothing is sent on a priority
//    the switch has paused);
//  - every switch egress (port, priority) queue drains at link rate in arrival
//    order (FIFO: bytes that arrive behind a standing queue wait for it),
//    shared among unpaused priorities equally; ECN marks at dequeue with the RED probability
//    of the bytes left in the queue; bytes cross a link in
//    max(1, round(delay / step)) steps;
//  - the receiver NIC (notification point) turns marked arrivals into CNPs, at
//    most one per min_time_between_cnps per flow, which reach the sender's
//    ReactionPoint one path delay later;
//  - every switch ingress (port, priority) whose buffered bytes pass XOFF pauses
//    its upstream transmitter (from the next step) until they fall below XON,
//    so pauses spread hop by hop and block every flow behind them;
//  - probes cross the fabric hop by hop, each waiting for the queue in front of
//    it (and for a pause to end): RTT = propagation + serialisation + queueing.
// Deterministic for a scenario and seed. Step() and the statistics belong to
// one thread; the host-facing methods (counters, parameters, probe plans, ECN)
// are thread-safe and take effect at the next synchronisation point (every
// sync_interval of simulated time).
class Fabric {
 public:
  // Validates `scenario`; kInvalidArgument names the offending field.
  static absl::StatusOr<std::unique_ptr<Fabric>> Create(const v1::Scenario& scenario);
  ~Fabric();

  // One time step.
  void Step();
  // Steps until now_ns() >= t_ns or the scenario's end.
  void RunUntil(int64_t t_ns);
  void RunToEnd() { RunUntil(end_ns()); }
  int64_t now_ns() const { return now_ns_; }
  // now_ns() as of the last synchronisation point: the time the host-facing
  // counters describe. Thread-safe.
  int64_t synced_ns() const { return synced_ns_.load(std::memory_order_acquire); }
  int64_t end_ns() const { return end_ns_; }
  int64_t step_ns() const { return step_ns_; }
  bool done() const { return now_ns_ >= end_ns_; }
  uint64_t events() const { return events_; }
  const v1::Scenario& scenario() const { return scenario_; }

  SimSummary Summary(double wall_seconds) const;

  // ---- The job signal (docs/job-signal.md): what a training job on these
  // hosts would tell its agents. Off by default (offline runs keep nothing).
  // Once on, every all-reduce step and incast burst that completes leaves one
  // event per host that took part, with how long that host's part took:
  // all-reduce (op "allreduce"), each ring host from the step's start until
  // its own chunk was sent and its neighbour's received; incast (op
  // "incast"), each sender until its flow was acked, the receiver until the
  // whole burst was.
  struct SimJobEvent {
    int host = 0;
    const char* op = "";
    double seconds = 0;
    uint64_t bytes = 0;
  };
  // Before the first Step().
  void EnableJobEvents() {
    job_events_on_ = true;
    ar_host_done_ns_.assign(num_hosts_, 0);
  }
  // The events since the previous call, in completion order; Step()'s thread.
  std::vector<SimJobEvent> TakeJobEvents();

  // ---- Host-facing, thread-safe. `host` is in [0, host_count()).
  int host_count() const { return num_hosts_; }
  std::string HostName(int host) const;
  // -1 when no host has that name.
  int HostIndex(const std::string& name) const;
  double host_link_gbps() const { return host_gbps_; }
  // Index of the ToR the host hangs under.
  int HostTor(int host) const { return hosts_[host].tor; }
  HostCounters Counters(int host) const;
  std::map<std::string, int64_t> HostDcqcn(int host) const;
  absl::Status SetHostDcqcn(int host, const std::string& name, int64_t value);
  uint8_t HostPfcMask(int host) const;
  absl::Status SetHostPfcMask(int host, uint8_t mask);
  // The host NIC's per-priority DCQCN enables (bit p = priority p, 0xff at
  // start). A flow whose priority the sender's reaction point is off on
  // ignores CNPs (it runs at line rate, PFC aside): taken by flows that start
  // after the write; a receiver whose notification point is off on a flow's
  // priority sends it no CNP: from the next synchronisation point.
  uint8_t HostRpEnableMask(int host) const;
  uint8_t HostNpEnableMask(int host) const;
  void SetHostEnableMasks(int host, uint8_t rp, uint8_t np);
  // Peers are host names. kInvalidArgument for an unknown peer, a peer equal to
  // `host`, or a non-positive rate; nothing changes then.
  absl::Status SetProbePlan(int host, const v1::ProbePlan& plan);
  // Probe results since the previous call, per peer class.
  std::vector<v1::LatencyWindow> TakeProbeWindow(int host);
  // Every switch's marking (the scenario's "ecn"); SetEcn overrides every ToR's own.
  v1::EcnSettings Ecn() const;
  absl::Status SetEcn(const v1::EcnSettings& ecn);

  // ---- Switch-facing (the ToRs), thread-safe. `tor` is in [0, tor_count()).
  int tor_count() const { return num_tors_; }
  std::string TorName(int tor) const;  // "tor3"
  // Host-facing ports first (in host order), then one uplink per spine.
  std::vector<TorPort> TorPorts(int tor) const;
  double switch_buffer_bytes() const { return switch_buffer_; }
  bool pfc_enabled() const { return pfc_enabled_; }
  // Indexed like TorPorts.
  std::vector<TorPortCounters> TorCounters(int tor) const;
  // The marking of every egress queue of the ToR, and a version that every
  // change of the ToR's settings (its own or through SetEcn) increments.
  v1::EcnSettings TorEcn(int tor, uint64_t* version = nullptr) const;
  // Lossless priorities of each port (PFC on the port's ingress; bit p =
  // priority p), indexed like TorPorts.
  std::vector<uint8_t> TorPfcMasks(int tor, uint64_t* version = nullptr) const;
  // Sets the ToR's marking and ports' PFC masks (those given; a port index -> mask)
  // at once. When `expected_version` is given and the ToR's version differs,
  // kAborted and nothing changes. kInvalidArgument (nothing changes) for pmax
  // outside [0, 1], kmin above kmax, kmax above the buffer, a bad port.
  absl::Status SetTorConfig(int tor, const v1::EcnSettings* ecn,
                            const std::map<int, uint8_t>& pfc_masks,
                            std::optional<uint64_t> expected_version);

 private:
  enum class FlowKind : uint8_t { kLong, kIncast, kAllReduce, kBackground };
  static constexpr int kMaxLinks = 4;
  static constexpr int kCnpRing = 16;
  static constexpr int kMaxProbeLinks = 8;
  static constexpr int kInlinePipe = 12;

  // CNPs the notification point sent in one step, due at the sender at_ns.
  struct CnpBatch {
    int64_t at_ns = 0;
    uint32_t count = 0;
    bool measured = false;  // sent inside the measurement window
  };
  struct Link {
    int from = 0, to = 0;
    bool from_switch = false, to_switch = false;
    double bytes_per_step = 0;
    double bytes_per_ns = 0;
    double delay_ns = 0;
    int delay_steps = 1;
    int slot = 0;  // pipe cell of this step: steps_ % delay_steps
    std::string name;
    // Egress queue at `from` (switch links only), per priority.
    std::array<double, 8> q{};
    std::array<ByteFifo, 8> fifo;
    std::array<double, 8> mark_p{};
    // Bytes that arrived over this link at switch `to` and are still buffered there.
    std::array<double, 8> ingress{};
    // PFC at `to` (links into a switch): bit p of pfc.paused_mask(): the
    // transmitter at `from` may not send priority p.
    PfcPort pfc;
    double tx_bytes_measured = 0;
    // Since the start, per priority: bytes dequeued, expected marked packets,
    // bytes dropped on admission to this egress queue, PFC frames sent to `from`.
    std::array<double, 8> tx_total{}, marked_total{}, dropped_total{};
    std::array<uint64_t, 8> pause_total{};
    // Priorities on which the switch at `to` applies PFC to this ingress.
    uint8_t pfc_mask = 0xff;
    uint64_t pause_frames = 0;
    double paused_ns = 0;
    // Queue statistics per used priority (index into queue_stats_), -1 = none.
    std::array<int, 8> stat{};
  };
  struct QueueStat {
    int link = 0, prio = 0;
    double sum = 0;
    double max = 0;
    QuantileSketch sketch;
  };
  struct Flow {
    uint64_t id = 0;
    FlowKind kind = FlowKind::kLong;
    int group = -1;  // incast burst / all-reduce step / long flow index
    int src = 0, dst = 0, prio = 3;
    int nlinks = 0;
    std::array<int, kMaxLinks> links{};
    std::array<double, kMaxLinks> backlog{};  // [h]: queue at the egress of links[h]
    std::array<int, kMaxLinks> pipe_off{};
    // Bytes crossing each link, one cell per step of link delay. Inline when
    // the path is short enough, else in pipe_heap.
    std::array<double, kInlinePipe> pipe_inline{};
    std::vector<double> pipe_heap;  // empty when pipe_inline is used
    double* pipe() { return pipe_heap.empty() ? pipe_inline.data() : pipe_heap.data(); }
    double size = 0;  // infinity for long-lived flows
    double sent = 0, delivered = 0;
    double delivered_measured = 0;
    double want = 0;
    double byte_acc = 0;
    double marks = 0;  // expected marked packets dequeued this step
    int64_t start_ns = 0;
    int64_t one_way_ns = 0;
    int64_t base_rtt_ns = 0;
    int64_t last_cnp_ns = 0;
    bool sent_cnp = false;
    // CNPs on their way to the sender, in arrival order.
    std::array<CnpBatch, kCnpRing> cnps{};
    int cnp_head = 0, cnp_count = 0;
    bool dcqcn = true;
    std::unique_ptr<ReactionPoint> rp;
    double fct_us = -1;
  };
  struct Probe {
    int host = 0, peer = 0, cls = 0, prio = 3;
    int nlinks = 0, hop = 0;
    std::array<int, kMaxProbeLinks> links{};
    int64_t ready_ns = 0, start_ns = 0;
    double bytes = 64;
  };
  struct HostState {
    int up = 0, down = 0, tor = 0;
    // Fabric-thread counters.
    double tx_bytes = 0, rx_bytes = 0, cnp_sent = 0, cnp_handled = 0, marked = 0;
    std::array<double, 8> rx_pause_frames{}, rx_pause_ns{};
    // NIC demand per priority of the current step (filled by the previous
    // step and by flows started this step) and of the next step.
    std::array<double, 8> demand{}, next_demand{};
    double scale = 1;  // share of its demand the NIC sends this step
    // Probing (fabric thread copy of the plan).
    std::vector<int> probe_peers;
    std::vector<int> probe_cls;
    std::vector<std::string> class_names;
    double probe_interval_ns = 0;
    int64_t next_probe_ns = 0;
    size_t next_peer = 0;
    std::vector<QuantileSketch> window;  // per class, since the last sync
    std::vector<uint64_t> window_sent;
    RpParams rp;
    int64_t min_cnp_gap_ns = 0;
    bool dcqcn = true;
    uint8_t pfc_mask = 0xff;
    uint8_t rp_mask = 0xff, np_mask = 0xff;  // per-priority DCQCN enables
  };
  struct WindowAcc {
    QuantileSketch rtt;
    uint64_t sent = 0;
  };
  struct Shared {  // guarded by mu_
    HostCounters counters;
    v1::DcqcnSettings dcqcn;
    bool dcqcn_dirty = false;
    uint8_t pfc_mask = 0xff;
    uint8_t rp_mask = 0xff, np_mask = 0xff;
    bool plan_dirty = false;
    v1::ProbePlan plan;
    std::map<std::string, WindowAcc> windows;
  };
  struct TorShared {  // guarded by mu_
    v1::EcnSettings ecn;
    bool ecn_dirty = false;
    std::vector<uint8_t> pfc_masks;  // per port
    bool pfc_dirty = false;
    uint64_t version = 0;
    std::vector<TorPortCounters> counters;
  };
  struct Burst {
    int64_t start_ns = 0;
    int remaining = 0;
    int64_t end_ns = 0;
    int receiver = 0;
    uint64_t bytes_per_sender = 0;
    // With the job signal on: (sender, its flow's end), as they finish.
    std::vector<std::pair<int, int64_t>> sender_done;
  };

  explicit Fabric(const v1::Scenario& scenario);
  // Init validates the scenario and builds the model, in this order; each step
  // returns kInvalidArgument naming the offending field.
  absl::Status Init();
  // Step length, run and warm-up length, MTU, statistics intervals.
  absl::Status ConfigureRun();
  // Hosts, ToRs, spines and the links between them.
  absl::Status BuildTopology();
  // DCQCN parameters of every host's reaction points.
  absl::Status ConfigureHosts();
  // ECN marking and PFC thresholds of the switch queues.
  absl::Status ConfigureQueues();
  // The workload generators; each ORs the priorities it uses (bit p) into *used.
  absl::Status ConfigureWorkloads(uint8_t* used);
  absl::Status ConfigureLongFlows(uint8_t* used);
  absl::Status ConfigureIncasts(uint8_t* used);
  absl::Status ConfigureAllReduce(uint8_t* used);
  absl::Status ConfigureBackground(uint8_t* used);
  // The standalone probe plan; ORs the probe priority into *used.
  absl::Status ConfigureProbes(uint8_t* used);
  // Queue statistics for the `used` priorities, and the FCT bins.
  absl::Status ConfigureStatistics(uint8_t used);
  // kInvalidArgument naming `field` unless `host` exists / `prio` is in [0, 7].
  absl::Status CheckHost(const std::string& field, uint32_t host) const;
  static absl::Status CheckPriority(const std::string& field, uint32_t prio);
  int AddLink(int from, int to, double gbps, bool from_switch, bool to_switch);
  void Route(int src, int dst, uint64_t hash, std::vector<int>* links) const;
  std::string NodeName(int node) const;
  int StartFlow(FlowKind kind, int group, int src, int dst, double bytes, int prio);
  void FinishFlow(int slot);
  void Generate();
  void StartAllReduceStep();
  // Drains every switch egress queue for one step, in FIFO order.
  void ServeQueues();
  void Dequeue(Link& l, int p, double budget);
  // One step of byte movement: ArriveBytes, ServeQueues, ShareNicLinks, SendFromNics.
  void MoveBytes();
  // Bytes that finished crossing a link this step: delivered at the receiver,
  // or admitted into the next egress queue (dropped beyond the shared buffer or
  // the PFC admit limit, and then resent by the sender).
  void ArriveBytes(bool measure);
  // Each NIC's flows share its link in proportion to demand; nothing is sent on
  // a priority the ToR has paused (when the host honours PFC on it).
  void ShareNicLinks();
  // Each active flow sends its share, then runs its notification and reaction
  // points; completed flows finish; next step's demand is set.
  void SendFromNics(bool measure);
  // Notification point: turns the flow's marked packets of this step into
  // CNPs (at most one per min_time_between_cnps) on their way to the sender.
  void Notify(Flow& f, bool measure);
  // Delivers due CNPs, runs the reaction point; returns true when the flow completed.
  bool React(Flow& f);
  void UpdatePfc();
  void RunProbes();
  void SendProbe(int host, int peer, int cls, int prio, double bytes);
  void RecordProbe(const Probe& p, int64_t done_ns);
  void Sample();
  void Sync();
  // XOFF of every ingress (port, priority) of switch node `sw` now.
  // The ToR's ports as (egress link, ingress link), indexed like TorPorts.
  std::vector<std::pair<int, int>> TorPortLinks(int tor) const;
  void SyncTors() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  double XoffThreshold(int sw) const { return pfc_.Xoff(switch_buffer_, switch_total_[sw]); }
  bool measuring() const { return now_ns_ >= warmup_ns_; }
  uint64_t Hash(uint64_t a, uint64_t b) const;

  v1::Scenario scenario_;
  std::mt19937_64 rng_;
  int64_t step_ns_ = 1000;
  int64_t now_ns_ = 0;
  int64_t end_ns_ = 0;
  int64_t warmup_ns_ = 0;
  uint64_t steps_ = 0;
  uint64_t measured_steps_ = 0;
  uint64_t events_ = 0;
  double mtu_ = 1024;
  double host_gbps_ = 100;
  double uplink_gbps_ = 100;  // ToR-spine links (nominal when there is no spine)
  int num_hosts_ = 0, num_tors_ = 0, num_spines_ = 0, hosts_per_tor_ = 1;
  std::vector<Link> links_;
  std::vector<int> switch_links_;   // links leaving a switch
  std::vector<int> ingress_links_;  // links entering a switch
  std::vector<std::vector<int>> tor_up_, spine_down_;
  std::vector<double> switch_total_;
  std::vector<double> admit_limit_;
  double switch_buffer_ = 0;
  std::vector<HostState> hosts_;
  std::vector<int> used_prios_;
  uint8_t pfc_prio_mask_ = 0;
  bool pfc_enabled_ = false;
  PfcPortConfig pfc_;
  // Marking per switch node (index node - num_hosts_: ToRs, then spines).
  std::vector<EcnMarker> switch_ecn_;
  std::vector<QueueStat> queue_stats_;
  int64_t stats_every_steps_ = 10;
  int64_t sync_every_steps_ = 100;

  std::vector<Flow> flows_;  // slots
  std::vector<int> free_slots_;
  std::vector<int> active_;
  uint64_t next_flow_id_ = 1;
  std::vector<int> long_flow_slot_;  // per scenario long flow, -1 before start
  std::vector<SimSummary::Flow> long_results_;
  std::vector<uint64_t> fct_bounds_;
  std::vector<std::vector<float>> fct_bins_;
  double delivered_measured_ = 0;
  uint64_t flows_started_ = 0, flows_completed_ = 0;

  // Workload generators.
  size_t next_long_ = 0;
  std::vector<int> long_order_;
  std::vector<int64_t> incast_next_ns_;
  std::vector<uint32_t> incast_done_;
  std::vector<Burst> bursts_;
  std::vector<double> burst_us_;
  std::vector<int> ring_;
  int64_t ar_next_ns_ = -1;
  uint32_t ar_steps_done_ = 0;
  int ar_remaining_ = 0;
  int64_t ar_step_start_ns_ = 0;
  std::vector<double> ar_step_us_;
  // The job signal (EnableJobEvents): events not yet taken, and each ring
  // host's last flow end in the current all-reduce step.
  bool job_events_on_ = false;
  std::vector<SimJobEvent> job_events_;
  std::vector<int64_t> ar_host_done_ns_;
  std::vector<int> bg_hosts_;
  std::vector<int64_t> bg_next_ns_;
  double bg_mean_gap_ns_ = 0;
  double bg_max_load_ = 0;  // the higher of background.load and step_load
  // The background load in force at `t_ns` (workload.background's step).
  double BackgroundLoadAt(int64_t t_ns) const;
  std::unique_ptr<FlowSizeCdf> bg_cdf_;

  std::vector<Probe> probes_;
  // Probe RTTs of the measurement window, at 0.5 % relative accuracy (quantile
  // steps of 1 %).
  QuantileSketch probe_rtt_{0.005};
  QuantileSketch probe_rtt_intra_tor_{0.005};  // probes within one ToR
  std::vector<int> probe_hosts_;

  // Totals over the measurement window [warmup, now) (the hosts' NIC counters
  // cover the whole run). cnp_handled_ counts CNPs sent inside the window.
  double cnp_sent_ = 0, cnp_handled_ = 0, marked_ = 0, dropped_ = 0;
  uint64_t pause_frames_ = 0;
  double paused_ns_ = 0;
  uint64_t host_rx_pause_frames_ = 0;
  double host_rx_paused_ns_ = 0;

  mutable absl::Mutex mu_;
  std::atomic<int64_t> synced_ns_{0};  // written in Sync, under mu_
  std::vector<Shared> shared_ ABSL_GUARDED_BY(mu_);
  v1::EcnSettings pending_ecn_ ABSL_GUARDED_BY(mu_);
  bool ecn_dirty_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<TorShared> tor_shared_ ABSL_GUARDED_BY(mu_);
};

}  // namespace rocetune::sim

#endif  // ROCETUNE_SIM_FABRIC_H_
