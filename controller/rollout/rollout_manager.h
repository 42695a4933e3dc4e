#ifndef ROCETUNE_CONTROLLER_ROLLOUT_ROLLOUT_MANAGER_H_
#define ROCETUNE_CONTROLLER_ROLLOUT_ROLLOUT_MANAGER_H_

#include <atomic>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "controller/admin/authorizer.h"
#include "controller/admin/identity.h"
#include "controller/campaign/campaigns.h"
#include "controller/control_loop.h"
#include "controller/fleet/event_bus.h"
#include "controller/fleet/fleet.h"
#include "controller/judge/judge.h"
#include "controller/policy/policy_registry.h"
#include "controller/rollout/change_planner.h"
#include "controller/rollout/fleet_guard.h"
#include "controller/rollout/rollout_metrics.h"
#include "controller/rollout/step_evaluator.h"
#include "controller/store/store.h"
#include "controller/telemetry/telemetry_store.h"
#include "daemon/clock.h"
#include "rocetune/v1/admin.pb.h"

namespace rocetune::controller {

struct RolloutOptions {
  // How often active changes are driven (judge looks, stage moves, HOLD limits).
  absl::Duration tick = absl::Seconds(1);
  // The telemetry store's window and retention: baselines and bakes must fit.
  absl::Duration window = absl::Seconds(10);
  absl::Duration retention = absl::Minutes(10);
  // The probe plan's locality label (ControllerOptions::probe_locality_label):
  // a policy's objective.peer_class must be intra_<label> or inter_<label>.
  std::string probe_locality_label = "tor";
  // Verdicts kept per change (older ones lose their sketches first, then go).
  int max_verdicts = 40;
  // The controller's --max_message_bytes: a policy version larger than this
  // could be stored but never served back, so it is refused before it is.
  size_t max_message_bytes = 1 << 20;
  // A change still PROPOSED this long after it was proposed is rejected by
  // the controller (audited change_expired), so that it stops holding its
  // hosts. Zero: never. Campaign trials are not affected.
  absl::Duration proposal_ttl = absl::Hours(24);
  // A host that NACKed the restore of a rolled-back or aborted change is
  // counted in rocetune_controller_restores_unconfirmed (alert
  // RocetuneRestoreUnconfirmed) at once; one that has not acked it this long
  // after the change ended from then on. Past this bound every such host is
  // named in one restore_unconfirmed audit row per change.
  absl::Duration restore_confirm_timeout = absl::Minutes(2);
  // How long a campaign waits for its next trial when the trial is refused
  // for a reason that may clear by itself (rollout_util::IsRetryLater: the
  // job signal or the probes below the rate a baseline or bake needs, as
  // while a training job checkpoints) before it stops.
  absl::Duration campaign_trial_wait = absl::Minutes(30);
};

// Policies, changes and tuning campaigns: the tuning loop's state machine.
//
// Everything runs on the controller's control loop (controller/control_loop.h):
// admin calls are posted to it, the fleet's Ack / Nack / guard notifications
// are posted to it, and a ticker posts Tick. So the state here needs no lock,
// and SQLite writes never run on a gRPC queue thread or under the fleet-wide
// lock. Each transition is
// persisted (change, hosts' desired state and audit rows in one store
// transaction) before it takes effect.
class RolloutManager : public FleetListener, private TrialChanges {
 public:
  // `store` may be null (nothing persisted; tests).
  // `loop`: the controller's control loop, on which everything here runs;
  // null: the manager runs one of its own (tests).
  RolloutManager(Fleet* fleet, TelemetryStore* telemetry, Store* store, EventBus* events,
                 Clock* clock, RolloutOptions options, ControlLoop* loop = nullptr);
  ~RolloutManager() override;

  // Loads policies, changes and campaigns. A change found mid-bake resumes
  // its bake with the step baseline persisted when the step started; without
  // one it is rolled back (audited). A tuning trial found mid-bake is ended
  // (aborted). Call before Start.
  absl::Status Load();
  // Starts the ticker. Stop() ends it (and drains the loop when it is its own).
  void Start();
  void Stop();
  // Posts a Tick to the loop unless one is already queued (then counts it as
  // coalesced and returns false). The ticker calls it every options.tick.
  bool PostTick();
  uint64_t ticks_coalesced() const { return ticks_coalesced_.load(); }

  ControlLoop& loop() { return *loop_; }
  // Optional, not owned: where transitions, rollbacks, verdicts and trials are
  // counted. Call before Load.
  void set_metrics(RolloutMetrics* metrics) {
    metrics_ = metrics;
    campaigns_.set_metrics(metrics);
  }
  // Optional, not owned: the roles in force (mTLS with --roles_file). With
  // it, a proposal whose policy needs more approvers than the roles grant to
  // identities other than the authenticated proposer is refused at once
  // rather than left PROPOSED. Call before Start.
  void set_authorizer(const Authorizer* authorizer) { authorizer_ = authorizer; }

