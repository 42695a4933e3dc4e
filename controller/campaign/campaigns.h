#ifndef ROCETUNE_CONTROLLER_CAMPAIGN_CAMPAIGNS_H_
#define ROCETUNE_CONTROLLER_CAMPAIGN_CAMPAIGNS_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "controller/admin/identity.h"
#include "controller/fleet/event_bus.h"
#include "controller/rollout/rollout_metrics.h"
#include "controller/store/store.h"
#include "controller/tuner/tuner.h"
#include "daemon/clock.h"
#include "rocetune/v1/admin.pb.h"

namespace rocetune::controller {

// What a campaign needs from the change state machine (RolloutManager): its
// trials and its promotion are changes, run, judged and restored there.
// REQUIRES: every call on the controller's control loop.
class TrialChanges {
 public:
  virtual ~TrialChanges() = default;

  virtual absl::StatusOr<v1::PolicyVersion> GetPolicyVersion(const std::string& name,
                                                             const std::string& version) const = 0;
  // The values the policy's knobs hold now on the members it selects (and,
  // for switch knobs, the switches of their racks): where a campaign starts.
  // kFailedPrecondition when the policy selects nobody.
  virtual absl::StatusOr<KnobValues> StartValues(const v1::PolicyVersion& policy) const = 0;
  virtual const v1::Change* FindChange(const std::string& id) const = 0;
  // True while a trial (a canary-only change) of campaign `campaign_id` runs.
  virtual bool TrialRunning(const std::string& campaign_id) const = 0;
  // Aborts every active change of campaign `campaign_id`, restoring its hosts.
  virtual void AbortCampaignChanges(const std::string& campaign_id, const Identity& who,
                                    const std::string& reason) = 0;
  // Builds trial `index` of campaign `t` (not stored): a canary-only change
  // of `knobs` under `policy`, approved by the campaign's approvals. An error
  // when it cannot be built (the campaign then stops).
  // The ended change that rolled back exactly these knob values under this
  // policy on a judge FAIL or a guard ("" when none): such a set is not
  // trialled again.
  virtual std::string RejectedBy(const std::string& policy_name, const KnobValues& knobs) const = 0;
  // The longest bake a trial of `policy` may have: its looks, with the HOLD
  // limit, must fit in what the telemetry keeps.
  virtual uint32_t MaxTrialBakeSeconds(const v1::PolicyVersion& policy) const = 0;
  // `bake_seconds` above the policy's rollout.bake_seconds makes the trial
  // bake longer (Change.bake_seconds), at most MaxTrialBakeSeconds; 0 = the
  // policy's. `fresh_from` (a confirmation's): the change whose canary members
  // the trial's canary avoids where the racks allow, under a seed of its own;
  // "" = a search trial, planned as every search trial of the campaign.
  virtual absl::StatusOr<v1::Change> BuildTrial(const v1::Campaign& t,
                                                const v1::PolicyVersion& policy,
                                                const KnobValues& knobs, uint32_t index,
                                                const std::string& reason, uint32_t bake_seconds,
                                                const std::string& fresh_from) = 0;
  // Stores a built trial (audited trial_start) and makes it a change that the
  // next tick starts; an error (the store's) leaves nothing changed.
  virtual absl::Status CommitTrial(v1::Change trial) = 0;
  // Proposes `knobs` fleet-wide for the campaign's proposer (the promotion;
  // it needs approval again), linked to campaign `t` in memory. Returns its id.
  virtual absl::StatusOr<std::string> ProposePromotion(const v1::Campaign& t,
                                                       const KnobValues& knobs,
                                                       const std::string& reason) = 0;
  // Persists change `id` as it is in memory (the promotion's campaign link).
  virtual void PersistChange(const std::string& id) = 0;
  // Ends a trial's change: its canary hosts are restored and the change is
  // ROLLED_BACK (`failed`) or DONE.
  virtual void EndTrial(v1::Change* c, bool failed, const std::string& reason) = 0;
};

// The smallest improvement a trial must show when the policy leaves
// tuner.min_improvement unset.
inline constexpr double kMinImprovementFloor = 0.02;

// The improvement over the incumbent a trial must show to count: the policy's
// tuner.min_improvement when set, else the trial's own noise band `noise`
// (1 - exp(-t(0.95, df) se) of its drift-corrected estimate: what a change
// that does nothing reaches one time in twenty), at least kMinImprovementFloor.
double TrialMinImprovement(const v1::Policy& policy, double noise);

// Tuning campaigns: a policy's knobs searched by canary-only trials under one
// approval; the winner measured once more against the start values on fresh
// canary hosts (a confirmation) and, only when that confirms a gain, proposed
// fleet-wide under a second approval. The search is the
// tuner's (controller/tuner); each trial is a change of the state machine;
// this class keeps the campaigns, decides their next trial and scores the
// trials that ended.
// REQUIRES: every call on the controller's control loop.
class Campaigns {
 public:
  // `store`, `events` and `metrics` may be null.
  // `trial_wait`: how long a campaign waits for a trial refused for a reason
  // that may clear by itself (rollout_util::IsRetryLater) before it stops.
  Campaigns(TrialChanges* changes, Store* store, EventBus* events, Clock* clock,
            absl::Duration window, absl::Duration trial_wait);

