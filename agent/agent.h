#ifndef ROCETUNE_AGENT_AGENT_H_
#define ROCETUNE_AGENT_AGENT_H_

#include <atomic>
#include <deque>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "agent/agent_metrics.h"
#include "agent/apply/applier.h"
#include "agent/apply/apply_intent.h"
#include "agent/apply/lkg_journal.h"
#include "agent/apply/local_guard.h"
#include "agent/apply/nic_owner.h"
#include "agent/host/cc_param_store.h"
#include "agent/host/counter_source.h"
#include "agent/host/nic_discovery.h"
#include "agent/host/pfc_config.h"
#include "agent/probe/prober.h"
#include "agent/report_wire.h"
#include "agent/sampler.h"
#include "daemon/clock.h"
#include "daemon/progress.h"
#include "daemon/tls.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/impl/rpc_method.h"
#include "rocetune/v1/agent.grpc.pb.h"

namespace rocetune {

// The host seams an agent runs against. Real hosts get the sysfs / netlink /
// ethtool / dcbnl / verbs implementations; the fabric simulator supplies its own.
// Any pointer except `discovery`, `counters` and `clock` may be null (the host
// lacks that mechanism; the agent then Nacks what it cannot do).
struct HostSeams {
  NicDiscovery* discovery = nullptr;
  CounterSource* counters = nullptr;
  CcParamStore* cc = nullptr;
  PfcConfig* pfc = nullptr;
  Prober* prober = nullptr;
  Clock* clock = nullptr;
  // When set, every parameter write goes through it instead of the NIC Applier
  // the agent builds from discovery, `cc` and `pfc` (a switch's WRED/ECN and PFC
  // configuration: agent/switch/). Not owned.
  ParameterApplier* applier = nullptr;
  // Extra Hello capabilities of the platform, e.g. "switch.sonic".
  std::vector<std::string> capabilities;
};

struct AgentOptions;
// Sets the report buffer and stall options from --report_buffer_max,
// --report_buffer_max_bytes and --stream_stall_timeout (both binaries that
// run agents take them).
void ConnectionOptionsFromFlags(AgentOptions* options);

struct AgentOptions {
  std::string host_id;  // required
  std::string controller = "127.0.0.1:7070";
  std::vector<std::pair<std::string, std::string>> labels;
  absl::Duration sample_interval = absl::Seconds(1);
  // Where the last-known-good parameter set is journaled; "" = a private temp dir.
  std::string state_dir;
  LocalGuardOptions guard;
  // How often every managed parameter is re-read and compared with the
  // applied set; a difference goes out as a "drift" GuardEvent.
  absl::Duration drift_interval = absl::Seconds(60);
  // Where this host's probe responders listen, advertised in Hello.
  v1::ProbeEndpoint probe_endpoint;
  // Mutual TLS to the controller; when not enabled, plaintext, which needs
  // insecure_loopback and a numeric loopback controller address or localhost.
  TlsOptions tls;
  bool insecure_loopback = true;
  // After the controller refused this agent's identity (PERMISSION_DENIED,
  // UNAUTHENTICATED) or another live stream holds it (a superseded stream,
  // ALREADY_EXISTS), the agent logs an error and waits this long before it
  // tries again, instead of flapping.
  absl::Duration refused_backoff = absl::Seconds(60);
  absl::Duration reconnect_min = absl::Milliseconds(200);
  // Reconnect attempts back off from reconnect_min, doubling to reconnect_max,
  // each wait jittered to half to all of it.
  absl::Duration reconnect_max = absl::Seconds(3);
  // Reports of rounds taken while the controller is unreachable are held, the
  // newest at most this many and this many bytes (encoded), and sent in order
  // on reconnect, each with how long it was held; older ones are dropped
  // (counted). 0 holds none.
  size_t report_buffer_max = 300;
  size_t report_buffer_max_bytes = size_t{4} << 20;
  // A stream whose write (Hello, Report, Ack) has not completed for this long
  // is cancelled, and the agent goes on as disconnected: a path that drops
  // packets (the controller's receive window full, a connect that hangs)
  // would otherwise hold up the sampling round, and with it the local guard.
  absl::Duration stall_timeout = absl::Seconds(5);
  // Optional, not owned: where the agent records its host series.
  AgentMetrics* metrics = nullptr;
};

// Counters of what the agent did, for tests and /metrics.
struct AgentStats {
  uint64_t connects = 0;
  uint64_t reports_sent = 0;
  uint64_t acks = 0;
  uint64_t nacks = 0;
  uint64_t guard_rollbacks = 0;
  uint64_t local_rounds = 0;          // rounds sampled while not connected (held, not sent then)
  uint64_t reports_held_sent = 0;     // held reports sent after a reconnect
  uint64_t reports_held_dropped = 0;  // held reports dropped (buffer full)
  uint64_t stalls = 0;                // streams cancelled for a stalled write
  std::string applied_version;
  std::string probe_plan_version;
};

// One agent: connects to the controller's AgentService.Connect stream, sends
// Hello, then a Report every sample interval, and answers each DesiredState /
// ProbePlan with Ack (after apply and read-back) or Nack (previous version kept).
// Reconnects with backoff; versions survive reconnects, nonces do not.
class Agent {
 public:
  static absl::StatusOr<std::unique_ptr<Agent>> Create(AgentOptions options, HostSeams seams);
  ~Agent();