  // ---- Admin operations. REQUIRES: on the control loop. ----
  absl::StatusOr<v1::ApplyPolicyResponse> ApplyPolicy(const v1::ApplyPolicyRequest& req,
                                                      const Identity& who);
  v1::ListPoliciesResponse ListPolicies(const v1::ListPoliciesRequest& req) const;
  absl::StatusOr<v1::PolicyVersion> GetPolicy(const v1::GetPolicyRequest& req) const;

  absl::StatusOr<v1::Change> Propose(const v1::ProposeChangeRequest& req, const Identity& who);
  absl::StatusOr<v1::Change> Approve(const v1::ChangeActionRequest& req, const Identity& who);
  absl::StatusOr<v1::Change> Reject(const v1::ChangeActionRequest& req, const Identity& who);
  absl::StatusOr<v1::Change> Rollback(const v1::ChangeActionRequest& req, const Identity& who);
  absl::StatusOr<v1::Change> Abort(const v1::ChangeActionRequest& req, const Identity& who);
  absl::StatusOr<v1::Change> GetChange(const std::string& id) const;
  absl::StatusOr<v1::ListChangesResponse> ListChanges(const v1::ListChangesRequest& req) const;
  // Stores a rehearsal result on a PROPOSED change.
  absl::StatusOr<v1::Change> RecordRehearsal(const std::string& id, const v1::Rehearsal& r);
  // The knob values a rehearsal compares: the change's, and the policy
  // knobs' current values on its canary hosts.
  absl::StatusOr<std::pair<Knobs, Knobs>> RehearsalKnobs(const std::string& id) const;

  // Tuning campaigns (controller/campaign); their trials are changes here.
  Campaigns& campaigns() { return campaigns_; }
  const Campaigns& campaigns() const { return campaigns_; }

  // A manual push (rocetunectl push): refused for a host that takes part in
  // an active change. The request's parameters are merged into the host's
  // desired state (or, with none yet, into what it reported in force); with
  // `replace` they become the whole desired state. The response carries the
  // new version and what it changes.
  // Forgets a GONE host (Fleet::ForgetHost); kFailedPrecondition while it
  // takes part in an active change.
  absl::Status ForgetHost(const v1::ForgetHostRequest& req, const Identity& who);
  absl::StatusOr<v1::SetDesiredStateResponse> SetDesiredState(const v1::SetDesiredStateRequest& req,
                                                              const Identity& who);
  // The active change holding `host_id`, "" if none. Thread-safe (any thread).
  std::string ActiveChangeOf(const std::string& host_id) const;

  // Drives every active change and campaign once.
  void Tick();
  // Rejects PROPOSED changes older than options.proposal_ttl (part of Tick).
  void ExpireProposals();
  // The restores of ended changes not confirmed within
  // options_.restore_confirm_timeout: the gauge, and an audit row per change.
  void CheckRestores();
  // What the judge could show for `plan` on the fleet now (an A/A split of
  // recent telemetry, EstimateDesignPower): the note stored on a proposed
  // change (Change.design_note); "" when the telemetry is too short.
  std::string MeasureDesign(const v1::Policy& policy,
                            const std::vector<v1::HostTarget>& plan) const;
  // policy apply --dry-run: the hosts `policy` selects now and what a change
  // under it could show there, as notes in `resp`.
  void DryRunFleetNotes(const v1::Policy& policy, v1::ApplyPolicyResponse* resp) const;
  // The connected hosts whose labels match `selector`, as stored.
  std::vector<StoredHost> ConnectedHosts(const std::map<std::string, std::string>& selector) const;
  // A host NACKed `version`, the restore an ended change pushed to it: the
  // host's `rejected` says so, and the restore stays unconfirmed.
  void RestoreNacked(const std::string& host_id, const std::string& version,
                     const std::string& error);

  // FleetListener: posted to the control loop.
  void OnAck(const std::string& host_id, const std::string& version) override;
  void OnNack(const std::string& host_id, const std::string& version,
              const std::string& error) override;
  void OnGuardEvent(const std::string& host_id, const v1::GuardEvent& event) override;

 private:
  struct Step {
    // Per measured host: the baseline taken when the step started.
    std::map<std::string, HostPeriod> baseline;
    absl::Time after_start;  // first window boundary after the push
    int64_t last_look = 0;   // looks evaluated so far in this step
    int last_progress_tenth = -1;
    // Set for a step resumed after a restart until its hosts report again
    // (InfinitePast otherwise); see AwaitResumedHosts.
    absl::Time resumed_at = absl::InfinitePast();
    // The bake restarted after a controller restart: its first windows are
    // not the change's onset (StepLook::resumed).
    bool resumed = false;
  };

