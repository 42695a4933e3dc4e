#ifndef ROCETUNE_CONTROLLER_FLEET_FLEET_H_
#define ROCETUNE_CONTROLLER_FLEET_FLEET_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "controller/control_loop.h"
#include "controller/fleet/agent_connection.h"
#include "controller/fleet/event_bus.h"
#include "controller/fleet/probe_planner.h"
#include "controller/store/store.h"
#include "controller/telemetry/telemetry_store.h"
#include "daemon/clock.h"
#include "rocetune/v1/admin.pb.h"
#include "rocetune/v1/agent.pb.h"

namespace rocetune::controller {

struct FleetOptions {
  // A connected host without a report for this long is STALE ...
  absl::Duration stale_after = absl::Seconds(30);
  // ... and GONE after this long (a disconnected host is GONE at once).
  absl::Duration gone_after = absl::Seconds(120);
  size_t max_host_id_length = 253;
  size_t max_labels = 64;
  // Pinglists pushed to connected agents as ProbePlans, recomputed whenever a
  // host connects or leaves; unchanged plans are not re-sent.
  bool plan_probes = true;
  ProbePlannerOptions probes;
  // Joins and leaves within this delay share one recomputation (a planner
  // thread runs it), so a fleet reconnecting at once costs O(hosts) per delay
  // instead of O(hosts) per host. Zero: recompute inline on every change.
  absl::Duration probe_replan_delay = absl::Milliseconds(200);
  // Drift an agent reports is audited but never corrected (--observe_only).
  bool observe_only = false;
};

struct FleetCounts {
  uint32_t connected = 0;
  uint32_t stale = 0;
  uint32_t gone = 0;
  uint32_t drifted = 0;  // has a desired version that differs from the applied one
};

// Told about what agents answer. Called without any fleet lock held, on the
// thread that handled the agent's message; implementations must not block.
class FleetListener {
 public:
  virtual ~FleetListener() = default;
  virtual void OnAck(const std::string& host_id, const std::string& version) = 0;
  virtual void OnNack(const std::string& host_id, const std::string& version,
                      const std::string& error) = 0;
  // The agent's local guard restored last-known-good (or saw drift).
  virtual void OnGuardEvent(const std::string& host_id, const v1::GuardEvent& event) = 0;
};

// Who sets a desired state and why (audited).
struct DesiredStateActor {
  std::string actor = "controller";
  bool authenticated = false;
  std::string reason;
  std::string change_id;
};

// A desired state a caller wants to give one host.
struct DesiredUpdate {
  std::string host_id;
  v1::ParameterSet params;
  // > 0: provisional (DesiredState.provisional_lease_seconds). The same
  // parameters with another lease keep their version and are pushed again
  // (0 after a provisional push confirms the set).
  uint32_t lease_seconds = 0;
};

// One desired-state decision as Fleet::UpdateDesiredStates hands it to the
// caller's commit function, read under the fleet's lock at one instant.
struct DesiredDecision {
  // The hosts whose desired state changes, as they will be stored.
  std::vector<StoredHost> next;
  // The same hosts as stored before the decision, by host id.
  std::map<std::string, StoredHost> before;
  // Every updated host's desired version after the decision (unchanged
  // hosts keep theirs).
  std::map<std::string, std::string> versions;
};

// What a stream gets back from a successful Hello.
struct Registration {
  std::string host_id;
  std::shared_ptr<HostTelemetry> telemetry;
};

// The fleet registry: hosts, their streams, desired state and ACK/NACK
// bookkeeping. Thread-safe. Never calls into an AgentConnection or the event
// bus while holding its own lock.
class Fleet {
 public:
  // `store` and `events` may be null. None is owned.
  Fleet(Clock* clock, TelemetryStore* telemetry, Store* store, EventBus* events,
        FleetOptions options);
  ~Fleet();
  Fleet(const Fleet&) = delete;
  Fleet& operator=(const Fleet&) = delete;

  // Loads hosts and desired state from the store (all hosts start GONE).
  absl::Status LoadFromStore();

  // A Hello's form (host id, label counts and sizes): kInvalidArgument naming
  // the field. Register checks it too; the transport checks it first so that
  // nothing quotes or audits a malformed id.
  absl::Status ValidateHello(const v1::Hello& hello) const;

