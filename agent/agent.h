#ifndef ROCETUNE_AGENT_AGENT_H_
#define ROCETUNE_AGENT_AGENT_H_

#include <functional>
#include <memory>
#include <optional>
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
#include "agent/job/job_listener.h"
#include "agent/probe/prober.h"
#include "agent/sampler.h"
#include "agent/sampling_loop.h"
#include "agent/stream_client.h"
#include "daemon/clock.h"
#include "daemon/progress.h"
#include "daemon/tls.h"
#include "rocetune/v1/agent.pb.h"

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
  // The job signal's socket (docs/job-signal.md): "" = none. Its group
  // (mode 0660): "" = the agent's own.
  std::string job_socket;
  std::string job_socket_group;
  // Optional, not owned: the sampling loop's watchdog entry (the daemon
  // registers one; agents embedded in the simulator have none).
  ProgressLoop* sampling_progress = nullptr;
  // Test seam, see SamplingLoopOptions::round_gate.
  std::function<void(const absl::Notification& stop)> round_gate;
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
  uint64_t rounds = 0;                // sampling rounds taken
  size_t reports_held = 0;            // reports held now
  bool connected = false;             // a stream is up (Hello written)
  std::string applied_version;
  std::string probe_plan_version;
};

// One agent: a sampling loop (agent/sampling_loop.h: rounds, the local guard,
// drift) on a thread of its own, and a stream client (agent/stream_client.h:
// Hello, reports, held reports, reconnects) that answers each DesiredState /
// ProbePlan with Ack (after apply and read-back) or Nack (previous version
// kept). Versions survive reconnects, nonces do not.
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
  // Loads the journal, records the baseline on first start, computes drift;
  // returns the drift lines found.
  absl::StatusOr<std::vector<std::string>> InitParameters();
  // At start: settles an apply the previous process did not finish (see
  // NicOwner::ResolveInterruptedApply) and logs which set the host is on;
  // `current` is re-read and true returned when anything was found.
  bool ResolveInterruptedApply(v1::ParameterSet* current);
  // `refused`: problems found before parsing (a parameter named twice); the
  // set is then NACKed with them and nothing is written.
  v1::AgentMessage ApplyDesiredState(const v1::DesiredState& ds,
                                     const std::vector<std::string>& refused = {});
  // One controller message (`wire`: as received); the reply, if any.
  std::optional<v1::AgentMessage> HandleMessage(const v1::ControllerMessage& msg,
                                                absl::string_view wire);

  AgentOptions options_;
  HostSeams seams_;
  std::unique_ptr<Sampler> sampler_;
  std::unique_ptr<Applier> applier_;            // the NIC applier, unless seams_.applier is set
  ParameterApplier* active_applier_ = nullptr;  // seams_.applier or applier_
  std::unique_ptr<LkgJournal> journal_;
  std::unique_ptr<LocalGuard> guard_;
  // Every write of the NIC's parameters goes through the owner.
  std::unique_ptr<ApplyIntent> intent_;
  std::unique_ptr<NicOwner> owner_;
  std::unique_ptr<JobListener> job_listener_;  // before loop_, which reads it
  std::unique_ptr<SamplingLoop> loop_;
  std::unique_ptr<StreamClient> client_;

  // Guards the live-changeable fields of options_: sample_interval,
  // drift_interval, labels.
  mutable absl::Mutex live_mu_;
  mutable absl::Mutex mu_;
  uint64_t acks_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t nacks_ ABSL_GUARDED_BY(mu_) = 0;
  std::string probe_plan_version_ ABSL_GUARDED_BY(mu_);
};

}  // namespace rocetune

#endif  // ROCETUNE_AGENT_AGENT_H_
