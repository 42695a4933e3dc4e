// Tuning campaigns and the scoring of their trials (campaigns.h). The
// trials themselves are changes of the state machine (controller/rollout).
#include "controller/campaign/campaigns.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "controller/judge/judge.h"
#include "controller/judge/stats.h"
#include "controller/policy/policy_loader.h"
#include "controller/rollout/fleet_guard.h"
#include "controller/rollout/rollout_util.h"

namespace rocetune::controller {

using rollout_util::IdNumber;
using rollout_util::Secs;

namespace {

// A stored trial's canary/control ratios of the policy's constraints (the
// judge's "ln_<metric>_did" evidence), keyed by Constraint.metric as the tuner
// expects; empty for trials stored without them.
std::map<std::string, double> TrialConstraintRatios(const v1::Trial& tr, const v1::Policy& policy) {
  std::map<std::string, double> out;
  for (const v1::Constraint& c : policy.constraints()) {
    auto it = tr.constraints().find(ConstraintEvidence(c.metric()));
    if (it != tr.constraints().end()) out[c.metric()] = it->second;
  }
  return out;
}

// The drift-corrected estimate a trial is scored on.
struct TrialEstimate {
  std::optional<double> ratio;  // the judge's canary-vs-control DiD ratio of the objective's p99
  double lower = 0, upper = 0;  // its two-sided 90% interval (0 when no standard error)
  double noise = 0;             // 1 - exp(-t(0.95, df) se): the trial's own noise band
};

TrialEstimate EstimateOf(const v1::Verdict& v) {
  TrialEstimate out;
  const v1::MetricEvidence* m = FindEvidence(v, kP99Evidence);
  // Without a standard error (too few racks for the design) there is no
  // interval and no noise band to hold the trial to: not scored.
  if (m == nullptr || m->rack_pairs() < 2 || !std::isfinite(m->ratio()) || m->ratio() <= 0 ||
      !(m->se() > 0) || !std::isfinite(m->se()) || !(m->df() >= 1)) {
    return out;
  }
  out.ratio = m->ratio();
  const double half = stats::StudentTQuantile(0.95, m->df()) * m->se();
  out.lower = std::exp(m->mean() - half);
  out.upper = std::exp(m->mean() + half);
  out.noise = 1 - std::exp(-half);
  return out;
}

}  // namespace

double TrialMinImprovement(const v1::Policy& policy, double noise) {
  if (policy.tuner().min_improvement() > 0) return policy.tuner().min_improvement();
  return std::max(kMinImprovementFloor, noise);
}

Campaigns::Campaigns(TrialChanges* changes, Store* store, EventBus* events, Clock* clock,
                     absl::Duration window, absl::Duration trial_wait)
    : changes_(changes),
      store_(store),
      events_(events),
      clock_(clock),
      window_(window),
      trial_wait_(trial_wait) {}

absl::Status Campaigns::Load() {
  if (store_ == nullptr) return absl::OkStatus();
  absl::StatusOr<std::vector<v1::Campaign>> campaigns = store_->LoadCampaigns();
  if (!campaigns.ok()) return campaigns.status();
  for (v1::Campaign& t : *campaigns) {
    seq_ = std::max(seq_, IdNumber(t.id()));
    campaigns_[t.id()] = std::move(t);
  }
  return absl::OkStatus();
}

v1::Campaign* Campaigns::Find(const std::string& id) {
  auto it = campaigns_.find(id);
  return it == campaigns_.end() ? nullptr : &it->second;
}

absl::Status Campaigns::Save(const v1::Campaign& t, std::vector<v1::AuditEntry> audit) {
  if (store_ == nullptr) return absl::OkStatus();
  Store::Batch batch;
  batch.campaigns.push_back(t);
  batch.audit = std::move(audit);
  return store_->Commit(batch);
}

void Campaigns::Publish(const v1::Campaign& t, const std::string& detail) {
  if (events_ == nullptr) return;
  v1::Event e;
  e.set_unix_nanos(absl::ToUnixNanos(clock_->Now()));
  e.set_kind("campaign");
  e.set_subject(t.id());
  e.set_detail(detail);
  events_->Publish(e);
}

void Campaigns::Tick() {
  std::vector<std::string> running;
  for (const auto& [id, t] : campaigns_) {
    if (t.state() == v1::Campaign::RUNNING) running.push_back(id);
  }
  for (const std::string& id : running) Drive(&campaigns_.at(id));
}

absl::StatusOr<v1::Campaign> Campaigns::Start(const v1::StartCampaignRequest& req,
                                              const Identity& who) {
  absl::StatusOr<v1::PolicyVersion> pv =
      changes_->GetPolicyVersion(req.policy_name(), req.policy_version());
  if (!pv.ok()) return pv.status();
  const v1::Policy policy = WithDefaults(pv->policy());
  const uint32_t budget =
      req.trial_budget() != 0 ? req.trial_budget() : policy.tuner().trial_budget();
  if (budget == 0 || budget > 200) {
    return absl::InvalidArgumentError(absl::StrCat("trial budget ", budget, " outside [1, 200]"));
  }
  absl::StatusOr<std::unique_ptr<Tuner>> tuner = MakeTuner(policy, budget);
  if (!tuner.ok()) return tuner.status();
  for (const auto& [id, t] : campaigns_) {
    if ((t.state() == v1::Campaign::PROPOSED || t.state() == v1::Campaign::RUNNING) &&
        t.policy_name() == req.policy_name()) {
      return absl::FailedPreconditionError(
          absl::StrCat("campaign ", id, " on policy ", t.policy_name(), " is still ",
                       v1::Campaign::State_Name(t.state()), "; stop it first"));
    }
  }
  absl::StatusOr<KnobValues> start = changes_->StartValues(*pv);
  if (!start.ok()) return start.status();
  v1::Campaign t;
  t.set_id(absl::StrCat("t-", seq_ + 1));
  t.set_policy_name(pv->name());
  t.set_policy_version(pv->version_hash());
  t.set_state(v1::Campaign::PROPOSED);
  t.set_trial_budget(budget);
  t.set_proposer(who.name);
  t.set_proposer_authenticated(who.authenticated);
  t.set_reason(req.reason());
  t.set_created_unix_nanos(absl::ToUnixNanos(clock_->Now()));
  t.set_approvals_required(
      static_cast<int32_t>(std::max<uint32_t>(1, policy.approval().approvers())));
  t.set_best_objective_ratio(1.0);
  for (const auto& [k, v] : *start) {
    (*t.mutable_start())[k] = v;
    (*t.mutable_best())[k] = v;
  }
  if (req.dry_run()) return t;
  v1::AuditEntry a;
  a.set_unix_nanos(t.created_unix_nanos());
  a.set_actor(who.name);
  a.set_authenticated(who.authenticated);
  a.set_action("campaign_start");
  a.set_subject(t.id());
  a.set_reason(req.reason());
  a.set_detail(absl::StrCat(
      "policy ", pv->name(), "@", pv->sequence(), " budget ", budget, " trials; bounds ",
      absl::StrJoin(policy.knobs(), ", ", [](std::string* out, const v1::Knob& k) {
        absl::StrAppend(out, k.parameter(), " [", k.min(), ", ", k.max(), "]");
      })));
  if (absl::Status s = Save(t, {a}); !s.ok()) return s;
  ++seq_;
  campaigns_[t.id()] = t;
  Publish(t, absl::StrCat("proposed by ", who.name));
  return t;
}

absl::StatusOr<v1::Campaign> Campaigns::Approve(const v1::ChangeActionRequest& req,
                                                const Identity& who) {
  v1::Campaign* t = Find(req.id());
  if (t == nullptr) return absl::NotFoundError(absl::StrCat("no campaign ", req.id()));
  if (t->state() != v1::Campaign::PROPOSED) {
    return absl::FailedPreconditionError(absl::StrCat(
        "campaign ", t->id(), " is ", v1::Campaign::State_Name(t->state()), ", not PROPOSED"));
  }
  if (who.name == t->proposer()) {
    return absl::PermissionDeniedError(
        absl::StrCat(who.name, " proposed campaign ", t->id(), " and cannot approve it"));
  }
  for (const v1::Approval& a : t->approvals()) {
    if (a.approver() == who.name) {
      return absl::AlreadyExistsError(
          absl::StrCat(who.name, " already approved campaign ", t->id()));
    }
  }
  v1::Campaign next = *t;
  v1::Approval* a = next.add_approvals();
  a->set_approver(who.name);
  a->set_unix_nanos(absl::ToUnixNanos(clock_->Now()));
  a->set_authenticated(who.authenticated);
  a->set_reason(req.reason());
  if (next.approvals_size() >= next.approvals_required()) next.set_state(v1::Campaign::RUNNING);
  if (req.dry_run()) return next;
  v1::AuditEntry e;
  e.set_unix_nanos(absl::ToUnixNanos(clock_->Now()));
  e.set_actor(who.name);
  e.set_authenticated(who.authenticated);
  e.set_action("campaign_approve");
  e.set_subject(next.id());
  e.set_reason(req.reason());
  e.set_detail(absl::StrCat("approval ", next.approvals_size(), " of ", next.approvals_required(),
                            next.state() == v1::Campaign::RUNNING ? "; trials start" : ""));
  if (absl::Status s = Save(next, {e}); !s.ok()) return s;
  *t = next;
  Publish(*t, absl::StrCat("approved by ", who.name));
  return *t;
}

absl::StatusOr<v1::Campaign> Campaigns::Stop(const v1::ChangeActionRequest& req,
                                             const Identity& who) {
  v1::Campaign* t = Find(req.id());
  if (t == nullptr) return absl::NotFoundError(absl::StrCat("no campaign ", req.id()));
  if (t->state() != v1::Campaign::PROPOSED && t->state() != v1::Campaign::RUNNING) {
    return absl::FailedPreconditionError(absl::StrCat(
        "campaign ", t->id(), " is ", v1::Campaign::State_Name(t->state()), " already"));
  }
  // A campaign stopped before its approval never ran: it is REJECTED.
  const v1::Campaign::State end =
      t->state() == v1::Campaign::PROPOSED ? v1::Campaign::REJECTED : v1::Campaign::STOPPED;
  if (req.dry_run()) {
    v1::Campaign next = *t;
    next.set_state(end);
    return next;
  }
  changes_->AbortCampaignChanges(t->id(), who, absl::StrCat("campaign ", t->id(), " stopped"));
  waits_.erase(t->id());
  v1::Campaign next = *t;
  next.set_state(end);
  next.set_note(req.reason());
  for (v1::Trial& tr : *next.mutable_trials()) {
    if (tr.outcome() != "running") continue;
    tr.set_outcome("aborted");
    if (metrics_ != nullptr) metrics_->RecordTrial(tr.outcome());
  }
  v1::AuditEntry e;
  e.set_unix_nanos(absl::ToUnixNanos(clock_->Now()));
  e.set_actor(who.name);
  e.set_authenticated(who.authenticated);
  e.set_action(end == v1::Campaign::REJECTED ? "campaign_reject" : "campaign_stop");
  e.set_subject(next.id());
  e.set_reason(req.reason());
  if (absl::Status s = Save(next, {e}); !s.ok()) return s;
  *t = next;
  Publish(*t, "stopped");
  return *t;
}

absl::StatusOr<v1::Campaign> Campaigns::Get(const std::string& id) const {
  auto it = campaigns_.find(id);
  if (it == campaigns_.end()) return absl::NotFoundError(absl::StrCat("no campaign ", id));
  return it->second;
}

v1::ListCampaignsResponse Campaigns::List() const {
  v1::ListCampaignsResponse resp;
  for (auto it = campaigns_.rbegin(); it != campaigns_.rend(); ++it)
    *resp.add_campaigns() = it->second;
  return resp;
}

void Campaigns::TrialFinished(v1::Change* c, bool restarted) {
  v1::Campaign* t = Find(c->campaign_id());
  std::string outcome = "hold";
  TrialEstimate est;
  double own_shift = 0;
  std::string note;
  const v1::Verdict* v = c->verdicts_size() > 0 ? &c->verdicts(c->verdicts_size() - 1) : nullptr;
  if (v != nullptr) {
    note = v->summary();
    // The trial's objective: the judge's difference in differences against
    // the concurrent control, per rack; whatever moved the whole fleet between
    // baseline and bake moves both groups and cancels. The canary's own
    // before/after is kept beside it for the operator, never scored.
    est = EstimateOf(*v);
    if (const v1::MetricEvidence* m = FindEvidence(*v, kCanaryOwnShiftEvidence);
        m != nullptr && std::isfinite(m->ratio()) && m->ratio() > 0) {
      own_shift = m->ratio();
    }
    if (v->outcome() == v1::Verdict::FAIL) outcome = "fail";
    // A PASS without a drift-corrected estimate cannot be scored: a HOLD.
    if (v->outcome() == v1::Verdict::PASS && est.ratio.has_value()) outcome = "measured";
    if (v->outcome() == v1::Verdict::PASS && !est.ratio.has_value()) {
      note = absl::StrCat("no canary-versus-control p99 estimate to score; ", note);
    }
  }
  if (restarted) {
    outcome = "aborted";
    note = "the controller restarted during the trial; its baseline was lost";
  }
  const std::string reason = absl::StrCat("trial ", c->trial(), " of campaign ", c->campaign_id(),
                                          " ended (", outcome, "); canary hosts restored");
  changes_->EndTrial(c, outcome == "fail", reason);
  if (t == nullptr) return;
  v1::Campaign next = *t;
  absl::StatusOr<v1::PolicyVersion> pv =
      changes_->GetPolicyVersion(next.policy_name(), next.policy_version());
  const v1::Policy policy = WithDefaults(pv.ok() ? pv->policy() : v1::Policy());
  for (v1::Trial& tr : *next.mutable_trials()) {
    if (tr.change_id() != c->id()) continue;
    tr.set_note(note);
    if (est.ratio.has_value()) {
      tr.set_objective_ratio(*est.ratio);
      tr.set_objective_lower(est.lower);
      tr.set_objective_upper(est.upper);
      // A confirmation is held to the smallest gain worth a fleet-wide
      // change (the policy's, else the floor), not to a noise band.
      tr.set_min_improvement(TrialMinImprovement(policy, tr.confirms() != 0 ? 0 : est.noise));
    }
    if (own_shift > 0) tr.set_own_shift_ratio(own_shift);
    if (outcome == "measured") {
      // A trial the judge passed may still cost more than the policy
      // tolerates (the judge fails a constraint only on a significant loss);
      // such a trial must not become the winner.
      // The same for the fleet-wide reading of a trial's job (the whole
      // fleet before and during it, which sees a cost that crosses racks):
      // the fleet check FAILs only beyond the noise margin, and a winner
      // within the margin but above the tolerance, as at x1.17 for a 1.1
      // tolerance, was rolled back by the promotion's last stage in a run.
      const std::vector<v1::Constraint> constraints(policy.constraints().begin(),
                                                    policy.constraints().end());
      std::string exceeded = v != nullptr ? ConstraintPointExceeded(*v, constraints) : "";
      if (exceeded.empty() && v != nullptr) exceeded = FleetPointExceeded(*v, constraints);
      if (!exceeded.empty()) {
        tr.set_outcome("constraint_exceeded");
        tr.set_note(absl::StrCat(exceeded, " ", note));
      } else if (tr.confirms() != 0) {
        // Confirmed when the interval lies wholly below 1 (a gain at 95%
        // one-sided confidence) and the estimate clears the smallest gain
        // worth a fleet-wide change (the policy's min_improvement, else 2%).
        tr.set_outcome(est.upper < 1 && *est.ratio <= 1 - tr.min_improvement() ? "confirmed"
                                                                               : "not_confirmed");
      } else {
        tr.set_outcome(*est.ratio < next.best_objective_ratio() * (1 - tr.min_improvement())
                           ? "improved"
                           : "not_improved");
      }
    } else {
      tr.set_outcome(outcome);
    }
    if (metrics_ != nullptr) metrics_->RecordTrial(tr.outcome());
    if (v != nullptr) {
      for (const v1::MetricEvidence& m : v->metrics()) {
        if (m.metric() != kP99Evidence && m.metric() != kCanaryOwnShiftEvidence &&
            m.metric() != kControlOwnShiftEvidence && m.metric() != kCanaryOnsetShiftEvidence &&
            std::isfinite(m.ratio())) {
          (*tr.mutable_constraints())[m.metric()] = m.ratio();
        }
      }
    }
  }
  if (Save(next, {}).ok()) *t = next;
}

void Campaigns::Drive(v1::Campaign* t) {
  // A campaign whose trials an earlier version scored on the canary's own
  // before/after p99 cannot go on: its incumbent is on another scale than the
  // drift-corrected scores of its next trials. Stopped as `tuning stop` would,
  // its running trial aborted.
  const bool old_scores = std::any_of(t->trials().begin(), t->trials().end(), [](const auto& tr) {
    return (tr.outcome() == "improved" || tr.outcome() == "not_improved" ||
            tr.outcome() == "constraint_exceeded") &&
           tr.confirms() == 0 && tr.objective_ratio() > 0 && tr.min_improvement() == 0;
  });
  if (old_scores) {
    const std::string note =
        "stopped: its trials were scored on the canary's own before/after p99 by an earlier "
        "version, on another scale than drift-corrected scores; start a new campaign";
    changes_->AbortCampaignChanges(t->id(), Identity{"controller", false}, note);
    ControllerStop(t, *t, note);
    return;
  }
  if (changes_->TrialRunning(t->id())) return;
  if (Waiting(*t)) return;
  absl::StatusOr<v1::PolicyVersion> pv =
      changes_->GetPolicyVersion(t->policy_name(), t->policy_version());
  if (!pv.ok()) return;
  const v1::Policy policy = WithDefaults(pv->policy());
  // The next trial's baseline must not contain the previous trial: wait a
  // baseline (and a window) after the canary hosts were restored.
  int64_t last_end = 0;
  for (const v1::Trial& tr : t->trials()) {
    const v1::Change* c = changes_->FindChange(tr.change_id());
    if (c != nullptr && c->transitions_size() > 0) {
      last_end = std::max(last_end, c->transitions(c->transitions_size() - 1).unix_nanos());
    }
  }
  if (last_end != 0 && clock_->Now() < absl::FromUnixNanos(last_end) +
                                           Secs(policy.rollout().baseline_seconds()) + window_) {
    return;
  }
  absl::StatusOr<std::unique_ptr<Tuner>> tuner = MakeTuner(policy, t->trial_budget());
  if (!tuner.ok()) return;
  const KnobValues start(t->start().begin(), t->start().end());
  // A trial that HOLDs is run once more with twice the bake before it counts
  // as not improved: the retry stands in for it in the tuner's history.
  std::map<uint32_t, const v1::Trial*> retry_of;
  for (const v1::Trial& tr : t->trials()) {
    if (tr.retry_of() != 0) retry_of[tr.retry_of()] = &tr;
  }
  if (!t->trials().empty()) {
    const v1::Trial& last = t->trials(t->trials_size() - 1);
    const v1::Change* held = changes_->FindChange(last.change_id());
    const std::string rule = held != nullptr && held->verdicts_size() > 0
                                 ? held->verdicts(held->verdicts_size() - 1).rule()
                                 : "";
    const uint32_t ran = std::max(policy.rollout().bake_seconds(), last.bake_seconds());
    const uint32_t bake = std::min(2 * ran, changes_->MaxTrialBakeSeconds(*pv));
    // Not when a longer bake cannot help: no job reports at all, or no longer
    // bake fits in what the telemetry keeps. The trial then counts as not
    // improved.
    if (last.outcome() == "hold" && last.retry_of() == 0 && !retry_of.contains(last.index()) &&
        rule != "objective_no_data" && bake > ran) {
      StartTrial(t, *t, *pv, KnobValues(last.knobs().begin(), last.knobs().end()),
                 absl::StrCat("retry of ", last.confirms() != 0 ? "confirmation " : "trial ",
                              last.index(), " (", last.note(), ") with a bake of ", bake, " s"),
                 bake, last.index(), last.confirms());
      return;
    }
  }
  // Trials measured canary (candidate) against control (the start values);
  // the tuner wants each relative to the incumbent of its time.
  std::vector<TrialResult> results;
  for (const v1::Trial& first : t->trials()) {
    if (first.retry_of() != 0) continue;  // in place of the trial it repeats
    if (first.confirms() != 0) continue;  // a confirmation is not part of the search
    auto retry = retry_of.find(first.index());
    const v1::Trial& tr = retry != retry_of.end() ? *retry->second : first;
    if (tr.outcome() == "running") continue;
    const double incumbent = (*tuner)->Next(start, results).best_ratio;
    TrialResult r;
    r.knobs = KnobValues(tr.knobs().begin(), tr.knobs().end());
    r.constraint_ratios = TrialConstraintRatios(tr, policy);
    if (tr.min_improvement() > 0) r.min_improvement = tr.min_improvement();
    if (tr.outcome() == "improved" || tr.outcome() == "not_improved") {
      r.objective_ratio = tr.objective_ratio() / (incumbent > 0 ? incumbent : 1.0);
    } else if (tr.outcome() == "fail" || tr.outcome() == "constraint_exceeded" ||
               tr.outcome() == "rejected_before") {
      r.constraints_ok = false;
      if (tr.objective_ratio() > 0) r.objective_ratio = tr.objective_ratio() / incumbent;
    }
    results.push_back(std::move(r));
  }
  TunerDecision d = (*tuner)->Next(start, results);
  v1::Campaign next = *t;
  next.clear_best();
  for (const auto& [k, v] : d.best) (*next.mutable_best())[k] = v;
  next.set_best_objective_ratio(d.best_ratio);
  if (!d.next.has_value()) {
    if (d.best == start) {
      Finish(t, std::move(next), d.reason, {}, "");
    } else {
      Conclude(t, std::move(next), *pv, d.best, d.reason);
    }
    return;
  }
  const uint32_t index = static_cast<uint32_t>(t->trials_size() + 1);
  if (const std::string by = changes_->RejectedBy(t->policy_name(), *d.next); !by.empty()) {
    // Not run again: counted as a failed trial, so the tuner moves on.
    v1::Trial* tr = next.add_trials();
    tr->set_index(index);
    for (const auto& [k, v] : *d.next) (*tr->mutable_knobs())[k] = v;
    tr->set_outcome("rejected_before");
    tr->set_note(absl::StrCat("not run: ", by, " rolled these values back"));
    tr->set_unix_nanos(absl::ToUnixNanos(clock_->Now()));
    if (!Save(next, {}).ok()) return;  // the next tick decides again
    *t = next;
    if (metrics_ != nullptr) metrics_->RecordTrial("rejected_before");
    Publish(*t, absl::StrCat("trial ", index, " skipped: ", by, " rolled back ",
                             absl::StrJoin(*d.next, ",", absl::PairFormatter("="))));
    return;
  }
  // `next` carries the tuner's incumbent (best, best_objective_ratio): the
  // trial is scored against it when it ends.
  StartTrial(t, std::move(next), *pv, *d.next,
             absl::StrCat("trial ", index, " of campaign ", t->id(), ": ", d.reason), 0, 0, 0);
}

namespace {

// "0.912 [0.85, 0.98]": a trial's estimate with its 90% interval.
std::string EstimateText(const v1::Trial& tr) {
  if (tr.objective_ratio() <= 0) return "no estimate";
  if (tr.objective_lower() <= 0) return absl::StrFormat("%.3f", tr.objective_ratio());
  return absl::StrFormat("%.3f [%.3f, %.3f]", tr.objective_ratio(), tr.objective_lower(),
                         tr.objective_upper());
}

}  // namespace

void Campaigns::Conclude(v1::Campaign* t, v1::Campaign next, const v1::PolicyVersion& pv,
                         const KnobValues& best, const std::string& reason) {
  // The search trial that measured the winner (a retry stands in for its HOLD
  // trial, and comes after it), and the newest confirmation of the winner.
  std::optional<v1::Trial> winner, confirmation;
  for (const v1::Trial& tr : next.trials()) {
    if (tr.confirms() == 0 && tr.outcome() == "improved" &&
        KnobValues(tr.knobs().begin(), tr.knobs().end()) == best) {
      winner = tr;
    }
  }
  int attempts = 0;
  for (const v1::Trial& tr : next.trials()) {
    if (winner.has_value() && tr.confirms() == winner->index()) {
      confirmation = tr;
      attempts += tr.retry_of() == 0 ? 1 : 0;
    }
  }
  const std::string knobs = absl::StrJoin(best, ",", absl::PairFormatter("="));
  if (!winner.has_value()) {
    Finish(t, std::move(next),
           absl::StrCat(reason, "; no trial measured the best values ", knobs, ": not proposed"),
           {}, "");
    return;
  }
  // The winner is the best of many noisy measurements, so its own estimate
  // flatters it: it is measured once more, against the start values, on
  // canary hosts the search did not use. A confirmation lost to a controller
  // restart, or aborted or rolled back by hand (its trial then stays
  // "running" with no change active), is run again (at most three in all).
  const bool lost = confirmation.has_value() &&
                    (confirmation->outcome() == "aborted" || confirmation->outcome() == "running");
  if (!confirmation.has_value() || (lost && attempts < 3)) {
    StartTrial(t, std::move(next), pv, best,
               absl::StrCat("confirmation of trial ", winner->index(), " of campaign ", t->id(),
                            ": ", knobs, " against the start values on fresh canary members"),
               0, 0, winner->index());
    return;
  }
  const std::string search = absl::StrCat(EstimateText(*winner), " (trial ", winner->index(), ")");
  const std::string confirmed = absl::StrFormat(
      "%s (trial %u, %u canary members, %u of them fresh)", EstimateText(*confirmation),
      confirmation->index(), confirmation->canary_hosts(), confirmation->fresh_canary_hosts());
  if (confirmation->outcome() != "confirmed") {
    Finish(t, std::move(next),
           absl::StrCat(reason, "; the winner ", knobs, " was not confirmed: confirmation ",
                        confirmation->outcome(), ", ", confirmed, "; search estimate ", search,
                        "; not proposed"),
           {}, "");
    return;
  }
  Finish(t, std::move(next), reason, best,
         absl::StrCat("promote the best of campaign ", t->id(),
                      ": confirmed objective p99 ratio vs start against concurrent control ",
                      confirmed, "; search estimate ", search));
}

bool Campaigns::Wait(v1::Campaign* t, v1::Campaign next, const absl::Status& refused,
                     const std::string& what) {
  const absl::Time now = clock_->Now();
  auto [w, first] = waits_.try_emplace(t->id(), CampaignWait{now, absl::InfiniteFuture(), now});
  w->second.last_try = now;
  // Refused again while waiting out a baseline after the samples came back:
  // waiting again, within the same bound.
  const bool again = w->second.resume_at != absl::InfiniteFuture();
  w->second.resume_at = absl::InfiniteFuture();
  if (now - w->second.since >= trial_wait_) {
    waits_.erase(w);
    return false;
  }
  if (first || again) {  // said once; the next tries are quiet
    next.set_note(absl::StrCat("waiting to ", what, " (since ",
                               absl::FormatTime("%H:%M:%S", w->second.since, absl::UTCTimeZone()),
                               " UTC, at most ", absl::FormatDuration(trial_wait_),
                               "): ", refused.message()));
    if (Save(next, {}).ok()) *t = next;
    Publish(*t, next.note());
  }
  return true;
}

bool Campaigns::Resume(v1::Campaign* t, v1::Campaign* next, const v1::PolicyVersion& pv,
                       const std::string& what) {
  auto w = waits_.find(t->id());
  const bool stale = absl::StartsWith(t->note(), "waiting to ") ||
                     absl::StartsWith(t->note(), "the samples are back");
  if (w == waits_.end()) {
    // A note left by a wait from before a controller restart is over too.
    if (stale) next->set_note(absl::StrCat("ready to ", what));
    return false;
  }
  const absl::Time now = clock_->Now();
  if (w->second.resume_at == absl::InfiniteFuture()) {
    // Back: the trial's baseline is the period before it starts, which still
    // holds the pause. A full baseline (and a window) of samples first.
    w->second.resume_at =
        now + Secs(WithDefaults(pv.policy()).rollout().baseline_seconds()) + window_;
    w->second.last_try = now;
    v1::Campaign said = *t;
    said.set_note(absl::StrCat(
        "the samples are back after ", absl::FormatDuration(now - w->second.since), "; to ", what,
        " after a full baseline of them, at ",
        absl::FormatTime("%H:%M:%S", w->second.resume_at, absl::UTCTimeZone()), " UTC"));
    if (Save(said, {}).ok()) *t = said;
    Publish(*t, said.note());
    return true;
  }
  if (now < w->second.resume_at) {
    w->second.last_try = now;
    return true;
  }
  next->set_note(absl::StrCat("ready to ", what, " after waiting ",
                              absl::FormatDuration(now - w->second.since)));
  waits_.erase(w);
  return false;
}

bool Campaigns::Waiting(const v1::Campaign& t) const {
  auto w = waits_.find(t.id());
  if (w == waits_.end()) return false;
  const absl::Time now = clock_->Now();
  // Waiting out the baseline after the samples came back: tried again every
  // kWaitRetryEvery too, so that a dip in between is seen (Wait again).
  if (w->second.resume_at != absl::InfiniteFuture() && now >= w->second.resume_at) return false;
  // The rate is read over the last 30 s: trying every tick would only repeat
  // the refusal (and read every host's telemetry each second).
  return now < w->second.last_try + kWaitRetryEvery && now - w->second.since < trial_wait_;
}

void Campaigns::ControllerStop(v1::Campaign* t, v1::Campaign next, const std::string& note) {
  waits_.erase(t->id());
  next.set_state(v1::Campaign::STOPPED);
  next.set_note(note);
  for (v1::Trial& tr : *next.mutable_trials()) {
    if (tr.outcome() == "running") tr.set_outcome("aborted");
  }
  v1::AuditEntry e;
  e.set_unix_nanos(absl::ToUnixNanos(clock_->Now()));
  e.set_actor("controller");
  e.set_action("campaign_stop");
  e.set_subject(next.id());
  e.set_reason(note);
  if (Save(next, {e}).ok()) *t = next;
  Publish(*t, next.note());
}

void Campaigns::Finish(v1::Campaign* t, v1::Campaign next, const std::string& note,
                       const KnobValues& promote, const std::string& promotion_reason) {
  next.set_state(v1::Campaign::FINISHED);
  next.set_note(note);
  if (!promotion_reason.empty()) {
    // Promoting the winner beyond the canary needs approval again.
    absl::StatusOr<std::string> c = changes_->ProposePromotion(next, promote, promotion_reason);
    // Refused for want of samples (a paused job): the campaign waits, as for
    // a trial, and proposes its confirmed winner once they are back.
    bool waited_out = false;
    if (!c.ok() && rollout_util::IsRetryLater(c.status())) {
      if (Wait(t, *t, c.status(), "propose its confirmed winner")) return;
      waited_out = true;
    }
    if (c.ok()) {
      next.set_promotion_change_id(*c);
    } else {
      next.set_note(absl::StrCat(
          note, "; promotion not proposed",
          waited_out ? absl::StrCat(" after waiting ", absl::FormatDuration(trial_wait_)) : "",
          ": ", c.status().message()));
    }
  }
  waits_.erase(t->id());  // ends here (not above: a wait for the proposal goes on)
  int retries = 0, confirmations = 0;
  for (const v1::Trial& tr : next.trials()) {
    retries += tr.retry_of() != 0 ? 1 : 0;
    confirmations += tr.confirms() != 0 && tr.retry_of() == 0 ? 1 : 0;
  }
  v1::AuditEntry e;
  e.set_unix_nanos(absl::ToUnixNanos(clock_->Now()));
  e.set_actor("tuner");
  e.set_action("campaign_finished");
  e.set_subject(next.id());
  e.set_reason(next.note());
  e.set_detail(
      absl::StrFormat("%d trials (and %d retries, %d confirmations); best p99 ratio %.3f: %s; %s",
                      next.trials_size() - retries - confirmations, retries, confirmations,
                      next.best_objective_ratio(),
                      absl::StrJoin(KnobValues(next.best().begin(), next.best().end()), ",",
                                    absl::PairFormatter("=")),
                      next.promotion_change_id().empty()
                          ? "nothing proposed"
                          : absl::StrCat("proposed as ", next.promotion_change_id())));
  if (Save(next, {e}).ok()) *t = next;
  // Persist the promotion's campaign link.
  if (!next.promotion_change_id().empty()) changes_->PersistChange(next.promotion_change_id());
  Publish(*t, absl::StrCat("finished: ", t->note()));
}

void Campaigns::StartTrial(v1::Campaign* t, v1::Campaign next, const v1::PolicyVersion& pv,
                           const KnobValues& knobs, const std::string& reason,
                           uint32_t bake_seconds, uint32_t retry_of, uint32_t confirms) {
  const uint32_t index = static_cast<uint32_t>(next.trials_size() + 1);
  // A confirmation's canary avoids the canary of the trial it confirms.
  std::string fresh_from;
  for (const v1::Trial& tr : next.trials()) {
    if (confirms != 0 && tr.index() == confirms) fresh_from = tr.change_id();
  }
  absl::StatusOr<v1::Change> c =
      changes_->BuildTrial(next, pv, knobs, index, reason, bake_seconds, fresh_from);
  const std::string what = absl::StrCat("start trial ", index);
  if (!c.ok() && rollout_util::IsRetryLater(c.status())) {
    if (Wait(t, next, c.status(), what)) return;
    ControllerStop(t, std::move(next),
                   absl::StrCat("trial ", index, " could not be built for ",
                                absl::FormatDuration(trial_wait_), ": ", c.status().message()));
    return;
  }
  if (c.ok() && Resume(t, &next, pv, what)) return;
  if (!c.ok()) {
    waits_.erase(t->id());
    next.set_state(v1::Campaign::STOPPED);
    next.set_note(absl::StrCat("trial ", index, " could not be built: ", c.status().message()));
    if (Save(next, {}).ok()) *t = next;
    Publish(*t, next.note());
    return;
  }
  v1::Trial* tr = next.add_trials();
  tr->set_index(index);
  for (const auto& [k, v] : knobs) (*tr->mutable_knobs())[k] = v;
  tr->set_change_id(c->id());
  tr->set_outcome("running");
  tr->set_unix_nanos(absl::ToUnixNanos(clock_->Now()));
  tr->set_bake_seconds(c->bake_seconds() > 0 ? c->bake_seconds()
                                             : WithDefaults(pv.policy()).rollout().bake_seconds());
  tr->set_retry_of(retry_of);
  tr->set_confirms(confirms);
  if (confirms != 0) {
    std::set<std::string> searched;
    if (const v1::Change* w = changes_->FindChange(fresh_from); w != nullptr) {
      for (const v1::HostTarget& h : w->hosts()) {
        if (h.role() == v1::HostTarget::CANARY) searched.insert(h.host_id());
      }
    }
    // Fresh: not a canary member of the trial it confirms (none counted
    // when that trial's change is no longer known).
    uint32_t canaries = 0, fresh = 0;
    for (const v1::HostTarget& h : c->hosts()) {
      if (h.role() != v1::HostTarget::CANARY) continue;
      ++canaries;
      fresh += searched.empty() || searched.contains(h.host_id()) ? 0 : 1;
    }
    tr->set_canary_hosts(canaries);
    tr->set_fresh_canary_hosts(fresh);
  }
  const std::string id = c->id();
  if (!changes_->CommitTrial(*std::move(c)).ok()) return;  // the next tick tries again
  if (Save(next, {}).ok()) *t = next;
  Publish(*t,
          absl::StrCat(retry_of != 0 ? absl::StrCat("retry of trial ", retry_of, ": ") : "",
                       confirms != 0 ? absl::StrCat("confirmation of trial ", confirms, ": ") : "",
                       "trial ", index, " (", id,
                       "): ", absl::StrJoin(knobs, ",", absl::PairFormatter("="))));
}

}  // namespace rocetune::controller