  // Registers `conn` as the stream of the host named by `hello`. An older
  // stream of the same host is closed with kAborted, once: while a stream
  // that superseded another keeps reporting, a further one is refused with
  // kAlreadyExists (two agents with one identity). Pushes the desired state
  // (if any) to `conn`. kInvalidArgument when the Hello lacks an identity or
  // is malformed; nothing is stored then.
  absl::StatusOr<Registration> Register(const v1::Hello& hello,
                                        std::shared_ptr<AgentConnection> conn);
  // The stream `stream_id` of `host_id` ended. Ignored if a newer stream took over.
  void Unregister(const std::string& host_id, uint64_t stream_id);

  // Sets the desired parameters of `host_id`; returns the (new) version. The
  // same parameters as the current desired state return the current version
  // and push nothing. kNotFound for an unknown host.
  absl::StatusOr<std::string> SetDesiredState(const std::string& host_id,
                                              const v1::ParameterSet& params,
                                              const DesiredStateActor& actor = {});
  // Sets the desired state of several hosts as one decision: computes each
  // host's next StoredHost (a new version unless the parameters equal the
  // current desired state), calls `commit` with them (the caller persists them,
  // with whatever else belongs to the decision, in ONE store transaction) and
  // only if it succeeds installs and pushes them. Returns host -> version.
  // Desired-state writers are serialised; the fleet-wide lock is not held
  // while `commit` runs, and `commit` gets everything it needs in its
  // argument (it must not call back into the Fleet). kNotFound for an
  // unknown host (nothing changes).
  using CommitFn = std::function<absl::Status(const DesiredDecision& decision)>;
  absl::StatusOr<std::map<std::string, std::string>> UpdateDesiredStates(
      const std::vector<DesiredUpdate>& updates, const CommitFn& commit);
  // Removes a GONE host from the registry, its telemetry and the store, with a
  // "host_forgotten" audit row (one store transaction). kNotFound for an
  // unknown host, kFailedPrecondition unless it is GONE; nothing changes then.
  absl::Status ForgetHost(const std::string& host_id, const DesiredStateActor& actor);
  // The stored state of one host (info, desired state), kNotFound if unknown.
  absl::StatusOr<StoredHost> GetStored(const std::string& host_id) const;
  // The controller's control loop: host and audit rows are then written on
  // it (in the order posted) instead of on the calling thread (a stream's
  // completion-queue thread). Set before the first Register; not owned.
  void SetControlLoop(ControlLoop* loop) { loop_ = loop; }
  void SetListener(FleetListener* listener) { listener_.store(listener); }
  // Hosts for which `check` answers true are observe-only (their policy says
  // so): drift is reported, never corrected. Set before agents connect.
  void SetObserveOnlyCheck(std::function<bool(const std::string& host_id)> check);
  // Desired version of `host_id`, "" if none.
  std::string DesiredVersion(const std::string& host_id) const;

  // An Ack / Nack whose nonce the stream verified as current.
  void HandleAck(const std::string& host_id, const v1::Ack& ack);
  void HandleNack(const std::string& host_id, const v1::Nack& nack);
  // Guard events from a Report. A restore to last-known-good marks the host's
  // desired version as rejected (never re-pushed) and records the restored
  // version as the host's current one.
  void HandleGuardEvents(const std::string& host_id,
                         const google::protobuf::RepeatedPtrField<v1::GuardEvent>& events);

  std::vector<v1::HostInfo> ListHosts(const std::map<std::string, std::string>& selector) const;
  // One page of hosts ordered by id, starting after `after_id`; `total` gets
  // the number matching the selector, `more` whether hosts follow the page.
  std::vector<v1::HostInfo> ListHostsPage(const std::map<std::string, std::string>& selector,
                                          const std::string& after_id, size_t page_size,
                                          uint32_t* total, bool* more) const;
  absl::StatusOr<v1::HostInfo> GetHost(const std::string& host_id) const;
  // Ids of hosts whose labels match every selector entry (empty = all).
  std::vector<std::string> Select(const std::map<std::string, std::string>& selector) const;
  // label value -> host ids, for hosts having label `key`.
  std::map<std::string, std::vector<std::string>> GroupBy(const std::string& key) const;
  FleetCounts Counts() const;

  // Publishes host_stale / host_gone / host_recovered events for state changes
  // since the last sweep. Called periodically.
  void Sweep();

