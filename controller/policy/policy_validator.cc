// PolicyFile::Validate: the semantic rules. Each error names a rule id that
// docs/policies.md lists.

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "controller/policy/knob_spec.h"
#include "controller/policy/policy_loader.h"
#include "model/job_event.h"
#include "model/switch_params.h"

namespace rocetune::controller {
namespace {

constexpr uint32_t kMaxApprovers = 10;
constexpr uint32_t kMaxTrialBudget = 200;
constexpr size_t kMaxNameLength = 63;

constexpr const char* kConstraintMetrics[] = {"throughput_gbps", "pfc_pause_ratio",
                                              "cnp_per_second",  "retransmits_per_second",
                                              "probe_rtt_p99",   "step_time_p99"};

// Adds an error at the location of a field path.
using Report = std::function<void(const std::string& path, const char* rule, std::string message)>;

bool ValidName(const std::string& name) {
  if (name.empty() || name.size() > kMaxNameLength) return false;
  auto lower_or_digit = [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); };
  if (!lower_or_digit(name[0])) return false;
  return std::all_of(name.begin() + 1, name.end(),
                     [&](char c) { return lower_or_digit(c) || c == '_' || c == '.' || c == '-'; });
}

std::string Range(const KnobSpec& spec) {
  return absl::StrCat("[", spec.min, ", ", spec.max, "] ", spec.unit);
}

void CheckName(const v1::Policy& policy, const Report& report) {
  if (policy.name().empty()) {
    report("name", "name_missing", "the policy has no name");
  } else if (!ValidName(policy.name())) {
    report("name", "name_invalid",
           absl::StrCat("name \"", policy.name(),
                        "\" must be 1 to 63 characters of a-z, 0-9, '_', '.' or '-', starting "
                        "with a letter or digit"));
  }
}

void CheckObjective(const v1::Policy& policy, const PolicyContext& context, const Report& report) {
  const v1::Objective& o = policy.objective();
  const auto metric = o.metric();
  if (metric == v1::Objective::METRIC_UNSPECIFIED) {
    report("objective.metric", "objective_metric_unspecified",
           "objective.metric is not set (PROBE_RTT_P99 or STEP_TIME_P99)");
  } else if (!v1::Objective::Metric_IsValid(metric)) {
    report("objective.metric", "objective_metric_unknown",
           absl::StrCat("objective.metric ", metric, " is not a known metric"));
  } else if (metric == v1::Objective::PROBE_RTT_P999) {
    report("objective.metric", "objective_metric_unsupported",
           "objective.metric PROBE_RTT_P999 is not implemented: the judge decides on the p99 "
           "(and fails a change whose p999 rose significantly wherever hosts have ten times "
           "guard.min_samples probes); use PROBE_RTT_P99");
  }
  // The job signal's series: read by STEP_TIME_P99 and by step_time_p99 constraints.
  const bool job_constraint =
      std::any_of(policy.constraints().begin(), policy.constraints().end(),
                  [](const v1::Constraint& c) { return c.metric() == "step_time_p99"; });
  const bool reads_job = metric == v1::Objective::STEP_TIME_P99 || job_constraint;
  if (reads_job) {
    const char* who = metric == v1::Objective::STEP_TIME_P99 ? "objective.metric STEP_TIME_P99"
                                                             : "a step_time_p99 constraint";
    if (o.op().empty()) {
      report("objective.op", "objective_op_missing",
             absl::StrCat(who,
                          " reads the job signal: objective.op must name the operation "
                          "(e.g. \"step\", \"allreduce\"; docs/job-signal.md)"));
    } else if (absl::Status s = CheckJobOp(o.op()); !s.ok()) {
      report("objective.op", "objective_op_invalid", absl::StrCat("objective.", s.message()));
    }
    if (!o.job().empty()) {
      if (absl::Status s = CheckJobName(o.job()); !s.ok()) {
        report("objective.job", "objective_job_invalid", absl::StrCat("objective.", s.message()));
      }
    }
  } else if (!o.job().empty() || !o.op().empty()) {
    report(o.op().empty() ? "objective.job" : "objective.op", "objective_job_unused",
           "objective.job and objective.op name a job-signal series, but nothing reads it "
           "(objective.metric STEP_TIME_P99 or a step_time_p99 constraint)");
  }
  if (metric == v1::Objective::STEP_TIME_P99 && !o.peer_class().empty()) {
    report("objective.peer_class", "objective_peer_class_unused",
           "objective.peer_class narrows the probes, which STEP_TIME_P99 does not read; a "
           "probe_rtt_p99 constraint reads every class");
  } else if (!o.peer_class().empty() &&
             !KnownProbePeerClass(o.peer_class(), context.probe_locality_label)) {
    const std::string label = context.probe_locality_label.value_or("tor");
    report("objective.peer_class", "objective_peer_class_unknown",
           absl::StrCat("objective.peer_class \"", o.peer_class(),
                        "\" is not a class the probes report, so the objective would read no "
                        "probes: use \"intra_",
                        label, "\" (peers with the same ", label, " label), \"inter_", label,
                        "\" (the others) or leave it empty (all "
                        "probes)",
                        context.probe_locality_label.has_value()
                            ? " (the controller's --probe_locality_label is " + label + ")"
                            : ""));
  }
}

void CheckConstraints(const v1::Policy& policy, const Report& report) {
  for (int i = 0; i < policy.constraints_size(); ++i) {
    const v1::Constraint& c = policy.constraints(i);
    const std::string p = absl::StrCat("constraints[", i, "]");
    if (std::find(std::begin(kConstraintMetrics), std::end(kConstraintMetrics), c.metric()) ==
        std::end(kConstraintMetrics)) {
      report(p + ".metric", "constraint_metric_unknown",
             absl::StrCat(p, ".metric \"", c.metric(), "\" is not one of ",
                          absl::StrJoin(kConstraintMetrics, ", ")));
    }
    if (c.has_min() && c.has_max() && !(c.min() <= c.max())) {
      report(p + ".min", "constraint_min_gt_max",
             absl::StrCat(p, " (", c.metric(), "): min ", c.min(), " is above max ", c.max()));
    }
    if ((c.metric() == "probe_rtt_p99" || c.metric() == "step_time_p99") &&
        (c.has_min() || c.has_max())) {
      report(p + (c.has_min() ? ".min" : ".max"), "constraint_bound_unsupported",
             absl::StrCat(p, " (", c.metric(),
                          "): min and max are not supported for a p99; at a stage with no "
                          "control left only the fleet guard judges, and it has no per-host p99 "
                          "bound. Use max_ratio (canary against control)"));
    }
    if (!(c.max_ratio() >= 0)) {
      report(p + ".max_ratio", "constraint_max_ratio_negative",
             absl::StrCat(p, ".max_ratio ", c.max_ratio(), " must be 0 (judge default) or more"));
    }
  }
}

void CheckBound(const std::string& p, const char* which, int64_t value, const KnobSpec& spec,
                const PolicyContext& context, const Report& report) {
  if (value < spec.min || value > spec.max) {
    report(absl::StrCat(p, ".", which), "bounds_outside_range",
           absl::StrCat(p, " (", spec.name, ").", which, " ", value,
                        " is outside the parameter's hard range ", Range(spec)));
  }
  if (spec.is_rate() && context.min_link_speed_mbps.has_value() && value >= 0 &&
      static_cast<uint64_t>(value) > *context.min_link_speed_mbps) {
    report(absl::StrCat(p, ".", which), "rate_above_link_speed",
           absl::StrCat(p, " (", spec.name, ").", which, " ", value,
                        " Mbps is above the slowest selected link (", *context.min_link_speed_mbps,
                        " Mbps)"));
  }
}

void CheckKnobs(const v1::Policy& policy, const PolicyContext& context,
                const std::function<std::pair<int, int>(const std::string&)>& find,
                const Report& report) {
  if (policy.knobs_size() == 0) {
    report("knobs", "no_knobs", "the policy declares no knobs; it has nothing to tune");
  }
  std::map<std::string, int> first_index;
  for (int i = 0; i < policy.knobs_size(); ++i) {
    const v1::Knob& k = policy.knobs(i);
    const std::string p = absl::StrCat("knobs[", i, "]");
    const std::optional<KnobSpec> spec = FindKnobSpec(k.parameter());
    if (k.parameter().empty()) {
      report(p + ".parameter", "unknown_knob", absl::StrCat(p, " names no parameter"));
    } else if (!spec.has_value()) {
      report(p + ".parameter", "unknown_knob",
             absl::StrCat(p, ".parameter \"", k.parameter(),
                          "\" is not a tunable parameter (DCQCN names as in cc_params, "
                          "pfc.delay, pfc.prevention_timeout_ms, rp_enable_mask, np_enable_mask; "
                          "switch knobs ecn.<profile>.<colour>_min_threshold / _max_threshold / "
                          "_drop_probability, pfc.<port>.pfc_enable)"));
    } else if (auto [it, inserted] = first_index.emplace(k.parameter(), i); !inserted) {
      const auto [line, column] = find(absl::StrCat("knobs[", it->second, "]"));
      report(p + ".parameter", "duplicate_knob",
             absl::StrCat(p, ".parameter \"", k.parameter(), "\" is already a knob (knobs[",
                          it->second, "] at line ", line, ":", column, ")"));
    }
    if (spec.has_value()) {
      CheckBound(p, "min", k.min(), *spec, context, report);
      CheckBound(p, "max", k.max(), *spec, context, report);
    }
    const std::string what = absl::StrCat(p, " (", k.parameter(), ")");
    if (k.min() > k.max()) {
      report(p + ".min", "knob_min_gt_max",
             absl::StrCat(what, ": min ", k.min(), " is above max ", k.max()));
    }
    if (k.step() <= 0) {
      report(p + ".step", "step_not_positive",
             absl::StrCat(what, ".step ", k.step(), " must be 1 or more"));
    } else if (!k.log_scale() && k.max() > k.min() &&
               static_cast<uint64_t>(k.step()) >
                   static_cast<uint64_t>(k.max()) - static_cast<uint64_t>(k.min())) {
      report(p + ".step", "step_exceeds_range",
             absl::StrCat(what, ".step ", k.step(), " is larger than the range max - min = ",
                          static_cast<uint64_t>(k.max()) - static_cast<uint64_t>(k.min())));
    }
    if (k.max_step() < 0) {
      report(p + ".max_step", "max_step_negative",
             absl::StrCat(what, ".max_step ", k.max_step(), " must be 0 (unbounded) or more"));
    } else if (k.max_step() > 0 && k.step() > 0 && k.max_step() < k.step()) {
      report(p + ".max_step", "max_step_below_step",
             absl::StrCat(what, ".max_step ", k.max_step(), " is below step ", k.step(),
                          ": no change could be proposed"));
    }
    if (k.has_start() && k.min() <= k.max() && (k.start() < k.min() || k.start() > k.max())) {
      report(p + ".start", "start_outside_bounds",
             absl::StrCat(what, ".start ", k.start(), " is outside the knob's bounds [", k.min(),
                          ", ", k.max(), "]"));
    }
    if (k.log_scale() && k.min() <= 0) {
      report(p + ".min", "log_scale_min_not_positive",
             absl::StrCat(what, " is log_scale, so min must be 1 or more (is ", k.min(), ")"));
    }
  }
}

// Switch knobs: a policy with switch knobs only needs a role=switch selector;
// a policy with host knobs (alone, or with switch knobs: joint tuning, where
// the selector picks the hosts and their racks' switches join) must not have
// one; ECN thresholds stay within the smallest
// selected switch buffer; per profile and colour, Kmin stays below Kmax for
// every value pair the bounds allow.
void CheckSwitchKnobs(const v1::Policy& policy, const PolicyContext& context,
                      const Report& report) {
  int first_switch = -1, first_host = -1;
  // (profile, colour) -> index of its min / max threshold knob.
  std::map<std::pair<std::string, std::string>, std::pair<int, int>> pairs;
  for (int i = 0; i < policy.knobs_size(); ++i) {
    const v1::Knob& k = policy.knobs(i);
    const std::optional<KnobSpec> spec = FindKnobSpec(k.parameter());
    if (!spec.has_value()) continue;
    if (!spec->is_switch) {
      if (first_host < 0) first_host = i;
      continue;
    }
    if (first_switch < 0) first_switch = i;
    const std::string p = absl::StrCat("knobs[", i, "]");
    if (spec->is_threshold() && context.min_switch_buffer_bytes.has_value() &&
        k.max() > *context.min_switch_buffer_bytes) {
      report(p + ".max", "switch_threshold_above_buffer",
             absl::StrCat(p, " (", k.parameter(), ").max ", k.max(),
                          " bytes is above the smallest selected switch buffer (",
                          *context.min_switch_buffer_bytes, " bytes)"));
    }
    absl::StatusOr<SwitchKnob> knob = ParseSwitchKnob(k.parameter());
    if (!knob.ok() || !spec->is_threshold()) continue;
    const std::string colour = knob->field.substr(0, knob->field.find('_'));
    auto [it, inserted] = pairs.emplace(std::make_pair(knob->object, colour), std::pair(-1, -1));
    (absl::EndsWith(knob->field, "_min_threshold") ? it->second.first : it->second.second) = i;
  }
  for (const auto& [key, idx] : pairs) {
    const auto [min_i, max_i] = idx;
    if (min_i < 0 || max_i < 0) continue;
    const v1::Knob& kmin = policy.knobs(min_i);
    const v1::Knob& kmax = policy.knobs(max_i);
    if (kmin.max() >= kmax.min()) {
      report(absl::StrCat("knobs[", min_i, "].max"), "ecn_kmin_not_below_kmax",
             absl::StrCat("knobs[", min_i, "] (", kmin.parameter(), ").max ", kmin.max(),
                          " is not below knobs[", max_i, "] (", kmax.parameter(), ").min ",
                          kmax.min(), ": Kmin must stay below Kmax for every value pair"));
    }
  }
  auto role = policy.selector().match_labels().find("role");
  const bool switch_selector =
      role != policy.selector().match_labels().end() && role->second == "switch";
  if (first_switch >= 0 && first_host < 0 && !switch_selector) {
    report(absl::StrCat("knobs[", first_switch, "].parameter"),
           "switch_knobs_without_switch_selector",
           absl::StrCat("knobs[", first_switch, "] (", policy.knobs(first_switch).parameter(),
                        ") is a switch knob, so selector.match_labels must have role: switch"));
  } else if (first_host >= 0 && switch_selector) {
    report(absl::StrCat("knobs[", first_host, "].parameter"), "host_knobs_with_switch_selector",
           absl::StrCat("knobs[", first_host, "] (", policy.knobs(first_host).parameter(),
                        ") is a host knob but the selector picks switches (role: switch)"));
  }
}

void CheckTuner(const v1::Policy& policy, const Report& report) {
  const v1::Tuner& t = policy.tuner();
  if (t.kind() == v1::Tuner::KIND_UNSPECIFIED) {
    report("tuner.kind", "tuner_kind_unspecified",
           "tuner.kind is not set (COORDINATE_DESCENT or FIXED)");
  } else if (!v1::Tuner::Kind_IsValid(t.kind())) {
    report("tuner.kind", "tuner_kind_unknown",
           absl::StrCat("tuner.kind ", t.kind(), " is not a known tuner"));
  }
  if (t.trial_budget() > kMaxTrialBudget) {
    report("tuner.trial_budget", "trial_budget_too_large",
           absl::StrCat("tuner.trial_budget ", t.trial_budget(), " is above ", kMaxTrialBudget));
  }
  if (!(t.min_improvement() >= 0 && t.min_improvement() < 1)) {
    report(
        "tuner.min_improvement", "min_improvement_out_of_range",
        absl::StrCat("tuner.min_improvement ", t.min_improvement(),
                     " must be in [0, 1) (0 = unset: each trial's own noise band, at least 0.02)"));
  }
  if (t.kind() == v1::Tuner::FIXED && t.fixed().empty()) {
    report("tuner.kind", "fixed_empty", "tuner.kind is FIXED but tuner.fixed names no values");
  }
  if (t.min_window_samples() != 0) {
    report("tuner.min_window_samples", "min_window_samples_unused",
           "tuner.min_window_samples is not read by the tuner or the judge; the probe RTTs a "
           "host needs in a trial's baseline and bake are guard.min_samples");
  }
  // Sorted, so errors come out in a stable order.
  const std::map<std::string, int64_t> fixed(t.fixed().begin(), t.fixed().end());
  for (const auto& [name, value] : fixed) {
    const std::string p = absl::StrCat("tuner.fixed[", name, "]");
    const v1::Knob* knob = nullptr;
    for (const v1::Knob& k : policy.knobs()) {
      if (k.parameter() == name) {
        knob = &k;
        break;
      }
    }
    if (knob == nullptr) {
      report(p, "fixed_unknown_knob",
             absl::StrCat("tuner.fixed names \"", name, "\", which is not a knob of this policy"));
    } else if (value < knob->min() || value > knob->max()) {
      report(p + ".value", "fixed_outside_bounds",
             absl::StrCat("tuner.fixed[", name, "] = ", value, " is outside the knob's bounds [",
                          knob->min(), ", ", knob->max(), "]"));
    }
  }
}

void CheckRollout(const v1::Policy& policy, const Report& report) {
  const v1::RolloutPlan& r = policy.rollout();
  const bool canary_ok = r.canary_fraction() > 0 && r.canary_fraction() < 1;
  if (!canary_ok) {
    report("rollout.canary_fraction", "canary_fraction_out_of_range",
           absl::StrCat("rollout.canary_fraction ", r.canary_fraction(),
                        " must be above 0 and below 1"));
  }
  if (r.bake_seconds() == 0) {
    report("rollout.bake_seconds", "bake_seconds_zero",
           "rollout.bake_seconds is 0; each step needs a judged bake time");
  }
  // Each stage must exceed the highest valid share before it: the canary's,
  // then the stages'. An out-of-range stage is reported once and not compared.
  double floor = canary_ok ? r.canary_fraction() : 0;
  std::string floor_name = "rollout.canary_fraction";
  for (int i = 0; i < r.stages_size(); ++i) {
    const double v = r.stages(i);
    const std::string p = absl::StrCat("rollout.stages[", i, "]");
    if (!(v > 0 && v <= 1)) {
      report(p, "stage_out_of_range", absl::StrCat(p, " = ", v, " must be in (0, 1]"));
    } else if (!(v > floor)) {
      report(p, "stages_not_increasing",
             absl::StrCat(p, " = ", v, " is not above ", floor_name, " (", floor, ")"));
    } else {
      floor = v;
      floor_name = p;
    }
  }
  if (r.stages().empty() || r.stages(r.stages_size() - 1) != 1.0) {
    report("rollout.stages", "stages_not_ending_at_one",
           r.stages().empty()
               ? std::string("rollout.stages is empty; it must end at 1.0 (the whole selection)")
               : absl::StrCat("rollout.stages ends at ", r.stages(r.stages_size() - 1),
                              "; it must end at 1.0 (the whole selection)"));
  }
}

void CheckGuard(const v1::Policy& policy, const Report& report) {
  const v1::Guard& g = policy.guard();
  if (!(g.max_p99_regression() >= 0 && g.max_p99_regression() < 1)) {
    report("guard.max_p99_regression", "guard_regression_out_of_range",
           absl::StrCat("guard.max_p99_regression ", g.max_p99_regression(), " must be in [0, 1)"));
  }
  if (g.confidence() != 0 && !(g.confidence() > 0.5 && g.confidence() < 1)) {
    report("guard.confidence", "guard_confidence_out_of_range",
           absl::StrCat("guard.confidence ", g.confidence(),
                        " must be above 0.5 and below 1 (0 = default 0.995)"));
  }
  if (!(g.max_pfc_pause_ratio() >= 0 && g.max_pfc_pause_ratio() <= 1)) {
    report(
        "guard.max_pfc_pause_ratio", "guard_pause_ratio_out_of_range",
        absl::StrCat("guard.max_pfc_pause_ratio ", g.max_pfc_pause_ratio(), " must be in [0, 1]"));
  }
  if (!(g.max_retransmits_per_second() >= 0)) {
    report("guard.max_retransmits_per_second", "guard_value_negative",
           absl::StrCat("guard.max_retransmits_per_second ", g.max_retransmits_per_second(),
                        " must be 0 or more"));
  }
  if (!(g.pass_max_ucb_regression() >= 0)) {
    report("guard.pass_max_ucb_regression", "guard_value_negative",
           absl::StrCat("guard.pass_max_ucb_regression ", g.pass_max_ucb_regression(),
                        " must be 0 or more"));
  }
  if (g.local_guard_rounds() > 60) {
    report("guard.local_guard_rounds", "guard_rounds_out_of_range",
           absl::StrCat("guard.local_guard_rounds ", g.local_guard_rounds(),
                        " must be at most 60 (0 = each agent's --guard_rounds)"));
  }
  const uint32_t lease = g.provisional_lease_seconds();
  if (lease != 0 && (lease < kMinProvisionalLeaseSeconds || lease > kMaxProvisionalLeaseSeconds)) {
    report("guard.provisional_lease_seconds", "guard_lease_out_of_range",
           absl::StrCat("guard.provisional_lease_seconds ", lease, " must be ",
                        kMinProvisionalLeaseSeconds, " to ", kMaxProvisionalLeaseSeconds,
                        " (0 = ", kDefaultProvisionalLeaseSeconds,
                        "): shorter, a controller restart would roll changes back"));
  }
}

void CheckApproval(const v1::Policy& policy, const Report& report) {
  if (policy.approval().approvers() > kMaxApprovers) {
    report("approval.approvers", "approvers_too_many",
           absl::StrCat("approval.approvers ", policy.approval().approvers(), " is above ",
                        kMaxApprovers));
  }
}

}  // namespace

