#include "controller/rollout/step_evaluator.h"

#include <algorithm>
#include <memory>
#include <optional>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "controller/rollout/judge_inputs.h"
#include "controller/rollout/rollout_util.h"
#include "controller/rollout/switch_plan.h"
#include "daemon/logging.h"

namespace rocetune::controller {

using rollout_util::RunsChangeAt;

namespace {

uint32_t StageOf(const v1::Change& c) { return c.state() == v1::STAGE ? c.stage() : 0; }

// A changed host that reported in fewer of the step's windows is silent (the
// judge admits a host from the same share).
constexpr double kUnconfirmedWindowShare = 0.8;

// "HOST: not changed: KNOB on DEVICE is not in effect (why)": a changed host
// one of the change's knobs cannot act on (HostTarget.not_in_effect).
std::string NotChanged(const v1::HostTarget& h) {
  const v1::ParameterNote& n = h.not_in_effect(0);
  return absl::StrCat(h.host_id(), ": not changed: ", n.parameter(), " on ", n.device(),
                      " is not in effect (", n.reason(), ")");
}

}  // namespace

bool StepEvaluator::HasControl(const v1::Change& c) {
  const uint32_t stage = StageOf(c);
  for (const v1::HostTarget& h : c.hosts()) {
    if (h.role() == v1::HostTarget::CONTROL && h.stage() > stage) return true;
  }
  return false;
}

absl::Time StepEvaluator::CompleteUntil(absl::Time now) const {
  return telemetry_->WindowStart(telemetry_->WindowIndex(now - report_grace_));
}

std::vector<v1::Verdict> StepEvaluator::Look(const StepLook& in) const {
  std::vector<v1::Verdict> out;
  const bool final = in.look >= in.looks;
  if (HasControl(*in.change)) {
    out.push_back(Experiment(in));
  } else if (std::optional<v1::Verdict> breach = HardLimits(in)) {
    out.push_back(std::move(*breach));
    return out;
  } else if (final) {
    out.push_back(NoControlLeft(in));
  } else {
    return out;
  }
  if (!final || out.back().outcome() == v1::Verdict::FAIL) return out;
  const bool held = out.back().outcome() == v1::Verdict::HOLD;
  // A trial is checked fleet-wide when it has a fleet baseline: one taken for
  // a policy that holds the other p99 series (FleetGuardConfig::trial).
  if (!in.change->canary_only() || in.fleet_baseline != nullptr) {
    v1::Verdict fleet = Fleet(in, held);
    fleet.set_look(out.back().look());
    fleet.set_looks(out.back().looks());
    // After a PASS, a guard HOLD or FAIL follows it. After a HOLD (the judge
    // could not decide) only a FAIL does, and decides the look: a change held
    // to the HOLD limit would otherwise never be held to the fleet's figures,
    // and end ABORTED with its values not rejected (the guard keeps a FAIL
    // then only when the step's onset shows the loss too: FleetGuard's
    // judge_held). Anything else joins the judge's verdict, which stays the
    // deciding one on a HOLD (the HOLD limit's reason and a campaign's retry
    // of a held trial read its rule).
    const bool follows =
        held ? fleet.outcome() == v1::Verdict::FAIL : fleet.outcome() != v1::Verdict::PASS;
    if (!follows) {
      if (held && fleet.rule() == "fleet_shift") {
        absl::StrAppend(out.back().mutable_summary(), "; ", fleet.summary());
      }
      MergeFleetEvidence(fleet, &out.back());
    } else {
      // A trial's verdict keeps the judge's figures beside the fleet's: the
      // campaign records the trial's estimate from its last verdict.
      if (in.change->canary_only()) MergeFleetEvidence(out.back(), &fleet);
      LogInfo("fleet guard", {{"change", in.change->id()},
                              {"outcome", v1::Verdict::Outcome_Name(fleet.outcome())},
                              {"judge", v1::Verdict::Outcome_Name(out.back().outcome())},
                              {"summary", fleet.summary()}});
      out.push_back(std::move(fleet));
      return out;
    }
  }
  if (held) return out;
  if (std::string why = Unconfirmed(in); !why.empty()) {
    v1::Verdict v;
    v.set_outcome(v1::Verdict::HOLD);
    v.set_unix_nanos(absl::ToUnixNanos(in.now));
    v.set_stage(StageOf(*in.change));
    v.set_look(out.back().look());
    v.set_looks(out.back().looks());
    v.set_rule("canary_unconfirmed");
    v.set_summary(
        absl::StrCat("HOLD: the measurements passed, but not every host the step "
                     "changed confirms it: ",
                     why));
    out.push_back(std::move(v));
  }
  return out;
}

std::string StepEvaluator::Unconfirmed(const StepLook& in) const {
  const v1::Change& c = *in.change;
  const uint32_t stage = StageOf(c);
  const absl::Time to = CompleteUntil(in.now);
  const int expected =
      static_cast<int>(telemetry_->WindowIndex(to) - telemetry_->WindowIndex(in.after_start));
  std::vector<std::string> problems;
  for (const v1::HostTarget& h : c.hosts()) {
    if (!RunsChangeAt(h, stage) || h.pushed_version().empty()) continue;
    auto cur = in.current_versions.find(h.host_id());
    if (cur == in.current_versions.end() || cur->second != h.pushed_version()) {
      problems.push_back(absl::StrCat(
          h.host_id(), " runs ",
          cur == in.current_versions.end() || cur->second.empty() ? "(unknown)" : cur->second,
          ", not version ", h.pushed_version()));
      continue;
    }
    // Switches report levels on their own schedule; their acks confirm them.
    if (IsSwitchTarget(h) || expected <= 0) continue;
    std::shared_ptr<HostTelemetry> t = telemetry_->Find(h.host_id());
    const int present =
        t != nullptr && to > in.after_start
            ? t->Aggregate(in.after_start, to, in.policy.objective().peer_class()).windows_present
            : 0;
    if (present < kUnconfirmedWindowShare * expected) {
      problems.push_back(absl::StrCat(h.host_id(), " reported in ", present, " of ", expected,
                                      " windows of the step"));
    }
  }
  return absl::StrJoin(problems, "; ");
}

absl::Time StepEvaluator::OnsetEnd(const StepLook& in, absl::Time to) const {
  if (in.resumed) return in.after_start;
  const int64_t window = absl::ToInt64Nanoseconds(telemetry_->options().window);
  const int64_t quarter =
      absl::ToInt64Nanoseconds(absl::Seconds(in.policy.rollout().bake_seconds()) / 4);
  const int64_t windows = std::max<int64_t>(2, window > 0 ? (quarter + window - 1) / window : 2);
  // after_start is a window boundary, so the onset is `windows` whole windows.
  const absl::Time end = in.after_start + telemetry_->options().window * windows;
  return end < to ? end : in.after_start;
}

v1::Verdict StepEvaluator::Experiment(const StepLook& in) const {
  const v1::Change& c = *in.change;
  const absl::Time to = CompleteUntil(in.now);
  const int expected =
      static_cast<int>(telemetry_->WindowIndex(to) - telemetry_->WindowIndex(in.after_start));
  const absl::Time onset_to = OnsetEnd(in, to);
  const int onset_windows =
      static_cast<int>(telemetry_->WindowIndex(onset_to) - telemetry_->WindowIndex(in.after_start));
  std::vector<HostInput> inputs;
  std::vector<std::string> not_changed;
  for (const v1::HostTarget& h : c.hosts()) {
    auto b = in.baseline->find(h.host_id());
    if (b == in.baseline->end()) continue;
    // Applied but not in effect: the host is not changed, so it is neither
    // canary nor control (issue 25 item 8).
    if (RunsChangeAt(h, StageOf(c)) && h.not_in_effect_size() > 0) {
      not_changed.push_back(NotChanged(h));
      continue;
    }
    HostInput host;
    host.host_id = h.host_id();
    host.rack = h.rack();
    host.canary = RunsChangeAt(h, StageOf(c));
    host.before = b->second;
    std::shared_ptr<HostTelemetry> t = telemetry_->Find(h.host_id());
    PeriodAggregate agg;
    if (t != nullptr && to > in.after_start) {
      agg = t->Aggregate(in.after_start, to, in.policy.objective().peer_class());
    }
    host.after = ToHostPeriod(agg, std::max(1, expected), in.policy.objective());
    if (host.canary && t != nullptr && onset_to > in.after_start) {
      host.onset =
          ToHostPeriod(t->Aggregate(in.after_start, onset_to, in.policy.objective().peer_class()),
                       std::max(1, onset_windows), in.policy.objective());
    }
    inputs.push_back(std::move(host));
  }
  JudgeConfig cfg;
  cfg.guard = in.policy.guard();
  cfg.objective = in.policy.objective().metric();
  cfg.constraints.assign(in.policy.constraints().begin(), in.policy.constraints().end());
  cfg.look = in.look;
  cfg.looks = in.looks;
  cfg.hold_looks = HoldLooksAllowed(in.policy.guard().max_hold_seconds(),
                                    in.policy.rollout().bake_seconds(), in.looks);
  cfg.stage = StageOf(c);
  cfg.now_unix_nanos = absl::ToUnixNanos(in.now);
  std::vector<HostInput> cumulative = CumulativeInputs(in, inputs);
  if (!cumulative.empty()) {
    cfg = HalfFailBudget(std::move(cfg));  // two tests decide this look
  }
  v1::Verdict v = Judge(inputs, cfg);
  for (std::string& d : not_changed) v.add_dropped_hosts(std::move(d));
  AddCanaryOwnShift(inputs, &v, cfg.objective);
  if (!cumulative.empty()) MergeCumulative(Judge(cumulative, cfg), &v);
  return v;
}

std::vector<HostInput> StepEvaluator::CumulativeInputs(const StepLook& in,
                                                       const std::vector<HostInput>& step) const {
  // At the canary step the step's baseline is the pre-change one.
  if (StageOf(*in.change) == 0 || in.fleet_baseline == nullptr) return {};
  std::vector<HostInput> out;
  for (const HostInput& h : step) {
    auto b = in.fleet_baseline->hosts.find(h.host_id);
    // A fleet baseline recorded before it kept each host's probes (an older
    // controller's, resumed) cannot serve; nor can a host without the
    // objective's samples then (the judge would drop it anyway).
    if (b == in.fleet_baseline->hosts.end() ||
        ObjectiveSamples(b->second, in.policy.objective().metric()).empty()) {
      continue;
    }
    HostInput host;
    host.host_id = h.host_id;
    host.rack = h.rack;
    host.canary = h.canary;
    host.before = b->second;
    host.after = h.after;
    out.push_back(std::move(host));
  }
  const bool canary =
      std::any_of(out.begin(), out.end(), [](const HostInput& h) { return h.canary; });
  const bool control =
      std::any_of(out.begin(), out.end(), [](const HostInput& h) { return !h.canary; });
  if (!canary || !control) return {};
  return out;
}

std::optional<v1::Verdict> StepEvaluator::HardLimits(const StepLook& in) const {
  const v1::Change& c = *in.change;
  const uint32_t stage = StageOf(c);
  const absl::Time to = CompleteUntil(in.now);
  if (to <= in.after_start) return std::nullopt;
  const int expected =
      static_cast<int>(telemetry_->WindowIndex(to) - telemetry_->WindowIndex(in.after_start));
  std::vector<HostInput> changed;
  for (const v1::HostTarget& h : c.hosts()) {
    // A host the change's knobs are not in effect on is not changed.
    if (!RunsChangeAt(h, stage) || IsSwitchTarget(h) || h.not_in_effect_size() > 0) continue;
    std::shared_ptr<HostTelemetry> t = telemetry_->Find(h.host_id());
    if (t == nullptr) continue;
    HostInput host;
    host.host_id = h.host_id();
    host.rack = h.rack();
    host.canary = true;
    host.after = ToHostPeriod(t->Aggregate(in.after_start, to, in.policy.objective().peer_class()),
                              std::max(1, expected), in.policy.objective());
    changed.push_back(std::move(host));
  }
  std::vector<HardLimitBreach> breaches = HardLimitBreaches(changed, in.policy.guard());
  if (breaches.empty()) return std::nullopt;
  v1::Verdict v;
  v.set_outcome(v1::Verdict::FAIL);
  v.set_unix_nanos(absl::ToUnixNanos(in.now));
  v.set_stage(stage);
  v.set_look(in.look);
  v.set_looks(in.looks);
  v.set_rule(breaches.front().rule);
  v.set_summary(absl::StrCat(breaches.front().summary,
                             " (no control left at this stage: the policy's hard limits judge "
                             "every changed host)"));
  return v;
}

v1::Verdict StepEvaluator::NoControlLeft(const StepLook& in) const {
  // The last stage leaves no control: the hard limits (HardLimits, at every
  // look), the agents' guard events (as they arrive) and the fleet guard judge
  // it.
  v1::Verdict v;
  v.set_outcome(v1::Verdict::PASS);
  v.set_unix_nanos(absl::ToUnixNanos(in.now));
  v.set_stage(in.change->stage());
  v.set_look(in.looks);
  v.set_looks(in.looks);
  v.set_rule("no_control_left");
  v.set_summary("every selected host runs the change; no guard fired during the bake");
  const uint32_t stage = StageOf(*in.change);
  for (const v1::HostTarget& h : in.change->hosts()) {
    if (!RunsChangeAt(h, stage) || h.not_in_effect_size() == 0) continue;
    v.add_dropped_hosts(NotChanged(h));
  }
  if (v.dropped_hosts_size() > 0) {
    absl::StrAppend(v.mutable_summary(), "; ", v.dropped_hosts_size(),
                    " of them not changed (a knob not in effect there, see dropped_hosts)");
  }
  return v;
}

v1::Verdict StepEvaluator::Fleet(const StepLook& in, bool judge_held) const {
  FleetGuardConfig cfg;
  cfg.constraints.assign(in.policy.constraints().begin(), in.policy.constraints().end());
  cfg.stage = StageOf(*in.change);
  cfg.min_rtt_samples = in.policy.guard().min_samples();
  cfg.now_unix_nanos = absl::ToUnixNanos(in.now);
  cfg.objective = in.policy.objective().metric();
  cfg.trial = in.change->canary_only();
  cfg.judge_held = judge_held;
  if (in.fleet_baseline == nullptr) {
    v1::Verdict v;
    v.set_outcome(v1::Verdict::HOLD);
    v.set_unix_nanos(cfg.now_unix_nanos);
    v.set_stage(cfg.stage);
    v.set_rule("fleet_data");
    v.set_summary("HOLD: no fleet baseline recorded for this change");
    return v;
  }
  const absl::Time to = CompleteUntil(in.now);
  const int expected =
      static_cast<int>(telemetry_->WindowIndex(to) - telemetry_->WindowIndex(in.after_start));
  FleetPeriod since =
      FleetPeriods(*in.change, in.after_start, to, std::max(1, expected), in.policy);
  since.seconds = std::max(0.0, absl::ToDoubleSeconds(to - in.after_start));
  // The step's onset, which FleetGuard tells a change's rise or loss from an
  // incident's by (fleet_p99, and any FAIL of a look the judge held). A
  // trial's check (the other p99's constraint alone) reads it only after a
  // judge HOLD.
  const absl::Time onset_to = OnsetEnd(in, to);
  if (onset_to > in.after_start && (!cfg.trial || judge_held)) {
    const int onset_windows = static_cast<int>(telemetry_->WindowIndex(onset_to) -
                                               telemetry_->WindowIndex(in.after_start));
    FleetPeriod onset =
        FleetPeriods(*in.change, in.after_start, onset_to, std::max(1, onset_windows), in.policy);
    onset.seconds = absl::ToDoubleSeconds(onset_to - in.after_start);
    since.onset = std::make_shared<const FleetPeriod>(std::move(onset));
  }
  // FleetPeriods lists every host the change measures (switches excepted),
  // with or without data: the coverage rule's denominator.
  return FleetGuard(*in.fleet_baseline, since, static_cast<int>(since.hosts.size()), cfg);
}

std::optional<v1::Verdict> StepEvaluator::Nack(const v1::Change& c, const std::string& host_id,
                                               const std::string& version, const std::string& error,
                                               absl::Time now) {
  for (const v1::HostTarget& h : c.hosts()) {
    if (h.host_id() != host_id || h.pushed_version() != version) continue;
    v1::Verdict v;
    v.set_outcome(v1::Verdict::FAIL);
    v.set_unix_nanos(absl::ToUnixNanos(now));
    v.set_stage(c.stage());
    v.set_rule("nack");
    v.set_summary(absl::StrCat("host ", host_id, " refused version ", version, ": ", error));
    return v;
  }
  return std::nullopt;
}

std::optional<v1::Verdict> StepEvaluator::GuardEvent(const v1::Change& c,
                                                     const std::string& host_id,
                                                     const v1::GuardEvent& event, absl::Time now) {
  for (const v1::HostTarget& h : c.hosts()) {
    if (h.host_id() != host_id || h.pushed_version().empty()) continue;
    if (!event.judged_version().empty() && event.judged_version() != h.pushed_version()) {
      // A late event about another set (an earlier change's, or a restore).
      LogInfo("guard event for another version ignored", {{"change", c.id()},
                                                          {"host", host_id},
                                                          {"judged", event.judged_version()},
                                                          {"pushed", h.pushed_version()}});
      return std::nullopt;
    }
    v1::Verdict v;
    v.set_outcome(v1::Verdict::FAIL);
    v.set_unix_nanos(absl::ToUnixNanos(now));
    v.set_stage(c.stage());
    const std::string restored =
        event.restored_version().empty() ? "(baseline)" : event.restored_version();
    if (event.kind() == kLeaseExpiredKind) {
      // Not a finding about the set: the host lost the controller and went
      // back to its last-known-good, so this step's data is no longer one set's.
      v.set_rule("lease_expired");
      v.set_summary(absl::StrCat(host_id,
                                 event.restored_version().empty()
                                     ? std::string(" had no last-known-good set to restore")
                                     : absl::StrCat(" restored version ", event.restored_version()),
                                 " when the change's provisional lease expired: ", event.detail()));
      return v;
    }
    v.set_rule("local_guard");
    v.set_summary(absl::StrCat("the local guard on ", host_id, " restored version ", restored, ": ",
                               event.kind(), ": ", event.detail()));
    return v;
  }
  return std::nullopt;
}

FleetPeriod StepEvaluator::FleetPeriods(const v1::Change& c, absl::Time from, absl::Time to,
                                        int expected, const v1::Policy& policy,
                                        bool keep_host_rtt) const {
  FleetPeriod out;
  const v1::Objective& objective = policy.objective();
  const bool job_objective = objective.metric() == v1::Objective::STEP_TIME_P99;
  // The other series, merged only when a constraint of the policy names it.
  if (HoldsOtherP99(policy)) out.other_metric = OtherP99Metric(objective);
  for (const v1::HostTarget& h : c.hosts()) {
    // Switches report levels, not tx_bytes: as in the judge's baseline, they
    // are not part of the fleet's host evidence.
    if (IsSwitchTarget(h)) continue;
    std::shared_ptr<HostTelemetry> t = telemetry_->Find(h.host_id());
    PeriodAggregate agg;
    if (t != nullptr && to > from) agg = t->Aggregate(from, to, objective.peer_class());
    HostPeriod p = ToHostPeriod(agg, expected, objective);
    // Sketches of one store share its accuracy: a merge cannot fail, and a
    // host that somehow could not merge is left out of the fleet's p99 only.
    if (const QuantileSketch& x = ObjectiveSamples(p, objective.metric()); !x.empty()) {
      out.rtt.Merge(x).IgnoreError();
    }
    if (const QuantileSketch& y = job_objective ? p.rtt : p.job;
        !out.other_metric.empty() && !y.empty()) {
      out.other.Merge(y).IgnoreError();
    }
    if (!keep_host_rtt) {  // per host, the guard reads counters only
      p.rtt = QuantileSketch();
      p.job = QuantileSketch();
    }
    out.hosts[h.host_id()] = std::move(p);
  }
  return out;
}

}  // namespace rocetune::controller