  // Runs until Stop(). Returns OK after Stop(); never returns on its own.
  absl::Status Run();
  // Thread-safe; makes Run() return promptly.
  void Stop();

  // Builds the Hello this agent sends (inventory, labels, current parameters).
  absl::StatusOr<v1::Hello> BuildHello();
  AgentStats stats() const;
  // The version the NIC is expected to hold ("" for none or the baseline).
  std::string AppliedVersion() const;

  // Live changes (SIGHUP). Intervals take effect from the next round; labels
  // go out with the next Hello (the next connection); guard thresholds from
  // the next round the guard watches.
  void SetIntervals(absl::Duration sample_interval, absl::Duration drift_interval);
  void SetLabels(std::vector<std::pair<std::string, std::string>> labels);
  void SetGuardOptions(const LocalGuardOptions& guard);

  // How long the sampling loop may go without a round before the watchdog
  // stops being petted: three intervals, at least 10 s.
  static absl::Duration ProgressDeadline(absl::Duration sample_interval);

 private:
  Agent(AgentOptions options, HostSeams seams);
  // Creates the channel to `target` (the checked controller address).
  absl::Status MakeChannel(const std::string& target);
  // One connection lifetime; returns when the stream ends.
  absl::Status RunStream();
  // One sampling round into `report` (counters and levels lent from `batch`
  // when *lent, to be swapped back; latency windows; seq): runs the local
  // guard and updates /metrics, connected or not.
  void Round(SampleBatch* batch, v1::Report* report, bool* lent);
  // Takes the counters and levels Round lent to `report` back into batch_.
  void ReturnSamples(v1::Report* report);
  // Rounds while no stream is up, for `d` (or until Stop): /metrics and the
  // local guard do not depend on the controller. Guard events are kept for
  // the next Report sent. Returns true when stopped.
  bool LocalRoundsFor(absl::Duration d);
  // As LocalRoundsFor, until `done` is notified (or Stop). Returns true when
  // stopped.
  bool LocalRoundsUntil(const absl::Notification& done);
  bool LocalRounds(absl::Time end, const absl::Notification* done);
  // Waits up to `d` for the channel to connect, taking local rounds meanwhile
  // (a blocking wait stopped sampling for up to `d` per connect attempt while
  // the controller was down). Returns true when stopped.
  bool AwaitConnected(absl::Duration d);
  // Re-reads the NIC's parameters when a drift check is due (or `force`):
  // updates /metrics with what the device holds and adds a "drift" event
  // naming each parameter (expected, found) to `report` when any differ.
  // At start: settles an apply the previous process did not finish (see
  // NicOwner::ResolveInterruptedApply) and logs which set the host is on;
  // `current` is re-read when anything was found.
  void ResolveInterruptedApply(v1::ParameterSet* current);
  void MaybeCheckDrift(v1::Report* report, bool force);
  // Versions this host's local guard rolled back (bounded); never applied again.
  void RememberGuardRejected(const std::string& version);
  bool IsGuardRejected(const std::string& version);
  // Moves `report`'s guard events to unsent_guard_events_ (bounded).
  void KeepUnsentGuardEvents(v1::Report* report);
  absl::Duration SampleInterval() const;
  absl::Duration DriftInterval() const;
  // Loads the journal, records the baseline on first start, computes drift.
  absl::Status InitParameters();
  // `refused`: problems found before parsing (a parameter named twice); the
  // set is then NACKed with them and nothing is written.
  v1::AgentMessage ApplyDesiredState(const v1::DesiredState& ds,
                                     const std::vector<std::string>& refused = {});
  // The Connect stream writes encoded AgentMessages (grpc::ByteBuffer): the
  // Report of each round is encoded by ReportWireEncoder into a kept buffer,
  // the rare other messages by protobuf.
  // Bytes both ways: the agent encodes Reports itself, and reads the
  // controller's messages as bytes so that a parameter named twice (which
  // parsing hides) can be refused.
  using Stream = grpc::ClientReaderWriter<grpc::ByteBuffer, grpc::ByteBuffer>;
  // `wire` is `msg` as received.
  void HandleMessage(const v1::ControllerMessage& msg, absl::string_view wire, Stream* stream);
  bool Write(Stream* stream, const v1::AgentMessage& msg);
  bool WriteBytes(Stream* stream, absl::string_view bytes);
  // WriteBytes on a helper thread: when the write takes longer than one sample
  // interval (a path that drops packets, or a full flow-control window), this
  // thread takes local rounds meanwhile, so sampling and the local guard go on
  // until the write ends or the stall timeout cancels the stream. Reports of
  // those rounds are held and sent after it.
  bool WriteWhileSampling(Stream* stream, absl::string_view bytes);
  // Encodes `report` (without guard events: they are kept apart) into the
  // held-report ring, dropping the oldest beyond its bounds.
  void HoldReport(const v1::Report& report);
  // Writes the held reports in order, oldest first, each with how long it was
  // held; false when a write failed (the rest stay held).
  bool SendHeldReports(Stream* stream);