// The probe classes the controller's probe plan gives its peers: "intra_" or
// "inter_" and the plan's locality label (--probe_locality_label, default
// "tor"; ProbePlannerOptions::locality_label). An objective on any other class
// would read no probes at all. `label` unset (offline): any label name.
bool KnownProbePeerClass(const std::string& peer_class, const std::optional<std::string>& label) {
  for (absl::string_view prefix : {"intra_", "inter_"}) {
    if (!absl::StartsWith(peer_class, prefix)) continue;
    const absl::string_view rest = absl::string_view(peer_class).substr(prefix.size());
    if (label.has_value()) return rest == *label;
    return !rest.empty() && std::all_of(rest.begin(), rest.end(), [](char c) {
      return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' ||
             c == '.' || c == '/';
    });
  }
  return false;
}

std::vector<PolicyError> PolicyFile::Validate(const PolicyContext& context) const {
  std::vector<PolicyError> errors;
  auto find = [this](const std::string& path) { return Find(path); };
  Report report = [&](const std::string& path, const char* rule, std::string message) {
    const auto [line, column] = Find(path);
    errors.push_back({file_, line, column, rule, std::move(message)});
  };
  CheckName(policy_, report);
  CheckObjective(policy_, context, report);
  CheckConstraints(policy_, report);
  CheckKnobs(policy_, context, find, report);
  CheckSwitchKnobs(policy_, context, report);
  CheckTuner(policy_, report);
  CheckRollout(policy_, report);
  CheckGuard(policy_, report);
  CheckApproval(policy_, report);
  for (const Location& dup : duplicate_keys_) {
    errors.push_back({file_, dup.line, dup.column, "duplicate_key",
                      absl::StrCat(dup.path, " is given more than once")});
  }
  std::stable_sort(errors.begin(), errors.end(), [](const PolicyError& a, const PolicyError& b) {
    return std::pair(a.line, a.column) < std::pair(b.line, b.column);
  });
  return errors;
}

}  // namespace rocetune::controller