  void set_metrics(RolloutMetrics* metrics) { metrics_ = metrics; }
  // Loads the stored campaigns (before any trial is ended at start-up).
  absl::Status Load();

  absl::StatusOr<v1::Campaign> Start(const v1::StartCampaignRequest& req, const Identity& who);
  absl::StatusOr<v1::Campaign> Approve(const v1::ChangeActionRequest& req, const Identity& who);
  absl::StatusOr<v1::Campaign> Stop(const v1::ChangeActionRequest& req, const Identity& who);
  absl::StatusOr<v1::Campaign> Get(const std::string& id) const;
  v1::ListCampaignsResponse List() const;

  // Drives every running campaign once: the next trial, or the end and the
  // winner's promotion.
  void Tick();
  // A trial's change ended (its last look decided, or it was ended otherwise):
  // records the trial's outcome and objective in its campaign and ends the
  // change (TrialChanges::EndTrial). `restarted`: found mid-bake after a
  // controller restart (aborted).
  void TrialFinished(v1::Change* c, bool restarted = false);

 private:
  v1::Campaign* Find(const std::string& id);
  void Drive(v1::Campaign* t);
  // Builds and commits trial number trials_size() + 1 of `next` (campaign
  // `t` as it is to be saved: the tuner's incumbent included) with `knobs`,
  // then stores `next` with the trial as `t`; `bake_seconds` 0 = the policy's;
  // `retry_of` the index of the HOLD trial it repeats (0 = none); `confirms`
  // the index of the trial whose winner it confirms (0 = a search trial). A
  // trial that cannot be built stops the campaign, unless the refusal may
  // clear by itself (rollout_util::IsRetryLater): the campaign then waits,
  // saying why in its note, and tries again on the next ticks, up to
  // `trial_wait` from the first refusal (counted again after a controller
  // restart).
  void StartTrial(v1::Campaign* t, v1::Campaign next, const v1::PolicyVersion& pv,
                  const KnobValues& knobs, const std::string& reason, uint32_t bake_seconds,
                  uint32_t retry_of, uint32_t confirms);
  // The search has ended on `best` (not the start values): confirms it, or
  // proposes it once confirmed, or finishes the campaign without a proposal.
  void Conclude(v1::Campaign* t, v1::Campaign next, const v1::PolicyVersion& pv,
                const KnobValues& best, const std::string& reason);
  // Ends the campaign (FINISHED) with `note`, proposing `promote` fleet-wide
  // with `promotion_reason` when it is not empty.
  void Finish(v1::Campaign* t, v1::Campaign next, const std::string& note,
              const KnobValues& promote, const std::string& promotion_reason);
  // A refusal that may clear by itself (rollout_util::IsRetryLater) held
  // back what campaign `t` was to do next (`what`: "start trial 3",
  // "propose its confirmed winner"). Starts or goes on with its wait and
  // returns true (the note says why and since when, stored once per wait), or
  // returns false once the wait has lasted trial_wait_ (the caller ends the
  // campaign saying so).
  bool Wait(v1::Campaign* t, v1::Campaign next, const absl::Status& refused,
            const std::string& what);
  // `what` was allowed. After a wait: true (hold off) until a full baseline
  // of samples (and a window) has come in since they came back, as the
  // trial's baseline is the period before it starts; then false, with
  // `next`'s note saying how long it waited. A note left by a wait from
  // before a controller restart is replaced.
  bool Resume(v1::Campaign* t, v1::Campaign* next, const v1::PolicyVersion& pv,
              const std::string& what);
  // Whether Drive should leave campaign `t` alone this tick: waiting out the
  // baseline after a wait, or kWaitRetryEvery since its last refused try.
  bool Waiting(const v1::Campaign& t) const;
  // The controller ends campaign `t` (as `next`): STOPPED with `note`, a
  // running trial marked aborted, a campaign_stop audit row.
  void ControllerStop(v1::Campaign* t, v1::Campaign next, const std::string& note);
  absl::Status Save(const v1::Campaign& t, std::vector<v1::AuditEntry> audit);
  void Publish(const v1::Campaign& t, const std::string& detail);

  TrialChanges* const changes_;
  Store* const store_;
  EventBus* const events_;
  Clock* const clock_;
  const absl::Duration window_;
  const absl::Duration trial_wait_;
  RolloutMetrics* metrics_ = nullptr;
  std::map<std::string, v1::Campaign> campaigns_;  // by id
  // A campaign's wait (Wait): since the first refusal, until when it waits
  // out a baseline once the samples are back (InfiniteFuture: not back yet),
  // and its last refused try. In memory only: after a controller restart a
  // wait counts from the first refusal after it.
  struct CampaignWait {
    absl::Time since;
    absl::Time resume_at;
    absl::Time last_try;
  };
  static constexpr absl::Duration kWaitRetryEvery = absl::Seconds(10);
  std::map<std::string, CampaignWait> waits_;  // by campaign id
  int64_t seq_ = 0;
};

}  // namespace rocetune::controller

#endif  // ROCETUNE_CONTROLLER_CAMPAIGN_CAMPAIGNS_H_
