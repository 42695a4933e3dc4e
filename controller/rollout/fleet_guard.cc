#include "controller/rollout/fleet_guard.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <iterator>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"

namespace rocetune::controller {
namespace {

enum class Kind { kThroughput, kPauseRatio, kCnp, kRetransmits, kUnknown };

Kind KindOf(const std::string& metric) {
  if (metric == "throughput_gbps") return Kind::kThroughput;
  if (metric == "pfc_pause_ratio") return Kind::kPauseRatio;
  if (metric == "cnp_per_second") return Kind::kCnp;
  if (metric == "retransmits_per_second") return Kind::kRetransmits;
  return Kind::kUnknown;
}

bool HasExposure(const HostPeriod& p) {
  return p.covered_seconds > 0 && std::isfinite(p.covered_seconds);
}

double WorstPause(const HostPeriod& p) {
  const uint64_t worst = *std::max_element(std::begin(p.pause_us), std::end(p.pause_us));
  return static_cast<double>(worst) / (p.covered_seconds * 1e6);
}

// The judge's natural value of a metric over a period (REQUIRES: exposure).
double Value(Kind kind, const HostPeriod& p) {
  switch (kind) {
    case Kind::kThroughput:
      return static_cast<double>(p.tx_bytes) * 8 / 1e9 / p.covered_seconds;
    case Kind::kPauseRatio:
      return WorstPause(p);
    case Kind::kCnp:
      return static_cast<double>(p.cnp) / p.covered_seconds;
    case Kind::kRetransmits:
      return static_cast<double>(p.retransmits) / p.covered_seconds;
    case Kind::kUnknown:
      break;
  }
  return 0;
}

// The value the ratio is taken on: counts get +0.5 (a zero count has a finite
// ratio), the pause ratio a floor (as the judge's log values).
double RatioValue(Kind kind, const HostPeriod& p) {
  switch (kind) {
    case Kind::kPauseRatio:
      return std::max(WorstPause(p), kFleetGuardPauseRatioFloor);
    case Kind::kCnp:
      return (static_cast<double>(p.cnp) + 0.5) / p.covered_seconds;
    case Kind::kRetransmits:
      return (static_cast<double>(p.retransmits) + 0.5) / p.covered_seconds;
    default:
      return Value(kind, p);
  }
}

double Events(Kind kind, const HostPeriod& p) {
  if (kind == Kind::kCnp) return static_cast<double>(p.cnp);
  if (kind == Kind::kRetransmits) return static_cast<double>(p.retransmits);
  return 0;
}

struct Guarded {
  std::string metric;
  Kind kind;
  ConstraintTolerance tolerance;
};

// The metrics guarded: the constraints the judge knows (first per metric),
// plus throughput at the judge's default tolerance when none names it.
std::vector<Guarded> GuardedMetrics(const std::vector<v1::Constraint>& constraints) {
  std::vector<Guarded> out;
  auto add = [&](const v1::Constraint& c) {
    const Kind kind = KindOf(c.metric());
    if (kind == Kind::kUnknown) return;
    for (const Guarded& g : out) {
      if (g.metric == c.metric()) return;
    }
    out.push_back(Guarded{c.metric(), kind, ToleranceOf(c)});
  };
  for (const v1::Constraint& c : constraints) add(c);
  v1::Constraint throughput;
  throughput.set_metric("throughput_gbps");
  add(throughput);
  return out;
}

v1::GroupEvidence Group(const std::string& name, const std::vector<const HostPeriod*>& periods) {
  v1::GroupEvidence g;
  g.set_group(name);
  g.set_hosts(static_cast<uint32_t>(periods.size()));
  if (periods.empty()) return g;
  double gbps = 0, cnp = 0, pause = 0, retx = 0;
  for (const HostPeriod* p : periods) {
    gbps += Value(Kind::kThroughput, *p);
    cnp += Value(Kind::kCnp, *p);
    pause += Value(Kind::kPauseRatio, *p);
    retx += Value(Kind::kRetransmits, *p);
  }
  const double n = static_cast<double>(periods.size());
  g.set_throughput_gbps(gbps / n);
  g.set_cnp_per_second(cnp / n);
  g.set_pfc_pause_ratio(pause / n);
  g.set_retransmits_per_second(retx / n);
  return g;
}

// The hosts with data in both periods, in the same order.
void Matched(const std::map<std::string, HostPeriod>& first,
             const std::map<std::string, HostPeriod>& second, std::vector<const HostPeriod*>* a,
             std::vector<const HostPeriod*>* b) {
  a->clear();
  b->clear();
  for (const auto& [id, p] : first) {
    auto q = second.find(id);
    if (q == second.end() || !HasExposure(p) || !HasExposure(q->second)) continue;
    a->push_back(&p);
    b->push_back(&q->second);
  }
}

size_t Needed(size_t hosts) {
  return static_cast<size_t>(std::ceil(kFleetGuardMinCoverage * static_cast<double>(hosts)));
}

double MeanRatioValue(Kind kind, const std::vector<const HostPeriod*>& periods) {
  double sum = 0;
  for (const HostPeriod* p : periods) sum += RatioValue(kind, *p);
  return periods.empty() ? 0 : sum / static_cast<double>(periods.size());
}

double MeanEvents(Kind kind, const std::vector<const HostPeriod*>& periods) {
  double sum = 0;
  for (const HostPeriod* p : periods) sum += Events(kind, *p);
  return periods.empty() ? 0 : sum / static_cast<double>(periods.size());
}

constexpr uint32_t kFleetSpreadMinPairs = kFleetSpreadMinPeriods * (kFleetSpreadMinPeriods - 1) / 2;

// The spread measured for `metric`, or null when it rests on too few periods.
const v1::FleetSpread::Metric* Measured(const v1::FleetSpread& spread, const std::string& metric) {
  if (spread.periods() < static_cast<uint32_t>(kFleetSpreadMinPeriods)) return nullptr;
  for (const v1::FleetSpread::Metric& m : spread.metrics()) {
    if (m.metric() == metric && m.pairs() >= kFleetSpreadMinPairs) return &m;
  }
  return nullptr;
}

// A threshold and where it came from, for the evidence's note.
struct Threshold {
  double value = 0;
  std::string how;
};

std::string NotMeasured(const v1::FleetSpread& spread) {
  return absl::StrFormat(
      "default: the fleet's A/A spread not measured (%d pre-change periods of %.0f s with data, "
      "%d needed)",
      spread.periods(), spread.period_seconds(), kFleetSpreadMinPeriods);
}

std::string MeasuredFrom(const v1::FleetSpread& spread, const v1::FleetSpread::Metric& m) {
  return absl::StrFormat(
      "from the fleet's A/A spread: rms ln ratio %.4f over %d pairs of %d pre-change periods of "
      "%.0f s",
      m.rms_ln_ratio(), m.pairs(), spread.periods(), spread.period_seconds());
}

// The measured spread scaled to a `since` period shorter than its periods.
double ScaledRms(const v1::FleetSpread& spread, const v1::FleetSpread::Metric& m,
                 double since_seconds) {
  const double period = spread.period_seconds();
  if (!(since_seconds > 0) || !(period > since_seconds)) return m.rms_ln_ratio();
  return m.rms_ln_ratio() * std::sqrt((1 + period / since_seconds) / 2);
}

// A threshold from the measured spread, within [floor, fallback].
Threshold FromSpread(const v1::FleetSpread& spread, const std::string& metric, double fallback,
                     double floor, double since_seconds, bool margin) {
  const v1::FleetSpread::Metric* m = Measured(spread, metric);
  if (m == nullptr) return {fallback, NotMeasured(spread)};
  const double rms = ScaledRms(spread, *m, since_seconds);
  const double wanted = std::exp(kFleetSpreadZ * rms) - (margin ? 1 : 0);
  std::string how = MeasuredFrom(spread, *m);
  if (rms != m->rms_ln_ratio()) absl::StrAppendFormat(&how, ", %.4f for a shorter period", rms);
  if (wanted > fallback) {
    absl::StrAppendFormat(&how, "; it asks for %.3g, more than the default %.3g, which is kept",
                          wanted, fallback);
    return {fallback, how};
  }
  return {std::max(wanted, std::min(floor, fallback)), how};
}

Threshold MarginOf(const v1::FleetSpread& spread, const std::string& metric, double fallback,
                   double since_seconds) {
  return FromSpread(spread, metric, std::max(0.0, fallback), kFleetMarginFloor, since_seconds,
                    /*margin=*/true);
}

Threshold P99RatioOf(const v1::FleetSpread& spread, double since_seconds) {
  return FromSpread(spread, "p99", kFleetP99RegressionRatio, kFleetP99RatioFloor, since_seconds,
                    /*margin=*/false);
}

// The fleet's p99 before and since the change (see kFleetP99RegressionRatio).
enum class P99Check { kPass, kFail, kIncident };

// Sets `figures` to the FAIL or HOLD summary; kPass also when the p99 cannot
// be judged.
P99Check CheckP99(const QuantileSketch& before, const FleetPeriod& now,
                  const FleetGuardConfig& config, const Threshold& fail_at, v1::Verdict* v,
                  std::string* figures) {
  const QuantileSketch& after = now.rtt;
  const bool job = config.objective == v1::Objective::STEP_TIME_P99;
  const char* samples = job ? "job step times" : "probes";
  v1::MetricEvidence* m = v->add_metrics();
  m->set_metric("fleet_p99");
  const uint64_t need = std::max<uint64_t>(config.min_rtt_samples, 1);
  if (before.count() < need || after.count() < need) {
    m->set_outcome("not_evaluated");
    m->set_note(absl::StrFormat("%s before %d, since %d: the fleet p99 needs %d in each", samples,
                                before.count(), after.count(), need));
    return P99Check::kPass;
  }
  const double p_before = before.Quantile(0.99);
  const double p_after = after.Quantile(0.99);
  const double ratio = p_before > 0 ? p_after / p_before : 1.0;
  bool fail = ratio >= fail_at.value;
  m->set_mean(std::log(ratio));
  m->set_ratio(ratio);
  m->set_ratio_upper(fail_at.value);
  *figures = absl::StrFormat(
      "fleet %s p99: baseline %.1f us (%d %s), now %.1f us (%d %s), ratio %.3f; FAIL at %.2f "
      "(%s)",
      job ? "job step time" : "probe", p_before * 1e6, before.count(), samples, p_after * 1e6,
      after.count(), samples, ratio, fail_at.value, fail_at.how);
  // A rise that was not there in the step's first part (less than the FAIL
  // ratio and less than kOnsetShareOfRise of the whole rise, in ln terms)
  // began after the change took effect, as a fleet incident's does (a change
  // acts once applied): HOLD, not FAIL. Unmeasured onset: FAIL, safety first.
  bool incident = false;
  if (fail && now.onset != nullptr && now.onset->rtt.count() >= need && p_before > 0) {
    const QuantileSketch& first = now.onset->rtt;
    const double onset = first.Quantile(0.99) / p_before;
    absl::StrAppendFormat(figures, "; in the step's first part %.1f us (%d %s), ratio %.3f",
                          first.Quantile(0.99) * 1e6, first.count(), samples, onset);
    incident = RiseBeganAfterOnset(std::log(onset), std::log(ratio), fail_at.value);
    fail = !incident;
  }
  m->set_outcome(fail ? "fail" : incident ? "hold" : "pass");
  m->set_note(*figures);
  return fail ? P99Check::kFail : incident ? P99Check::kIncident : P99Check::kPass;
}

// ln(p99 of y / p99 of x), or nullopt when either holds fewer than `need`
// samples or a p99 is not positive.
std::optional<double> LnP99Ratio(const QuantileSketch& x, const QuantileSketch& y, uint64_t need) {
  if (x.count() < need || y.count() < need) return std::nullopt;
  const double u = x.Quantile(0.99), w = y.Quantile(0.99);
  if (!(u > 0) || !(w > 0)) return std::nullopt;
  return std::log(w / u);
}

void SetP99(const QuantileSketch& rtt, v1::GroupEvidence* g) {
  g->set_samples(rtt.count());
  if (rtt.count() > 0) {
    g->set_p99_seconds(rtt.Quantile(0.99));
    g->set_p999_seconds(rtt.Quantile(0.999));
  }
}

}  // namespace

v1::FleetSpread MeasureFleetSpread(const std::vector<FleetPeriod>& periods, double period_seconds,
                                   const std::vector<v1::Constraint>& constraints,
                                   uint64_t min_rtt_samples) {
  v1::FleetSpread out;
  out.set_period_seconds(period_seconds);
  std::vector<const FleetPeriod*> kept;
  for (const FleetPeriod& p : periods) {
    const size_t with = static_cast<size_t>(std::count_if(
        p.hosts.begin(), p.hosts.end(), [](const auto& h) { return HasExposure(h.second); }));
    if (with > 0 && with >= Needed(p.hosts.size())) kept.push_back(&p);
  }
  out.set_periods(static_cast<uint32_t>(kept.size()));
  // ln(ratio) of each pair of kept periods (nullopt: the pair is skipped)
  // into one metric's root mean square.
  auto add = [&](const std::string& metric,
                 const std::function<std::optional<double>(const FleetPeriod&, const FleetPeriod&)>&
                     ln_ratio) {
    double sum = 0;
    uint32_t pairs = 0;
    for (size_t i = 0; i < kept.size(); ++i) {
      for (size_t j = i + 1; j < kept.size(); ++j) {
        if (std::optional<double> d = ln_ratio(*kept[i], *kept[j]); d.has_value()) {
          sum += *d * *d;
          ++pairs;
        }
      }
    }
    v1::FleetSpread::Metric* m = out.add_metrics();
    m->set_metric(metric);
    m->set_pairs(pairs);
    m->set_rms_ln_ratio(pairs > 0 ? std::sqrt(sum / pairs) : 0);
  };
  std::vector<const HostPeriod*> a, b;
  for (const Guarded& g : GuardedMetrics(constraints)) {
    const bool counted = g.kind == Kind::kCnp || g.kind == Kind::kRetransmits;
    add(g.metric, [&](const FleetPeriod& x, const FleetPeriod& y) -> std::optional<double> {
      Matched(x.hosts, y.hosts, &a, &b);
      if (a.empty() || a.size() < Needed(std::max(x.hosts.size(), y.hosts.size()))) {
        return std::nullopt;
      }
      if (counted && (MeanEvents(g.kind, a) < kFleetGuardMinEventsPerHost ||
                      MeanEvents(g.kind, b) < kFleetGuardMinEventsPerHost)) {
        return std::nullopt;
      }
      const double u = MeanRatioValue(g.kind, a), w = MeanRatioValue(g.kind, b);
      if (!(u > 0) || !(w > 0) || !std::isfinite(u) || !std::isfinite(w)) return std::nullopt;
      return std::log(w / u);
    });
  }
  const uint64_t need = std::max<uint64_t>(min_rtt_samples, 1);
  add("p99",
      [&](const FleetPeriod& x, const FleetPeriod& y) { return LnP99Ratio(x.rtt, y.rtt, need); });
  if (!kept.empty()) {
    if (const v1::Constraint* c = OtherP99Constraint(constraints, *kept.front()); c != nullptr) {
      add(c->metric(), [&](const FleetPeriod& x, const FleetPeriod& y) {
        return LnP99Ratio(x.other, y.other, need);
      });
    }
  }
  return out;
}

std::string OtherP99Metric(const v1::Objective& objective) {
  if (objective.metric() == v1::Objective::STEP_TIME_P99) return "probe_rtt_p99";
  return objective.op().empty() ? "" : "step_time_p99";
}

bool HoldsOtherP99(const v1::Policy& policy) {
  const std::string other = OtherP99Metric(policy.objective());
  if (other.empty()) return false;
  for (const v1::Constraint& c : policy.constraints()) {
    if (c.metric() == other) return true;
  }
  return false;
}

const v1::Constraint* OtherP99Constraint(const std::vector<v1::Constraint>& constraints,
                                         const FleetPeriod& period) {
  if (period.other_metric.empty()) return nullptr;
  for (const v1::Constraint& c : constraints) {
    if (c.metric() == period.other_metric) return &c;
  }
  return nullptr;
}

namespace {

// What the constraint checks found: the first FAIL's figures, and the
// metrics that passed with their ratios (for the PASS summary).
struct Tally {
  std::string failed;
  std::string passed;