  // Copies into `h` (the host of change `c` that just acked its pushed
  // version) the fleet's notes of that ack on the change's knobs: applied,
  // not in effect (issue 25 item 8).
  void RecordNotInEffect(const v1::Change& c, v1::HostTarget* h) const;

  // How long after a window ends its reports are taken to have arrived.
  absl::Duration ReportGrace() const;
  // kFailedPrecondition, with the figures and what to change, when the
  // selected hosts' recent probe rate (in the objective's peer class) cannot
  // give guard.min_samples per host in the shorter of baseline and bake (or
  // the job signal's rate the 100 events of a step_time_p99 constraint),
  // marked rollout_util::RetryLater (a campaign waits for the rate to come
  // back); OK when it can, or when too few hosts have reported to tell.
  absl::Status CheckProbeRate(const v1::Policy& policy,
                              const std::vector<StoredHost>& selected) const;
  // kFailedPrecondition, naming the figures and what to change, when the
  // planned hosts span fewer labelled racks than the judge's minimum: such a
  // change could only HOLD until the HOLD limit aborts it.
  static absl::Status CheckJudgeable(const v1::Policy& policy,
                                     const std::vector<v1::HostTarget>& plan);
  v1::Change* Find(const std::string& id);
  const v1::Change* Find(const std::string& id) const;
  bool Active(const v1::Change& c) const;
  std::string NextChangeId() const;

  // Builds a change for `knobs` under `policy` (not stored).
  absl::StatusOr<v1::Change> BuildChange(const v1::PolicyVersion& policy, const Knobs& knobs,
                                         const Identity& who, const std::string& reason,
                                         const std::string& seed, const PlanAvoid& avoid = {});
  // The targets of a change of a policy with switch knobs (PlanRacks):
  // `selected` is the policy's selection of connected members. Switch-only
  // policies select switches; the connected hosts of their racks are
  // measured. Joint policies select hosts; the switches of their racks join.
  // Every member must be outside other active changes.
  absl::StatusOr<std::vector<v1::HostTarget>> PlanSwitchChange(
      const v1::Policy& policy, const std::vector<StoredHost>& selected, const Knobs& knobs,
      const std::string& seed, const PlanAvoid& avoid) const;
  // `hosts` plus, for a policy with switch knobs, the switches of their racks:
  // where the knobs' current values are read (CurrentKnobValues).
  std::vector<std::string> WithRackSwitches(const v1::Policy& policy,
                                            std::vector<std::string> hosts) const;
  // Persists `change` (with `transition` appended when set) plus `audit`, and
  // the hosts' desired states in `updates`, in one transaction; then installs
  // the desired states. On failure nothing changes (in memory either).
  // `step_baseline`, when set, is stored in the same transaction.
  absl::Status Commit(v1::Change* change, std::optional<v1::ChangeTransition> transition,
                      std::vector<v1::AuditEntry> audit, const std::vector<DesiredUpdate>& updates,
                      const v1::StepBaseline* step_baseline = nullptr);
  v1::ChangeTransition Transition(const v1::Change& c, v1::ChangeState to, const std::string& actor,
                                  const std::string& reason) const;
  v1::AuditEntry MakeAudit(const std::string& action, const v1::Change& c, const Identity& who,
                           const std::string& reason, const std::string& detail) const;

  // APPROVED -> CANARY; STAGE(n) -> STAGE(n+1): pushes the step's hosts.
  absl::Status StartStep(v1::Change* c, uint32_t stage);
  // Returns every touched host to its previous desired state and ends the
  // change in `end` (ROLLED_BACK or ABORTED; DONE for a finished trial).
  absl::Status Restore(v1::Change* c, v1::ChangeState end, const std::string& actor,
                       bool authenticated, const std::string& reason);
  void Drive(v1::Change* c);
  void TakeBaseline(const v1::Change& c, uint32_t stage, absl::Time step_start);
  void Fail(v1::Change* c, const std::string& rule, const std::string& why);
  // At DONE: each host's pushed set again, final (lease 0).
  std::vector<DesiredUpdate> ConfirmUpdates(const v1::Change& c) const;
  void AddVerdict(v1::Change* c, v1::Verdict v);
  void Publish(const v1::Change& c, const std::string& detail, double progress = 0);