  AgentOptions options_;
  HostSeams seams_;
  std::shared_ptr<grpc::Channel> channel_;
  std::string connect_method_;  // "/rocetune.v1.AgentService/Connect"
  std::unique_ptr<grpc::internal::RpcMethod> connect_;
  std::unique_ptr<Sampler> sampler_;            // used only by the Run() thread
  std::unique_ptr<Applier> applier_;            // the NIC applier, unless seams_.applier is set
  ParameterApplier* active_applier_ = nullptr;  // seams_.applier or applier_
  std::unique_ptr<LkgJournal> journal_;
  std::unique_ptr<LocalGuard> guard_;
  // Every write of the NIC's parameters goes through the owner.
  std::unique_ptr<ApplyIntent> intent_;
  std::unique_ptr<NicOwner> owner_;
  std::vector<std::string> drift_ ABSL_GUARDED_BY(mu_);  // for Hello: start and last check
  std::atomic<bool> stopping_{false};
  // Set by an apply: the next round re-reads the NIC at once.
  std::atomic<bool> check_drift_now_{false};
  absl::Notification stopped_;

  absl::Mutex write_mu_;
  mutable absl::Mutex mu_;
  // Guards the live-changeable fields of options_: sample_interval,
  // drift_interval, labels.
  mutable absl::Mutex live_mu_;
  ProgressLoop* sampling_progress_ = nullptr;
  grpc::ClientContext* active_context_ ABSL_GUARDED_BY(mu_) = nullptr;
  AgentStats stats_ ABSL_GUARDED_BY(mu_);
  uint64_t report_seq_ ABSL_GUARDED_BY(mu_) = 0;
  // Used only by the Run() thread: the sample messages lent to each round's
  // Report, and guard events of rounds that could not be sent.
  SampleBatch batch_;
  std::vector<v1::GuardEvent> unsent_guard_events_;
  // Held reports (Run() thread only): the encoded AgentMessage and when the
  // round was taken (Clock::Monotonic).
  struct HeldReport {
    std::string message;
    absl::Duration taken;
  };
  std::deque<HeldReport> held_reports_;
  size_t held_bytes_ = 0;
  ReportWireEncoder held_encoder_;
  // When the write in progress started (absl::ToUnixNanos; 0 = none), read by
  // the stream's stall watch.
  std::atomic<int64_t> write_started_nanos_{0};
  std::vector<std::string> guard_rejected_ ABSL_GUARDED_BY(mu_);
  // When the next round is due while disconnected (kept across backoffs).
  absl::Time next_local_round_ = absl::InfinitePast();
  // When the next drift check is due (Run() thread only).
  absl::Duration next_drift_check_ = absl::ZeroDuration();
};

}  // namespace rocetune

#endif  // ROCETUNE_AGENT_AGENT_H_