  void Add(bool fail, const std::string& metric, double ratio, const std::string& figures) {
    if (fail && failed.empty()) failed = figures;
    if (!fail) absl::StrAppend(&passed, passed.empty() ? "" : "; ", metric, " ", ratio);
  }
};

// A ratio judged against its threshold into `m`'s outcome, mean, ratio and
// bound (the lower bound when lower is worse, the upper one otherwise).
void SetRatio(double ratio, double threshold, bool higher_is_worse, bool fail,
              v1::MetricEvidence* m) {
  m->set_outcome(fail ? "fail" : "pass");
  m->set_mean(std::log(ratio));
  m->set_ratio(ratio);
  m->set_ratio_lower(higher_is_worse ? 0 : threshold);
  m->set_ratio_upper(higher_is_worse ? threshold : 0);
}

// The rate constraints (throughput always): each metric's fleet mean per host
// since the change against before it, on the same hosts.
void CheckRates(const std::vector<const HostPeriod*>& before,
                const std::vector<const HostPeriod*>& after, const v1::FleetSpread& spread,
                double since_seconds, const FleetGuardConfig& config, v1::Verdict* v,
                Tally* tally) {
  const double n = static_cast<double>(before.size());
  for (const Guarded& g : GuardedMetrics(config.constraints)) {
    double base = 0, cur = 0, base_shown = 0, cur_shown = 0, events = 0;
    for (size_t i = 0; i < before.size(); ++i) {
      base += RatioValue(g.kind, *before[i]);
      cur += RatioValue(g.kind, *after[i]);
      base_shown += Value(g.kind, *before[i]);
      cur_shown += Value(g.kind, *after[i]);
      events += Events(g.kind, *after[i]);
    }
    base /= n;
    cur /= n;
    base_shown /= n;
    cur_shown /= n;
    events /= n;
    v1::MetricEvidence* m = v->add_metrics();
    m->set_metric(absl::StrCat("fleet_", g.metric));
    if (!(base > 0) || !std::isfinite(base) || !std::isfinite(cur)) {
      m->set_outcome("not_evaluated");
      m->set_note(absl::StrFormat("no fleet baseline (%g)", base_shown));
      continue;
    }
    const double ratio = cur / base;
    const double tol = g.tolerance.ratio;
    const Threshold margin = MarginOf(spread, g.metric, config.margin, since_seconds);
    const bool worse_up = g.tolerance.higher_is_worse;
    const double threshold = worse_up ? tol * (1 + margin.value) : tol / (1 + margin.value);
    const bool beyond = worse_up ? ratio > threshold : ratio < threshold;
    const bool counted = g.kind == Kind::kCnp || g.kind == Kind::kRetransmits;
    const bool fail = beyond && (!counted || events >= kFleetGuardMinEventsPerHost);
    SetRatio(ratio, threshold, worse_up, fail, m);
    m->set_rack_pairs(static_cast<uint32_t>(before.size()));  // hosts compared
    const std::string figures = absl::StrFormat(
        "fleet %s per host: baseline %.4g, now %.4g, ratio %.3f; tolerance %.3f, noise margin "
        "%.1f%% (%s): FAIL %s %.3f (%d hosts)",
        g.metric, base_shown, cur_shown, ratio, tol, 100 * margin.value, margin.how,
        worse_up ? "above" : "below", threshold, static_cast<int>(n));
    m->set_note(figures);
    tally->Add(fail, g.metric, ratio, figures);
  }
}

// A p99 constraint on the series the objective is not, on the merged
// sketches (see OtherP99Constraint); nothing when the policy has none.
void CheckOtherP99(const FleetPeriod& baseline_period, const FleetPeriod& now_period,
                   const FleetGuardConfig& config, v1::Verdict* v, Tally* tally) {
  const v1::Constraint* c = OtherP99Constraint(config.constraints, now_period);
  if (c == nullptr) return;
  const QuantileSketch& x = baseline_period.other;
  const QuantileSketch& y = now_period.other;
  const uint64_t need = std::max<uint64_t>(config.min_rtt_samples, 1);
  const char* samples =
      config.objective == v1::Objective::STEP_TIME_P99 ? "probes" : "job step times";
  v1::MetricEvidence* m = v->add_metrics();
  m->set_metric(absl::StrCat("fleet_", c->metric()));
  const std::optional<double> ln = LnP99Ratio(x, y, need);
  if (!ln.has_value()) {
    m->set_outcome("not_evaluated");
    m->set_note(absl::StrFormat("%s before %d, since %d: the fleet %s needs %d in each", samples,
                                x.count(), y.count(), c->metric(), need));
    return;
  }
  const double ratio = std::exp(*ln);
  const double tol = ToleranceOf(*c).ratio;
  const Threshold margin =
      MarginOf(baseline_period.spread, c->metric(), config.margin, now_period.seconds);
  const double threshold = tol * (1 + margin.value);
  const bool fail = ratio > threshold;
  SetRatio(ratio, threshold, /*higher_is_worse=*/true, fail, m);
  const std::string figures = absl::StrFormat(
      "fleet %s (merged): baseline %.1f us (%d %s), now %.1f us (%d %s), ratio %.3f; "
      "tolerance %.3f, noise margin %.1f%% (%s): FAIL above %.3f",
      c->metric(), x.Quantile(0.99) * 1e6, x.count(), samples, y.Quantile(0.99) * 1e6, y.count(),
      samples, ratio, tol, 100 * margin.value, margin.how, threshold);
  m->set_note(figures);
  tally->Add(fail, c->metric(), ratio, figures);
}

// The constraints' absolute bounds, on the fleet's mean since the change: the
// first bound the fleet met before the change and breaks now, or "". (The
// judge checks them canary against control; at the last stage no control is
// left.)
std::string BrokenBound(const std::vector<v1::Constraint>& constraints,
                        const std::vector<const HostPeriod*>& before,
                        const std::vector<const HostPeriod*>& after) {
  const double n = static_cast<double>(before.size());
  for (const v1::Constraint& c : constraints) {
    const Kind kind = KindOf(c.metric());
    if (kind == Kind::kUnknown || (!c.has_min() && !c.has_max())) continue;
    double base = 0, cur = 0;
    for (size_t i = 0; i < before.size(); ++i) {
      base += Value(kind, *before[i]);
      cur += Value(kind, *after[i]);
    }
    base /= n;
    cur /= n;
    auto violates = [&c](double x) {
      return (c.has_max() && x > c.max()) || (c.has_min() && x < c.min());
    };
    if (violates(cur) && !violates(base)) {
      return absl::StrFormat(
          "fleet %s per host: %.4g since the change, outside the policy's bounds [%s, %s], "
          "%.4g before it (%d hosts)",
          c.metric(), cur, c.has_min() ? absl::StrFormat("%g", c.min()) : "-",
          c.has_max() ? absl::StrFormat("%g", c.max()) : "-", base, static_cast<int>(n));
    }
  }
  return "";
}

// A trial's fleet-wide check: the other p99's constraint only.
v1::Verdict TrialGuard(const FleetPeriod& baseline_period, const FleetPeriod& now_period,
                       const FleetGuardConfig& config, v1::Verdict v) {
  Tally tally;
  CheckOtherP99(baseline_period, now_period, config, &v, &tally);
  v.set_rule("fleet_constraint");
  if (!tally.failed.empty()) {
    v.set_outcome(v1::Verdict::FAIL);
    v.set_summary(absl::StrCat(
        "FAIL: the fleet moved beyond a constraint during the trial (the whole fleet before "
        "and during it: a cost that crosses racks is not seen canary against control): ",
        tally.failed));
    return v;
  }
  v.set_outcome(v1::Verdict::PASS);
  v.set_summary(absl::StrFormat("fleet within its constraints during the trial (%s)",
                                tally.passed.empty() ? "nothing measured" : tally.passed));
  return v;
}

// FleetGuard without its check of a held look's FAIL against the onset.
v1::Verdict GuardOnce(const FleetPeriod& baseline_period, const FleetPeriod& now_period, int hosts,
                      const FleetGuardConfig& config) {
  v1::Verdict v;
  v.set_samples(config.objective == v1::Objective::STEP_TIME_P99 ? "job_step_time" : "probe_rtt");
  v.set_unix_nanos(config.now_unix_nanos);
  v.set_stage(config.stage);
  if (config.trial) return TrialGuard(baseline_period, now_period, config, std::move(v));
  std::vector<const HostPeriod*> before, after;
  Matched(baseline_period.hosts, now_period.hosts, &before, &after);
  SetP99(baseline_period.rtt, &(*v.add_groups() = Group("fleet_baseline", before)));
  SetP99(now_period.rtt, &(*v.add_groups() = Group("fleet", after)));
  const size_t needed = Needed(static_cast<size_t>(std::max(hosts, 1)));
  if (before.size() < needed || before.empty()) {
    v.set_outcome(v1::Verdict::HOLD);
    v.set_rule("fleet_data");
    v.set_summary(absl::StrFormat(
        "HOLD: the fleet guard needs data before and since the change from %d of %d hosts, has "
        "%d",
        needed, hosts, before.size()));
    return v;
  }
  Tally tally;
  CheckRates(before, after, baseline_period.spread, now_period.seconds, config, &v, &tally);
  CheckOtherP99(baseline_period, now_period, config, &v, &tally);
  if (const std::string bound = BrokenBound(config.constraints, before, after);
      tally.failed.empty() && !bound.empty()) {
    v.set_outcome(v1::Verdict::FAIL);
    v.set_rule("fleet_constraint_bound");
    v.set_summary(
        absl::StrCat("FAIL: the fleet left a constraint's bounds since the change started "
                     "(same hosts before and after, no control needed): ",
                     bound));
    return v;
  }
  // A lost constraint is named first; the p99 is checked when none is.
  std::string p99;
  const P99Check p99_check =
      tally.failed.empty()
          ? CheckP99(baseline_period.rtt, now_period, config,
                     P99RatioOf(baseline_period.spread, now_period.seconds), &v, &p99)
          : P99Check::kPass;
  if (p99_check == P99Check::kIncident) {
    v.set_outcome(v1::Verdict::HOLD);
    v.set_rule("fleet_shift");
    v.set_summary(absl::StrCat(
        "HOLD: the fleet's p99 rose since the change started, but not in the step's first "
        "part: the rise began after the change took effect, as a fleet incident does, so the "
        "change is neither failed nor passed: ",
        p99));
    return v;
  }
  if (!tally.failed.empty() || p99_check == P99Check::kFail) {
    const bool constraint = !tally.failed.empty();
    v.set_outcome(v1::Verdict::FAIL);
    v.set_rule(constraint ? "fleet_constraint" : "fleet_p99");
    v.set_summary(absl::StrCat(
        constraint ? "FAIL: the fleet moved beyond a constraint since the change started (same "
                     "hosts before and after, no control needed): "
                   : "FAIL: the fleet's p99 rose since the change started (same fleet "
                     "before and after, no control left to compare with): ",
        constraint ? tally.failed : p99));
    return v;
  }
  v.set_outcome(v1::Verdict::PASS);
  v.set_rule("fleet_constraint");
  v.set_summary(absl::StrFormat("fleet within its constraints since the change started (%s)",
                                tally.passed.empty() ? "nothing measured" : tally.passed));
  return v;
}

// Whether `onset` (the guard over the step's onset) shows the metric of
// `failed` (a metric that failed over the whole step) evaluated and within its
// threshold. A metric the onset could not evaluate (too few samples), or saw
// beyond its threshold yet passed (a counted rate below its event floor), does
// not clear it.
bool OnsetClears(const v1::Verdict& onset, const v1::MetricEvidence& failed) {
  for (const v1::MetricEvidence& m : onset.metrics()) {
    if (m.metric() != failed.metric()) continue;
    if (m.outcome() != "pass" || !(m.ratio() > 0)) return false;
    // SetRatio: a lower threshold when lower is worse, else an upper one.
    return m.ratio_lower() > 0 ? m.ratio() >= m.ratio_lower() : m.ratio() <= m.ratio_upper();
  }
  return false;
}

}  // namespace

v1::Verdict FleetGuard(const FleetPeriod& baseline_period, const FleetPeriod& now_period, int hosts,
                       const FleetGuardConfig& config) {
  v1::Verdict v = GuardOnce(baseline_period, now_period, hosts, config);
  // fleet_p99 has its own onset test (CheckP99).
  if (!config.judge_held || v.outcome() != v1::Verdict::FAIL || v.rule() == "fleet_p99") return v;
  if (now_period.onset == nullptr) {
    absl::StrAppend(v.mutable_summary(),
                    " (the judge held this look; the step has no onset to tell a change's loss "
                    "from an incident's by, so the FAIL stands)");
    return v;
  }
  FleetGuardConfig onset_config = config;
  onset_config.judge_held = false;
  const v1::Verdict onset = GuardOnce(baseline_period, *now_period.onset, hosts, onset_config);
  const std::string first = absl::FormatDuration(absl::Seconds(now_period.onset->seconds));
  std::vector<std::string> unclear;  // failed metrics the onset cannot tell
  if (onset.outcome() == v1::Verdict::PASS) {
    for (const v1::MetricEvidence& m : v.metrics()) {
      if (m.outcome() == "fail" && !OnsetClears(onset, m)) unclear.push_back(m.metric());
    }
  }
  if (!unclear.empty()) {
    absl::StrAppend(v.mutable_summary(), " (the judge held this look; the step's first ", first,
                    " could not tell ", absl::StrJoin(unclear, ", "),
                    " (too few samples or events there), so the FAIL stands)");
    return v;
  }
  if (onset.outcome() != v1::Verdict::PASS) {
    absl::StrAppend(v.mutable_summary(), " (the judge held this look; ",
                    onset.outcome() == v1::Verdict::FAIL
                        ? absl::StrCat("the loss was there in the step's first ", first,
                                       " already, as a change's is)")
                        : absl::StrCat("the step's first ", first,
                                       " could not be judged, so the FAIL stands)"));
    return v;
  }
  // The same figures, held: the loss began after the change took effect.
  v1::Verdict hold = std::move(v);
  hold.set_outcome(v1::Verdict::HOLD);
  hold.set_rule("fleet_shift");
  hold.set_summary(
      absl::StrCat("HOLD: the judge held this look, and the fleet guard would fail it (",
                   hold.summary(), "), but the loss was not there in the step's first ", first,
                   ": it began after the change took effect, as a fleet incident's does"));
  return hold;
}

std::string FleetPointExceeded(const v1::Verdict& v,
                               const std::vector<v1::Constraint>& constraints) {
  for (const v1::Constraint& k : constraints) {
    const ConstraintTolerance tol = ToleranceOf(k);
    if (std::isnan(tol.ratio)) continue;
    const std::string name = absl::StrCat("fleet_", k.metric());
    for (const v1::MetricEvidence& m : v.metrics()) {
      if (m.metric() != name || m.outcome() == "not_evaluated" || !std::isfinite(m.ratio()) ||
          m.ratio() <= 0) {
        continue;
      }
      if (!tol.Within(m.ratio())) {
        return absl::StrFormat(
            "fleet %s %.3f during the trial (the whole fleet before and during it) is beyond the "
            "tolerated %.3f;",
            k.metric(), m.ratio(), tol.ratio);
      }
    }
  }
  return "";
}

void MergeFleetEvidence(const v1::Verdict& fleet, v1::Verdict* into) {
  for (const v1::GroupEvidence& g : fleet.groups()) *into->add_groups() = g;
  for (const v1::MetricEvidence& m : fleet.metrics()) *into->add_metrics() = m;
}

}  // namespace rocetune::controller