  // TrialChanges (rollout_manager_trials.cc): what campaigns ask of changes.
  absl::StatusOr<v1::PolicyVersion> GetPolicyVersion(const std::string& name,
                                                     const std::string& version) const override;
  absl::StatusOr<KnobValues> StartValues(const v1::PolicyVersion& policy) const override;
  const v1::Change* FindChange(const std::string& id) const override;
  std::string RejectedBy(const std::string& policy_name, const KnobValues& knobs) const override;
  bool TrialRunning(const std::string& campaign_id) const override;
  void AbortCampaignChanges(const std::string& campaign_id, const Identity& who,
                            const std::string& reason) override;
  uint32_t MaxTrialBakeSeconds(const v1::PolicyVersion& policy) const override;
  absl::StatusOr<v1::Change> BuildTrial(const v1::Campaign& t, const v1::PolicyVersion& policy,
                                        const KnobValues& knobs, uint32_t index,
                                        const std::string& reason, uint32_t bake_seconds,
                                        const std::string& fresh_from) override;
  absl::Status CommitTrial(v1::Change trial) override;
  absl::StatusOr<std::string> ProposePromotion(const v1::Campaign& t, const KnobValues& knobs,
                                               const std::string& reason) override;
  void PersistChange(const std::string& id) override;
  void EndTrial(v1::Change* c, bool failed, const std::string& reason) override;
  // The values `policy`'s knobs hold on `hosts` (the first that has each).
  Knobs CurrentKnobValues(const v1::Policy& policy, const std::vector<std::string>& hosts) const;

  // Fleet guard (rollout_manager_fleet.cc, fleet_guard.h): records the fleet
  // baseline of `c` (all its hosts, the baseline period ending at the window
  // of `step_start`). The guard itself is a rule of the StepEvaluator.
  void TakeFleetBaseline(const v1::Change& c, absl::Time step_start);

  // Bake resume (rollout_manager_resume.cc). The record of the step now
  // running: its baselines and the fleet baseline.
  v1::StepBaseline StepRecord(const std::string& change_id, uint32_t stage) const;
  std::map<std::string, v1::StepBaseline> LoadStepRecords();
  // For a change found in CANARY or STAGE at Load: resumes its bake from the
  // persisted record of its current step (audited change_resumed); false when
  // there is none or it cannot be used (the change is then rolled back).
  bool ResumeStep(v1::Change* c, const std::map<std::string, v1::StepBaseline>& records);
  // A resumed step waits until most of its measured hosts reported since the
  // restart, then its bake starts at the next window. True while waiting.
  bool AwaitResumedHosts(const v1::Change& c, Step* step, absl::Time now);

  Fleet* const fleet_;
  TelemetryStore* const telemetry_;
  Store* const store_;
  EventBus* const events_;
  Clock* const clock_;
  const RolloutOptions options_;
  // Every rule that decides a look (controller/rollout/step_evaluator.h).
  const StepEvaluator evaluator_;
  RolloutMetrics* metrics_ = nullptr;
  const Authorizer* authorizer_ = nullptr;
  // OK unless the roles cannot supply `c`'s approvals without its proposer.
  absl::Status CheckApprovalsPossible(const v1::Change& c, const Identity& who) const;

  PolicyRegistry policies_;
  Campaigns campaigns_;
  std::map<std::string, v1::Change> changes_;  // by id
  std::map<std::string, Step> steps_;          // by change id; persisted as StepRecord
  // By change id: every host's counters over the canary's baseline period.
  std::map<std::string, FleetPeriod> fleet_baselines_;
  int64_t change_seq_ = 0;

  // The selectors of the latest versions of policies marked observe_only,
  // rebuilt on the loop whenever a policy version is added; read by the
  // fleet's drift handling (any thread) through IsObserveOnly.
  void RefreshObserveOnly();
  bool IsObserveOnly(const std::string& host_id) const;
  mutable absl::Mutex observe_mu_;
  std::vector<std::map<std::string, std::string>> observe_only_selectors_
      ABSL_GUARDED_BY(observe_mu_);

  // Keeps the host -> active change index in step with `c`.
  void IndexHosts(const v1::Change& c);
  mutable absl::Mutex index_mu_;
  std::map<std::string, std::string> active_by_host_ ABSL_GUARDED_BY(index_mu_);
  // Hosts of an ended change whose last push (a rollback's restore, or a
  // step's set) the host has not acked yet, by host: their acks still count
  // on that change (`change show`: restored / pending per host).
  std::map<std::string, std::string> unacked_by_host_ ABSL_GUARDED_BY(index_mu_);
  // Ended changes whose unconfirmed restore was audited (restore_unconfirmed),
  // so that it is audited once per change and process.
  absl::flat_hash_set<std::string> restore_overdue_audited_;

  // The loop of its own (no controller's given), destroyed before the state above.
  std::unique_ptr<ControlLoop> own_loop_;
  ControlLoop* loop_;
  absl::Notification stop_;
  std::thread ticker_;
  std::atomic<bool> tick_pending_{false};
  std::atomic<uint64_t> ticks_coalesced_{0};
};

}  // namespace rocetune::controller

#endif  // ROCETUNE_CONTROLLER_ROLLOUT_ROLLOUT_MANAGER_H_