  // Appends to the audit log (store) and publishes an event.
  void Audit(const std::string& actor, const std::string& action, const std::string& subject,
             const std::string& detail);

  // Matches "k=v" label selectors; exposed for the admin service.
  static bool Matches(const google::protobuf::Map<std::string, std::string>& labels,
                      const std::map<std::string, std::string>& selector);

 private:
  struct Host {
    StoredHost stored;  // info (without live fields) + desired state
    std::shared_ptr<AgentConnection> conn;
    uint64_t stream_id = 0;
    absl::Time connected_at;
    absl::Time disconnected_at;
    std::shared_ptr<HostTelemetry> telemetry;
    v1::HostState last_swept = v1::HOST_STATE_UNSPECIFIED;
    v1::ProbeEndpoint probe_endpoint;  // from Hello
    std::string probe_plan_version;    // last plan pushed on the current stream
    bool superseded_another = false;   // the current stream closed an older live one
    // Drift corrections of one finding back off: a re-push that does not
    // clear the drift (another writer fights it) is not repeated at once.
    struct DriftRetry {
      std::string finding;  // desired version + the agent's detail
      int attempts = 0;
      absl::Time last;
      absl::Time next;
    } drift_retry;
  };

  // kAlreadyExists when `h`'s live stream superseded another and still
  // reports: a stream supersedes another once, not back and forth.
  absl::Status CheckSupersede(const Host& h, const std::string& host_id, uint64_t stream_id) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Recomputes every connected host's pinglist and pushes the ones that changed.
  // The plan is computed outside mu_; replans never overlap (replan_mu_).
  void RePlanProbes();
  // A host joined or left: replan now (delay 0) or wake the planner thread.
  void ProbePlanDirty();
  void PlannerLoop();

  v1::HostState StateOf(const Host& h, absl::Time now) const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  v1::HostInfo InfoOf(const Host& h, absl::Time now) const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  v1::Event MakeEvent(const std::string& kind, const std::string& subject,
                      const std::string& detail) const;
  // Writes the host's stored state (and `audit`) outside mu_, on the control
  // loop when there is one; the snapshot is taken when the write runs, under
  // persist_mu_, so an older one never overwrites a newer one.
  void PersistHost(const std::string& host_id, const v1::AuditEntry* audit)
      ABSL_LOCKS_EXCLUDED(mu_);
  v1::AuditEntry MakeAudit(const std::string& actor, const std::string& action,
                           const std::string& host_id, const std::string& detail) const;
  void Publish(const std::vector<v1::Event>& events);
  // A "drift" guard event: level-triggered correction. Unless the host is
  // observe-only, re-pushes its desired state (when it has one and is
  // connected) and audits "drift_corrected" with what the agent found;
  // otherwise audits "drift_observed" once per distinct finding.
  void HandleDrift(const std::string& host_id, const v1::GuardEvent& event);
  // A guard restore: the host's current parameters become the values the
  // agent read back after it (kept as they are when the event has none).
  static void ApplyRestoredParameters(const v1::GuardEvent& e, v1::HostInfo* info);

  Clock* const clock_;
  TelemetryStore* const telemetry_;
  Store* const store_;
  ControlLoop* loop_ = nullptr;
  EventBus* const events_;
  const FleetOptions options_;

  std::atomic<FleetListener*> listener_{nullptr};
  absl::Mutex observe_mu_;
  std::function<bool(const std::string&)> observe_only_check_ ABSL_GUARDED_BY(observe_mu_);
  // Serialises desired-state writers (held across their store write).
  absl::Mutex desired_mu_ ABSL_ACQUIRED_BEFORE(mu_);
  // Orders host writes to the store (held across snapshot and write).
  absl::Mutex persist_mu_ ABSL_ACQUIRED_BEFORE(mu_);
  absl::Mutex replan_mu_ ABSL_ACQUIRED_BEFORE(mu_);
  absl::Mutex plan_mu_;
  bool plan_dirty_ ABSL_GUARDED_BY(plan_mu_) = false;
  bool plan_stop_ ABSL_GUARDED_BY(plan_mu_) = false;
  std::thread planner_;

  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, std::unique_ptr<Host>> hosts_ ABSL_GUARDED_BY(mu_);
};

}  // namespace rocetune::controller

#endif  // ROCETUNE_CONTROLLER_FLEET_FLEET_H_
