#include "controller/judge/judge.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "controller/judge/judge_defaults.h"
#include "controller/judge/stats.h"

namespace rocetune::controller {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Rack-level design: the fewest racks per group (canary, control) for a test.
constexpr size_t kMinRacksPerGroup = 2;
// Racks up to which the exact sign-flip / permutation check is reported.
constexpr size_t kMaxExactRacks = 16;

// Host admission.
constexpr double kMinWindowShare = 0.8;  // windows present / expected, both periods
constexpr double kMaxProbeLoss = 0.05;   // lost / sent; a host above is dropped
// The canary group losing this much more of its probes than control (absolute
// share, after the change) never PASSes.
constexpr double kMaxExcessCanaryLoss = 0.01;
constexpr uint64_t kP999SampleFactor = 10;

// Alpha budget: shares of 1 - confidence per metric family (Bonferroni). The
// guard share is split evenly over the policy's constraints. Within a metric,
// kInterimShare of its alpha is split evenly over the interim looks and the
// rest is spent at the final look (Haybittle-Peto style).
constexpr double kP99Share = 0.6;
constexpr double kP999Share = 0.1;
constexpr double kLossShare = 0.1;  // the canary's excess probe loss (FAIL "probe_loss")
constexpr double kConstraintShare = 0.2;
constexpr double kInterimShare = 1.0 / 3;
// Looks after the final one (a HOLD at the final look goes on until the HOLD
// limit): they spend kExtensionShare of every metric's alpha and of the PASS
// error, in equal parts over the hold looks the HOLD limit allows
// (JudgeConfig::hold_looks; Bonferroni over a known number of tries). A hold
// look past that number spends nothing and only HOLDs, so no number of hold
// looks spends more than the budget. (An earlier rule halved the share at
// each hold look: by the sixth the PASS bound was one-sided 0.9999, which a
// rack-level design with a handful of racks cannot meet, so a change that
// HOLDs at the final look on width could only ABORT.)
constexpr double kExtensionShare = 1.0 / 6;

// The PASS width rule's error over all looks that may PASS (the final look and
// the hold looks after it): the chance of a PASS while the p99 ratio is
// 1 + pass_max_ucb_regression or worse.
constexpr double kPassAlpha = 0.05;
constexpr double kGroupCiConfidence = 0.95;
// Stability: HOLD (never PASS) when the control group's own mean before/after
// shift of ln p99 exceeds this (a fleet incident; DiD assumes parallel trends).
const double kMaxControlShift = std::log(kControlShiftRatio);

// Guard-metric floors.
constexpr double kMinEventsPerHost = 10;      // counts: canary events per host to FAIL
constexpr double kPauseRatioLogFloor = 1e-6;  // floor before taking ln
constexpr double kMinPauseRatioToFail = 1e-4;
constexpr double kThroughputLogFloorGbps = 1e-3;

// kProbeP99 and kJobP99: a p99 (probe RTT; the policy's job-signal series) as
// a constraint, per host over a period with at least kCanaryOwnShiftMinProbes
// samples.
enum class GuardKind { kThroughput, kPauseRatio, kCnp, kRetransmits, kProbeP99, kJobP99 };

struct GuardSpec {
  const char* name;
  GuardKind kind;
  bool higher_is_worse;
  double default_max_ratio;  // canary may be this much worse than control
};

constexpr GuardSpec kGuardSpecs[] = {
    {"throughput_gbps", GuardKind::kThroughput, false, 1 / 0.9},
    {"pfc_pause_ratio", GuardKind::kPauseRatio, true, 1.5},
    {"cnp_per_second", GuardKind::kCnp, true, 1.5},
    {"retransmits_per_second", GuardKind::kRetransmits, true, 1.5},
    {"probe_rtt_p99", GuardKind::kProbeP99, true, 1.1},
    {"step_time_p99", GuardKind::kJobP99, true, 1.1},
};

const GuardSpec* FindGuardSpec(const std::string& metric) {
  for (const GuardSpec& s : kGuardSpecs) {
    if (metric == s.name) return &s;
  }
  return nullptr;
}

struct Settings {
  double tolerance = 0;
  double alpha_total = 0;
  uint64_t min_samples = 0;
  uint32_t min_rack_pairs = 0;
  double pass_max_ucb_regression = 0;
  uint32_t look = 0;
  uint32_t looks = 0;
  bool planned = false;     // 1 <= look <= looks
  bool extended = false;    // look > looks: a HOLD at the final look goes on
  uint32_t hold_looks = 0;  // hold looks that may spend (JudgeConfig::hold_looks)
  bool spent = false;       // extended past hold_looks: no test may decide
  bool final_look = false;  // look >= looks: PASS may be decided
  // The one-sided error of the PASS width bound at this look (kPassAlpha
  // spent over the final look and the hold looks after it; 0 before).
  double pass_alpha = 0;
};

}  // namespace

uint32_t MinRackPairs(const v1::Guard& g) {
  return std::max<uint32_t>(2, g.min_rack_pairs() > 0 ? g.min_rack_pairs() : kDefaultMinRackPairs);
}

double FalseFailBudget(const v1::Guard& g) {
  return 1 - (g.confidence() > 0 && g.confidence() < 1 ? g.confidence() : kDefaultConfidence);
}

JudgeConfig HalfFailBudget(JudgeConfig config) {
  config.guard.set_confidence(1 - FalseFailBudget(config.guard) / 2);
  return config;
}

void MergeCumulative(const v1::Verdict& cumulative, v1::Verdict* v) {
  for (const v1::MetricEvidence& m : cumulative.metrics()) {
    v1::MetricEvidence* e = v->add_metrics();
    *e = m;
    e->set_metric(absl::StrCat(kCumulativePrefix, m.metric()));
    e->set_note(absl::StrCat("against the pre-change baseline: ", m.note()));
  }
  for (const std::string& d : cumulative.dropped_hosts()) {
    v->add_dropped_hosts(absl::StrCat(kCumulativePrefix, d));
  }
  // Only the tests against the baseline say something about it; the rest
  // (hard guards, absolute bounds) read the same bake as the step's own test.
  const std::string& rule = cumulative.rule();
  const bool against_baseline = rule == "p99_did_t_test" || rule == "p999_did_t_test" ||
                                rule == "probe_loss" || absl::StartsWith(rule, "constraint:");
  if (cumulative.outcome() != v1::Verdict::FAIL || !against_baseline ||
      v->outcome() == v1::Verdict::FAIL) {
    return;
  }
  const std::string step_summary = v->summary();
  v->set_outcome(v1::Verdict::FAIL);
  v->set_rule(absl::StrCat(kCumulativePrefix, cumulative.rule()));
  v->set_summary(absl::StrCat(
      "FAIL against the pre-change baseline (every host changed so far against the hosts not "
      "yet changed, each over the period before the change's first step): ",
      cumulative.summary(), "; this step against its own baseline: ", step_summary));
}

namespace {

// The share of a budget hold look `look - looks` spends: kExtensionShare /
// hold_looks for the first hold_looks of them, nothing after.
double HoldLookShare(const Settings& s) {
  return s.spent ? 0 : kExtensionShare / s.hold_looks;  // spent whenever hold_looks is 0
}

Settings Resolve(const JudgeConfig& config) {
  const v1::Guard& g = config.guard;
  Settings s;
  s.tolerance = g.max_p99_regression() > 0 ? g.max_p99_regression() : 0;
  s.alpha_total = FalseFailBudget(g);
  s.min_samples = g.min_samples() > 0 ? g.min_samples() : kDefaultMinSamples;
  s.min_rack_pairs = MinRackPairs(g);
  s.pass_max_ucb_regression =
      g.pass_max_ucb_regression() > 0 ? g.pass_max_ucb_regression() : kDefaultPassMaxUcbRegression;
  s.look = config.look;
  s.looks = std::max<uint32_t>(1, config.looks);
  s.planned = s.look >= 1 && s.look <= s.looks;
  s.extended = s.look > s.looks;
  s.final_look = s.look >= s.looks;
  s.hold_looks = config.hold_looks;
  s.spent = s.extended && s.look - s.looks > s.hold_looks;
  s.pass_alpha = !s.final_look ? 0
                 : s.extended  ? kPassAlpha * HoldLookShare(s)
                               : kPassAlpha * (1 - kExtensionShare);
  return s;
}

// The alpha a metric with total alpha `metric_alpha` spends at this look:
// kInterimShare over the interim looks (evenly), kExtensionShare over the hold
// looks after the final one (evenly, over hold_looks of them), the rest at the
// final look. Look 0 spends nothing. Summed over any number of looks: at most
// metric_alpha.
double AlphaAtLook(double metric_alpha, const Settings& s) {
  if (s.look < 1) return 0;
  if (s.extended) return metric_alpha * HoldLookShare(s);
  const double interim = s.looks > 1 ? kInterimShare : 0;
  if (s.final_look) return metric_alpha * (1 - interim - kExtensionShare);
  return metric_alpha * kInterimShare / (s.looks - 1);
}

double LossRate(const HostPeriod& p) {
  return p.probes_sent == 0
             ? 0
             : static_cast<double>(p.probes_lost) / static_cast<double>(p.probes_sent);
}

// Whether a period has a usable exposure for rates.
bool HasExposure(const HostPeriod& p) {
  return p.covered_seconds > 0 && std::isfinite(p.covered_seconds);
}

double WorstPauseRatio(const HostPeriod& p) {
  if (!HasExposure(p)) return kNaN;
  uint64_t worst = *std::max_element(std::begin(p.pause_us), std::end(p.pause_us));
  return static_cast<double>(worst) / (p.covered_seconds * 1e6);
}

// The natural value of a guard metric over a period (NaN without exposure).
double GuardValue(GuardKind kind, const HostPeriod& p) {
  if (!HasExposure(p)) return kNaN;
  switch (kind) {
    case GuardKind::kThroughput:
      return static_cast<double>(p.tx_bytes) * 8 / 1e9 / p.covered_seconds;
    case GuardKind::kPauseRatio:
      return WorstPauseRatio(p);
    case GuardKind::kCnp:
      return static_cast<double>(p.cnp) / p.covered_seconds;
    case GuardKind::kRetransmits:
      return static_cast<double>(p.retransmits) / p.covered_seconds;
    case GuardKind::kProbeP99:
    case GuardKind::kJobP99: {
      const QuantileSketch& x = kind == GuardKind::kProbeP99 ? p.rtt : p.job;
      return x.count() < kCanaryOwnShiftMinProbes ? kNaN : x.Quantile(0.99);
    }
  }
  return kNaN;
}

// The log value the DiD works on: counts get +0.5 (so zero counts have a
// finite log), proportions and throughput a floor.
double GuardLogValue(GuardKind kind, const HostPeriod& p) {
  if (!HasExposure(p)) return kNaN;
  switch (kind) {
    case GuardKind::kThroughput:
      return std::log(std::max(GuardValue(kind, p), kThroughputLogFloorGbps));
    case GuardKind::kPauseRatio:
      return std::log(std::max(GuardValue(kind, p), kPauseRatioLogFloor));
    case GuardKind::kCnp:
      return std::log((static_cast<double>(p.cnp) + 0.5) / p.covered_seconds);
    case GuardKind::kRetransmits:
      return std::log((static_cast<double>(p.retransmits) + 0.5) / p.covered_seconds);
    case GuardKind::kProbeP99:
    case GuardKind::kJobP99:
      return std::log(std::max(GuardValue(kind, p), 1e-9));  // NaN stays NaN
  }
  return kNaN;
}

double EventCount(GuardKind kind, const HostPeriod& p) {
  switch (kind) {
    case GuardKind::kCnp:
      return static_cast<double>(p.cnp);
    case GuardKind::kRetransmits:
      return static_cast<double>(p.retransmits);
    default:
      return kNaN;
  }
}

// ln of the q-quantile of a host's period sketch, or NaN with a reason when the
// sketch cannot give it (empty, zero, or the rank sits in a folded bucket).
double LnQuantile(const QuantileSketch& s, double q, std::string* why) {
  if (s.empty()) {
    *why = "empty sketch";
    return kNaN;
  }
  uint64_t rank0 = static_cast<uint64_t>(q * static_cast<double>(s.count() - 1));
  if (s.BucketOfRank(rank0 + 1).may_hold_folded) {
    *why = absl::StrFormat("sketch collapse reaches the %g quantile", q);
    return kNaN;
  }
  double v = s.Quantile(q);
  if (!(v > 0)) {
    *why = absl::StrFormat("the %g quantile is zero", q);
    return kNaN;
  }
  return std::log(v);
}

struct HostRow {
  const HostInput* in = nullptr;
  double ln_p99[2] = {kNaN, kNaN};   // before, after
  double ln_p999[2] = {kNaN, kNaN};  // NaN when too few samples
};

struct Rack {
  std::vector<const HostRow*> canary;
  std::vector<const HostRow*> control;
};

// How canary and control are compared.
//  kWithinRack: racks holding both canary and control hosts; one
//    difference in differences per rack pair, one-sample t test (df = R - 1).
//  kRackLevel: every rack entirely canary or entirely control (a change
//    applied per ToR); one before/after shift per rack, canary racks against
//    control racks with a pooled two-sample t test (df = Rc + Rk - 2).
enum class Design { kWithinRack, kRackLevel };

// The per-rack values one test compares, in the natural orientation (canary
// relative to control, log scale). canary / control: the per-rack mean
// before/after shift of each side (within-rack: of the paired racks, in rack
// order, so d[i] = canary[i] - control[i]; rack-level: of the pure racks).
struct Contrast {
  Design design = Design::kWithinRack;
  std::vector<double> d;  // within-rack only
  std::vector<double> canary;
  std::vector<double> control;
};

// Builds the contrast of a per-(host, period) value. A side of a rack is the
// mean over its hosts of (after - before); hosts where `value` is NaN in
// either period are left out, and a rack side with no usable host is left
// out (within-rack: the whole pair).
template <typename F>
Contrast MakeContrast(Design design, const std::map<std::string, Rack>& racks, F value) {
  Contrast out;
  out.design = design;
  auto side = [&](const std::vector<const HostRow*>& hosts) -> std::optional<double> {
    double sum = 0;
    int n = 0;
    for (const HostRow* h : hosts) {
      double b = value(*h, 0);
      double a = value(*h, 1);
      if (std::isnan(a) || std::isnan(b)) continue;
      sum += a - b;
      ++n;
    }
    if (n == 0) return std::nullopt;
    return sum / n;
  };
  for (const auto& [name, rack] : racks) {
    std::optional<double> c = side(rack.canary);
    std::optional<double> k = side(rack.control);
    if (design == Design::kWithinRack) {
      if (!c || !k) continue;
      out.d.push_back(*c - *k);
      out.canary.push_back(*c);
      out.control.push_back(*k);
    } else {
      if (c) out.canary.push_back(*c);
      if (k) out.control.push_back(*k);
    }
  }
  return out;
}

// The racks a contrast uses: rack pairs (within-rack) or pure racks of both
// groups (rack-level).
int Units(const Contrast& c) {
  return static_cast<int>(c.design == Design::kWithinRack ? c.d.size()
                                                          : c.canary.size() + c.control.size());
}

// Whether a contrast has enough racks for a test. Within-rack: at least
// min_rack_pairs pairs. Rack-level: at least kMinRacksPerGroup racks in each
// group and min_rack_pairs racks in all (a rack is the unit of evidence in
// both designs).
bool Enough(const Contrast& c, const Settings& s) {
  if (c.design == Design::kWithinRack) return c.d.size() >= s.min_rack_pairs;
  return c.canary.size() >= kMinRacksPerGroup && c.control.size() >= kMinRacksPerGroup &&
         c.canary.size() + c.control.size() >= s.min_rack_pairs;
}

// "8 rack pairs" / "3 canary racks vs 5 control racks".
std::string UnitsText(const Contrast& c) {
  if (c.design == Design::kWithinRack) return absl::StrFormat("%d rack pairs", c.d.size());
  return absl::StrFormat("%d canary racks vs %d control racks", c.canary.size(), c.control.size());
}

// What Enough() asks for, for HOLD reasons.
std::string NeededText(Design design, const Settings& s) {
  if (design == Design::kWithinRack) return absl::StrFormat("%d rack pairs", s.min_rack_pairs);
  return absl::StrFormat("at least %d canary and %d control racks, %d in all", kMinRacksPerGroup,
                         kMinRacksPerGroup, s.min_rack_pairs);
}

// The design evidence every metric's note starts with.
std::string DesignNote(const Contrast& c) {
  if (c.design == Design::kWithinRack) {
    return absl::StrFormat("design: within-rack, rack pairs %d", c.d.size());
  }
  return absl::StrFormat("design: rack-level, canary racks %d, control racks %d", c.canary.size(),
                         c.control.size());
}

// A one-sided t test of a contrast (natural orientation: canary relative to
// control, log scale). sign = +1 when higher is worse, -1 when lower is
// worse; the test rejects when the oriented difference in differences exceeds
// threshold_log (ln of the tolerated ratio) at level alpha.
struct DidResult {
  int r = 0;        // racks used: pairs, or canary + control racks
  double mean = 0;  // the difference in differences, natural orientation
  double sd = 0;    // sd of a per-rack value (pooled over the groups, rack-level)
  double se = 0;    // standard error of mean
  double df = 0;
  double t = 0;  // oriented
  double p = 1;
  double alpha = 0;
  bool reject = false;
  double fail_bound = kNaN;   // natural log scale, the one-sided (1 - alpha) bound tested
  double width_bound = kNaN;  // natural log scale, the one-sided bound on the other side
  double pass_alpha = 0.05;   // its error (Settings::pass_alpha; 0.05 before the final look)
};

// Fills t, p, reject and the bounds of `res` from its mean, the standard
// error of the mean and the degrees of freedom.
void FinishTTest(double se, double sign, double threshold_log, DidResult* res) {
  res->se = se;
  double excess = sign * res->mean - threshold_log;
  if (se > 0) {
    res->t = excess / se;
    res->p = stats::StudentTUpperTail(res->t, res->df);
  } else if (excess > 0) {
    res->t = std::numeric_limits<double>::infinity();
    res->p = 0;
  } else {
    res->t = excess == 0 ? 0 : -std::numeric_limits<double>::infinity();
    res->p = excess == 0 ? 0.5 : 1;
  }
  res->reject = res->alpha > 0 && res->p < res->alpha;
  if (res->alpha > 0) {
    res->fail_bound =
        sign * (sign * res->mean - stats::StudentTQuantile(1 - res->alpha, res->df) * se);
  }
  res->width_bound =
      sign * (sign * res->mean + stats::StudentTQuantile(1 - res->pass_alpha, res->df) * se);
}

double Mean(const std::vector<double>& x) {
  double sum = 0;
  for (double v : x) sum += v;
  return sum / static_cast<double>(x.size());
}

double SumSquares(const std::vector<double>& x, double mean) {
  double ss = 0;
  for (double v : x) ss += (v - mean) * (v - mean);
  return ss;
}

// Within-rack: a one-sample t test of the per-rack-pair differences d
// (df = R - 1).
DidResult TestPaired(const std::vector<double>& d, double sign, double threshold_log, double alpha,
                     double pass_alpha) {
  DidResult res;
  res.r = static_cast<int>(d.size());
  res.alpha = alpha;
  res.pass_alpha = pass_alpha;
  if (res.r < 2) return res;
  res.mean = Mean(d);
  res.sd = std::sqrt(SumSquares(d, res.mean) / (res.r - 1));
  res.df = res.r - 1;
  FinishTTest(res.sd / std::sqrt(static_cast<double>(res.r)), sign, threshold_log, &res);
  return res;
}

// Rack-level: a pooled two-sample t test of the canary racks' shifts against
// the control racks' (df = Rc + Rk - 2; the variance comes from the racks).
DidResult TestRackLevel(const std::vector<double>& canary, const std::vector<double>& control,
                        double sign, double threshold_log, double alpha, double pass_alpha) {
  DidResult res;
  const int rc = static_cast<int>(canary.size());
  const int rk = static_cast<int>(control.size());
  res.r = rc + rk;
  res.alpha = alpha;
  res.pass_alpha = pass_alpha;
  if (rc < 1 || rk < 1 || rc + rk < 3) return res;
  const double mc = Mean(canary);
  const double mk = Mean(control);
  res.mean = mc - mk;
  res.df = rc + rk - 2;
  res.sd = std::sqrt((SumSquares(canary, mc) + SumSquares(control, mk)) / res.df);
  FinishTTest(res.sd * std::sqrt(1.0 / rc + 1.0 / rk), sign, threshold_log, &res);
  return res;
}

// pass_alpha: the error of the width bound (Settings::pass_alpha at the looks
// that may PASS, 0.05 at the others, where it is only reported).
DidResult TestContrast(const Contrast& c, double sign, double threshold_log, double alpha,
                       double pass_alpha) {
  if (pass_alpha <= 0) pass_alpha = kPassAlpha;
  if (c.design == Design::kWithinRack) {
    return TestPaired(c.d, sign, threshold_log, alpha, pass_alpha);
  }
  return TestRackLevel(c.canary, c.control, sign, threshold_log, alpha, pass_alpha);
}

// Exact one-sided sign-flip p value of mean(d) > threshold_log (2^R patterns).
double SignFlipP(const std::vector<double>& d, double threshold_log) {
  size_t r = d.size();
  std::vector<double> e(r);
  double observed = 0;
  for (size_t i = 0; i < r; ++i) {
    e[i] = d[i] - threshold_log;
    observed += e[i];
  }
  uint64_t patterns = uint64_t{1} << r;
  uint64_t at_least = 0;
  for (uint64_t m = 0; m < patterns; ++m) {
    double s = 0;
    for (size_t i = 0; i < r; ++i) s += (m >> i & 1) ? -e[i] : e[i];
    if (s >= observed - 1e-12) ++at_least;
  }
  return static_cast<double>(at_least) / static_cast<double>(patterns);
}

// Exact one-sided permutation p value of mean(canary) - mean(control) >
// threshold_log: the share of the C(Rc + Rk, Rc) ways to label Rc of the
// racks canary whose difference is at least the observed one (canary shifts
// first moved down by threshold_log).
double PermutationP(const std::vector<double>& canary, const std::vector<double>& control,
                    double threshold_log) {
  std::vector<double> all;
  for (double x : canary) all.push_back(x - threshold_log);
  for (double x : control) all.push_back(x);
  const int n = static_cast<int>(all.size());
  const int rc = static_cast<int>(canary.size());
  if (rc < 1 || rc >= n) return 1;
  // mean(c) - mean(k) grows with the canary sum, so compare sums.
  double observed = 0;
  for (int i = 0; i < rc; ++i) observed += all[i];
  uint64_t at_least = 0, patterns = 0;
  // Every n-bit mask with rc bits set, in increasing order (Gosper's hack).
  for (uint64_t m = (uint64_t{1} << rc) - 1; m < (uint64_t{1} << n);) {
    double s = 0;
    for (int i = 0; i < n; ++i) {
      if (m >> i & 1) s += all[i];
    }
    ++patterns;
    if (s >= observed - 1e-12) ++at_least;
    uint64_t low = m & (~m + 1);
    uint64_t ripple = m + low;
    m = (((ripple ^ m) >> 2) / low) | ripple;
  }
  return static_cast<double>(at_least) / static_cast<double>(patterns);
}

// The exact distribution-free check reported beside the t test, or "" when
// there are too many racks to enumerate.
std::string ExactCheckNote(const Contrast& c, double threshold_log) {
  if (c.design == Design::kWithinRack) {
    if (c.d.size() > kMaxExactRacks) return "";
    return absl::StrFormat("; sign-flip p %.4g", SignFlipP(c.d, threshold_log));
  }
  if (c.canary.size() + c.control.size() > kMaxExactRacks) return "";
  return absl::StrFormat("; permutation p %.4g (C(%d, %d) labellings)",
                         PermutationP(c.canary, c.control, threshold_log),
                         c.canary.size() + c.control.size(), c.canary.size());
}

void FillEvidence(const DidResult& res, double sign, v1::MetricEvidence* ev) {
  ev->set_rack_pairs(static_cast<uint32_t>(res.r));
  ev->set_alpha(res.alpha);
  if (res.r < 2) return;
  ev->set_mean(res.mean);
  ev->set_sd(res.sd);
  ev->set_t(res.t);
  ev->set_p_value(res.p);
  ev->set_se(res.se);
  ev->set_df(res.df);
  ev->set_ratio(std::exp(res.mean));
  // ratio_lower / ratio_upper: the one-sided (1 - alpha) bound the FAIL test
  // uses on the bad side, the one-sided (1 - pass_alpha) bound on the good side.
  double bad = std::isnan(res.fail_bound) ? 0 : std::exp(res.fail_bound);
  double good = std::exp(res.width_bound);
  if (sign > 0) {
    ev->set_ratio_lower(bad);
    ev->set_ratio_upper(good);
  } else {
    ev->set_ratio_lower(good);
    ev->set_ratio_upper(std::isnan(res.fail_bound) ? 0 : bad);
  }
}

std::string Percent(double ratio) { return absl::StrFormat("%+.1f%%", (ratio - 1) * 100); }

// Group evidence over the hosts in `hosts` for one period (0 before, 1 after).
v1::GroupEvidence MakeGroup(const std::string& name, const std::vector<const HostRow*>& hosts,
                            int period, v1::Objective::Metric objective) {
  v1::GroupEvidence g;
  g.set_group(name);
  g.set_hosts(static_cast<uint32_t>(hosts.size()));
  if (hosts.empty()) return g;
  auto pick = [period](const HostRow* h) -> const HostPeriod& {
    return period == 0 ? h->in->before : h->in->after;
  };
  QuantileSketch merged(ObjectiveSamples(pick(hosts.front()), objective).relative_accuracy());
  double gbps = 0, cnp = 0, pause = 0, retx = 0;
  int with_exposure = 0;
  for (const HostRow* h : hosts) {
    const HostPeriod& p = pick(h);
    // Hosts were admitted with matching accuracies, so Merge cannot fail.
    (void)merged.Merge(ObjectiveSamples(p, objective));
    if (HasExposure(p)) {
      gbps += GuardValue(GuardKind::kThroughput, p);
      cnp += GuardValue(GuardKind::kCnp, p);
      pause += GuardValue(GuardKind::kPauseRatio, p);
      retx += GuardValue(GuardKind::kRetransmits, p);
      ++with_exposure;
    }
  }
  g.set_samples(merged.count());
  if (!merged.empty()) {
    g.set_p99_seconds(merged.Quantile(0.99));
    g.set_p999_seconds(merged.Quantile(0.999));
    stats::RankInterval ri = stats::QuantileRankInterval(merged.count(), 0.99, kGroupCiConfidence);
    // 0 = no such bound (too few samples).
    if (ri.lower >= 1 && ri.upper <= merged.count()) {
      g.set_p99_lower_seconds(merged.BucketOfRank(ri.lower).lower);
      g.set_p99_upper_seconds(merged.BucketOfRank(ri.upper).upper);
    }
  }
  merged.ToProto(g.mutable_rtt());
  if (with_exposure > 0) {
    g.set_throughput_gbps(gbps / with_exposure);
    g.set_cnp_per_second(cnp / with_exposure);
    g.set_pfc_pause_ratio(pause / with_exposure);
    g.set_retransmits_per_second(retx / with_exposure);
  }
  return g;
}

struct Decision {
  v1::Verdict::Outcome outcome = v1::Verdict::HOLD;
  std::string rule;
  std::string summary;
};

}  // namespace

ConstraintTolerance ToleranceOf(const v1::Constraint& c) {
  ConstraintTolerance t;
  const GuardSpec* spec = FindGuardSpec(c.metric());
  if (spec == nullptr) {
    t.ratio = std::numeric_limits<double>::quiet_NaN();
    return t;
  }
  const double max_ratio = c.max_ratio() > 0 ? c.max_ratio() : spec->default_max_ratio;
  t.higher_is_worse = spec->higher_is_worse;
  // As in Judge: max_ratio < 1 for a lower-is-worse metric is the floor itself.
  t.ratio = spec->higher_is_worse ? max_ratio : (max_ratio < 1 ? max_ratio : 1 / max_ratio);
  return t;
}

std::string ConstraintPointExceeded(const v1::Verdict& v,
                                    const std::vector<v1::Constraint>& constraints) {
  for (const v1::Constraint& k : constraints) {
    const ConstraintTolerance tol = ToleranceOf(k);
    if (std::isnan(tol.ratio)) continue;
    const std::string name = ConstraintEvidence(k.metric());
    for (const v1::MetricEvidence& m : v.metrics()) {
      if (m.metric() != name || !std::isfinite(m.ratio()) || m.ratio() <= 0) continue;
      if (!tol.Within(m.ratio())) {
        return absl::StrFormat("%s canary/control %.3f is beyond the tolerated %.3f;", k.metric(),
                               m.ratio(), tol.ratio);
      }
    }
  }
  return "";
}

namespace {

// HardLimitBreaches over hosts already in id order.
std::vector<HardLimitBreach> Breaches(const std::vector<const HostInput*>& order,
                                      const v1::Guard& guard) {
  struct Limit {
    const char* rule;
    double limit;  // 0: none
    double (*value)(const HostPeriod&);
    std::string (*say)(const std::string& host, double value, double limit);
  };
  const Limit limits[] = {
      {"guard:pfc_pause_ratio", guard.max_pfc_pause_ratio(), &WorstPauseRatio,
       [](const std::string& host, double v, double limit) {
         return absl::StrFormat(
             "FAIL: changed host %s paused %.4g of the time since the change, above the hard "
             "limit %.4g.",
             host, v, limit);
       }},
      {"guard:retransmits_per_second", guard.max_retransmits_per_second(),
       [](const HostPeriod& p) { return GuardValue(GuardKind::kRetransmits, p); },
       [](const std::string& host, double v, double limit) {
         return absl::StrFormat(
             "FAIL: changed host %s retransmitted %.4g/s since the change, above the hard "
             "limit %.4g/s.",
             host, v, limit);
       }},
  };
  std::vector<HardLimitBreach> out;
  for (const Limit& l : limits) {
    if (!(l.limit > 0)) continue;
    for (const HostInput* h : order) {  // the first host above the limit
      const double value = l.value(h->after);
      if (value > l.limit) {
        out.push_back({l.rule, l.say(h->host_id, value, l.limit)});
        break;
      }
    }
  }
  return out;
}

// One look's verdict, built by the stages docs/judge.md names, in order:
// admit, design, racks (with the group evidence), hard guards, probe loss,
// latency tests (p99, p999), constraints, control stability, decide. Each
// stage reads what the earlier ones left in the members below and adds
// evidence to `v_` and candidate decisions to `fails_` / `holds_`.
class LookJudge {
 public:
  LookJudge(const std::vector<HostInput>& hosts, const JudgeConfig& config)
      : config_(config), s_(Resolve(config)) {
    // Deterministic order independent of the input's: by host id.
    order_.reserve(hosts.size());
    for (const HostInput& h : hosts) order_.push_back(&h);
    std::stable_sort(order_.begin(), order_.end(), [](const HostInput* a, const HostInput* b) {
      return a->host_id < b->host_id;
    });
  }

  v1::Verdict Run() {
    v_.set_unix_nanos(config_.now_unix_nanos);
    v_.set_samples(config_.objective == v1::Objective::STEP_TIME_P99 ? "job_step_time"
                                                                     : "probe_rtt");
    v_.set_stage(config_.stage);
    v_.set_look(config_.look);
    v_.set_looks(config_.looks);
    Admit();
    ChooseDesign();
    FormRacks();
    HardGuards();
    ProbeLoss();
    LatencyP99();
    LatencyP999();
    const double alpha = ConstraintAlpha();
    for (const v1::Constraint& c : config_.constraints) TestConstraint(c, alpha);
    ControlStability();
    Decide();
    return std::move(v_);
  }

 private:
  // What the latency tests read (ObjectiveSamples), and its name in a summary.
  const QuantileSketch& Samples(const HostPeriod& p) const {
    return ObjectiveSamples(p, config_.objective);
  }
  const char* SamplesWord() const {
    return config_.objective == v1::Objective::STEP_TIME_P99 ? "job step time" : "RTT";
  }
  void Drop(const HostInput& h, const std::string& why) {
    v_.add_dropped_hosts(absl::StrCat(h.host_id.empty() ? "(no id)" : h.host_id, ": ", why));
  }

  // Why `h` cannot take part ("" when it can); fills `row` for an admitted host.
  std::string AdmissionProblem(size_t i, HostRow* row);
  void Admit();
  void ChooseDesign();
  void FormRacks();
  void HardGuards();
  void ProbeLoss();
  void TestProbeLoss();
  void LatencyP99();
  void LatencyP999();
  double ConstraintAlpha() const;
  void TestConstraint(const v1::Constraint& c, double alpha);
  void ControlStability();
  void Decide();

  const JudgeConfig& config_;
  const Settings s_;
  v1::Verdict v_;
  std::vector<const HostInput*> order_;
  std::vector<HostRow> rows_;  // admitted hosts; racks_ points into it
  Design design_ = Design::kWithinRack;
  std::map<std::string, Rack> racks_;
  std::vector<const HostRow*> used_[2];  // control, canary: hosts of the racks that count
  std::vector<Decision> fails_;          // in priority order
  std::vector<Decision> holds_;
  // The p99 test, which the decision reads.
  Contrast c99_;
  DidResult r99_;
  bool p99_width_ok_ = false;
  double accuracy_ = kNaN;  // the sketches' relative accuracy, from the first admitted host
};

std::string LookJudge::AdmissionProblem(size_t i, HostRow* row) {
  const HostInput& h = *order_[i];
  if (h.host_id.empty()) return "no host id";
  if ((i > 0 && order_[i - 1]->host_id == h.host_id) ||
      (i + 1 < order_.size() && order_[i + 1]->host_id == h.host_id)) {
    return "host id given more than once";
  }
  if (h.rack.empty()) return "no rack to pair by";
  const HostPeriod* periods[2] = {&h.before, &h.after};
  const char* names[2] = {"before", "after"};
  for (int p = 0; p < 2; ++p) {
    const HostPeriod& hp = *periods[p];
    if (hp.windows_expected <= 0 || hp.windows_present <= 0) {
      return p == 0 ? "no baseline windows" : "no windows since the change";
    }
    if (hp.windows_present < kMinWindowShare * hp.windows_expected) {
      return absl::StrFormat("%d of %d windows present %s (< %.0f%%)", hp.windows_present,
                             hp.windows_expected, names[p], kMinWindowShare * 100);
    }
    if (LossRate(hp) > kMaxProbeLoss) {
      return absl::StrFormat("%.1f%% of probes lost %s (> %.0f%%)", LossRate(hp) * 100, names[p],
                             kMaxProbeLoss * 100);
    }
    if (const QuantileSketch& x = Samples(hp); x.count() < s_.min_samples) {
      return absl::StrFormat("%d %s %s (< %d)", x.count(), ObjectiveSamplesName(config_.objective),
                             names[p], s_.min_samples);
    }
  }
  // Every admitted host's sketches share the first admitted host's accuracy.
  const double a = Samples(h.before).relative_accuracy();
  if (std::isnan(accuracy_)) accuracy_ = a;
  if (a != accuracy_ || Samples(h.after).relative_accuracy() != accuracy_) {
    return absl::StrFormat("sketch relative accuracy differs from %g", accuracy_);
  }
  row->in = &h;
  for (int p = 0; p < 2; ++p) {
    std::string q_why;
    row->ln_p99[p] = LnQuantile(Samples(*periods[p]), 0.99, &q_why);
    if (std::isnan(row->ln_p99[p])) return absl::StrCat(q_why, " ", names[p]);
  }
  if (Samples(h.before).count() >= kP999SampleFactor * s_.min_samples &&
      Samples(h.after).count() >= kP999SampleFactor * s_.min_samples) {
    std::string ignored;
    for (int p = 0; p < 2; ++p) {
      row->ln_p999[p] = LnQuantile(Samples(*periods[p]), 0.999, &ignored);
    }
  }
  return "";
}

// --- Admission: which hosts take part, and why the others do not.
void LookJudge::Admit() {
  rows_.reserve(order_.size());
  for (size_t i = 0; i < order_.size(); ++i) {
    HostRow row;
    if (std::string why = AdmissionProblem(i, &row); !why.empty()) {
      Drop(*order_[i], why);
      continue;
    }
    rows_.push_back(row);
  }
  // A job-signal objective that no host reported at all: say so, rather than
  // "too few rack pairs".
  if (config_.objective == v1::Objective::STEP_TIME_P99 &&
      std::none_of(order_.begin(), order_.end(), [](const HostInput* h) {
        return !h->before.job.empty() || !h->after.job.empty();
      })) {
    holds_.push_back(
        {v1::Verdict::HOLD, "objective_no_data",
         "HOLD: the objective is the job signal's p99 (STEP_TIME_P99) and no host reported the "
         "policy's job series (objective.job, objective.op) before or since the change; is the "
         "job running and reporting to its agents (docs/job-signal.md)?"});
  }
}

// --- Design, from the hosts given (not only those admitted, so thin data on
// one host cannot switch it): rack-level when no rack holds both canary and
// control hosts and there are racks of each; else within-rack, over the racks
// holding both.
void LookJudge::ChooseDesign() {
  bool any_mixed = false, any_canary_rack = false, any_control_rack = false;
  std::map<std::string, std::pair<bool, bool>> composition;  // has control, has canary
  for (const HostInput* h : order_) {
    if (h->host_id.empty() || h->rack.empty()) continue;
    auto& [control, canary] = composition[h->rack];
    (h->canary ? canary : control) = true;
  }
  for (const auto& [name, has] : composition) {
    any_mixed |= has.first && has.second;
    any_canary_rack |= has.second && !has.first;
    any_control_rack |= has.first && !has.second;
  }
  design_ =
      !any_mixed && any_canary_rack && any_control_rack ? Design::kRackLevel : Design::kWithinRack;
}

// --- Racks. Within-rack: a rack counts while it keeps a canary and a control
// host. Rack-level: every rack with an admitted host counts. Then the groups'
// evidence over the hosts of the racks that count.
void LookJudge::FormRacks() {
  for (const HostRow& r : rows_) {
    Rack& rack = racks_[r.in->rack];
    (r.in->canary ? rack.canary : rack.control).push_back(&r);
  }
  for (auto it = racks_.begin(); it != racks_.end();) {
    Rack& rack = it->second;
    if (design_ == Design::kWithinRack && (rack.canary.empty() || rack.control.empty())) {
      for (const HostRow* h : rack.canary.empty() ? rack.control : rack.canary) {
        Drop(*h->in, absl::StrCat("rack ", it->first, " has no ",
                                  rack.canary.empty() ? "canary" : "control", " host"));
      }
      it = racks_.erase(it);
      continue;
    }
    for (const HostRow* h : rack.control) used_[0].push_back(h);
    for (const HostRow* h : rack.canary) used_[1].push_back(h);
    ++it;
  }
  *v_.add_groups() = MakeGroup("canary", used_[1], 1, config_.objective);
  *v_.add_groups() = MakeGroup("control", used_[0], 1, config_.objective);
  *v_.add_groups() = MakeGroup("canary_baseline", used_[1], 0, config_.objective);
  *v_.add_groups() = MakeGroup("control_baseline", used_[0], 0, config_.objective);
}

// --- Hard guards: every canary host that reported, admitted or not.
void LookJudge::HardGuards() {
  if (config_.guard_event) {
    fails_.push_back(
        {v1::Verdict::FAIL, "local_guard",
         absl::StrCat("FAIL: an agent's local guard fired on a canary host",
                      config_.guard_event_detail.empty() ? "" : " (", config_.guard_event_detail,
                      config_.guard_event_detail.empty() ? "" : ")", ".")});
  }
  std::vector<const HostInput*> canary;
  for (const HostInput* h : order_) {
    if (h->canary) canary.push_back(h);
  }
  for (HardLimitBreach& b : Breaches(canary, config_.guard)) {
    fails_.push_back({v1::Verdict::FAIL, std::move(b.rule), std::move(b.summary)});
  }
}

// Probe loss: a canary losing probes (> 5% on a host, or 1 point more than
// control over the group) never PASSes; lost probes would flatter its p99.
void LookJudge::ProbeLoss() {
  uint64_t sent[2] = {0, 0}, lost[2] = {0, 0};
  std::string lossy_host;
  double lossy_rate = 0;
  for (const HostInput* h : order_) {
    sent[h->canary] += h->after.probes_sent;
    lost[h->canary] += h->after.probes_lost;
    if (h->canary && lossy_host.empty() && LossRate(h->after) > kMaxProbeLoss) {
      lossy_host = h->host_id;
      lossy_rate = LossRate(h->after);
    }
  }
  double rate[2];
  for (int g = 0; g < 2; ++g) {
    rate[g] = sent[g] == 0 ? 0 : static_cast<double>(lost[g]) / static_cast<double>(sent[g]);
  }
  TestProbeLoss();
  if (!lossy_host.empty()) {
    holds_.push_back({v1::Verdict::HOLD, "probe_loss",
                      absl::StrFormat("HOLD: canary host %s lost %.1f%% of its probes since the "
                                      "change; a canary losing probes never passes.",
                                      lossy_host, lossy_rate * 100)});
  } else if (rate[1] > rate[0] + kMaxExcessCanaryLoss) {
    holds_.push_back(
        {v1::Verdict::HOLD, "probe_loss",
         absl::StrFormat("HOLD: the canary lost %.1f%% of its probes since the change (control "
                         "%.1f%%); a canary losing probes never passes.",
                         rate[1] * 100, rate[0] * 100)});
  }
}

// Probe loss as a regression: the per-rack contrast of each host's loss share
// (after - before, canary against control, in the look's design), over every
// host given with probes sent in both periods (a host lossy enough to be
// dropped from the latency tests counts here), tested one-sided against
// kMaxExcessCanaryLoss (absolute share) at the loss alpha. Rejects: FAIL
// "probe_loss". Evidence "probe_loss_did" (mean: the excess share; ratio
// fields unused).
void LookJudge::TestProbeLoss() {
  std::vector<HostRow> rows;
  rows.reserve(order_.size());
  for (const HostInput* h : order_) {
    if (h->host_id.empty() || h->rack.empty() || h->before.probes_sent == 0 ||
        h->after.probes_sent == 0) {
      continue;
    }
    HostRow r;
    r.in = h;
    rows.push_back(r);
  }
  std::map<std::string, Rack> racks;
  for (const HostRow& r : rows) {
    Rack& rack = racks[r.in->rack];
    (r.in->canary ? rack.canary : rack.control).push_back(&r);
  }
  const Contrast c = MakeContrast(design_, racks, [](const HostRow& h, int p) {
    return LossRate(p == 0 ? h.in->before : h.in->after);
  });
  const bool enough = Enough(c, s_);
  const double alpha = enough ? AlphaAtLook(kLossShare * s_.alpha_total, s_) : 0;
  const DidResult r = TestContrast(c, 1, kMaxExcessCanaryLoss, alpha, s_.pass_alpha);
  v1::MetricEvidence* ev = v_.add_metrics();
  ev->set_metric(std::string(kProbeLossEvidence));
  ev->set_rack_pairs(static_cast<uint32_t>(r.r));
  ev->set_alpha(r.alpha);
  if (r.r >= 2) {
    ev->set_mean(r.mean);
    ev->set_sd(r.sd);
    ev->set_t(r.t);
    ev->set_p_value(r.p);
  }
  ev->set_note(absl::StrFormat(
      "%s; canary loss share minus control's, after minus before; FAIL when significantly above "
      "%.3g",
      DesignNote(c), kMaxExcessCanaryLoss));
  if (!enough) {
    ev->set_outcome("not_evaluated");
  } else if (r.reject) {
    ev->set_outcome("fail");
    fails_.push_back(
        {v1::Verdict::FAIL, "probe_loss",
         absl::StrFormat("FAIL: the canary lost %.2f%% more of its probes than control since the "
                         "change (over %s; more than %.1f%% with p %.3g < alpha %.3g).",
                         r.mean * 100, UnitsText(c), kMaxExcessCanaryLoss * 100, r.p, r.alpha)});
  } else {
    ev->set_outcome(s_.final_look ? "pass" : "hold");
  }
}

// --- Latency tests: p99, the one that can PASS a change.
void LookJudge::LatencyP99() {
  c99_ = MakeContrast(design_, racks_, [](const HostRow& h, int p) { return h.ln_p99[p]; });
  const double tol_log = std::log1p(s_.tolerance);
  const double alpha99 = AlphaAtLook(kP99Share * s_.alpha_total, s_);
  v1::MetricEvidence* ev99 = v_.add_metrics();
  ev99->set_metric(std::string(kP99Evidence));
  const bool p99_enough = Enough(c99_, s_);
  r99_ = TestContrast(c99_, 1, tol_log, p99_enough ? alpha99 : 0, s_.pass_alpha);
  FillEvidence(r99_, 1, ev99);
  ev99->set_alpha(r99_.alpha);
  if (!p99_enough) {
    ev99->set_outcome("hold");
    ev99->set_note(absl::StrFormat("%s; %s usable, %s needed", DesignNote(c99_), UnitsText(c99_),
                                   NeededText(design_, s_)));
    holds_.push_back({v1::Verdict::HOLD, "min_rack_pairs",
                      absl::StrFormat("HOLD: only %s usable (%s needed) to compare canary and "
                                      "control p99.",
                                      UnitsText(c99_), NeededText(design_, s_))});
    return;
  }
  p99_width_ok_ = std::exp(r99_.width_bound) < 1 + s_.pass_max_ucb_regression;
  std::string note = absl::StrFormat(
      "%s; ratio_lower: one-sided %.4g bound (FAIL when above %.4g); ratio_upper: one-sided "
      "%.4g bound (PASS needs below %.4g)",
      DesignNote(c99_), 1 - r99_.alpha, 1 + s_.tolerance, 1 - r99_.pass_alpha,
      1 + s_.pass_max_ucb_regression);
  note += ExactCheckNote(c99_, tol_log);
  ev99->set_note(note);
  if (r99_.reject) {
    ev99->set_outcome("fail");
    fails_.push_back(
        {v1::Verdict::FAIL, "p99_did_t_test",
         absl::StrFormat("FAIL: canary p99 %s changed %s relative to control over %s "
                         "(lower bound %s above the %s tolerance; p %.3g < alpha %.3g).",
                         SamplesWord(), Percent(std::exp(r99_.mean)), UnitsText(c99_),
                         Percent(std::exp(r99_.fail_bound)), Percent(1 + s_.tolerance), r99_.p,
                         r99_.alpha)});
  } else if (s_.final_look && !s_.spent && p99_width_ok_) {
    ev99->set_outcome("pass");
  } else {
    ev99->set_outcome("hold");
  }
}

// --- Latency tests: p999, which can only FAIL (or is not evaluated).
void LookJudge::LatencyP999() {
  const Contrast c999 =
      MakeContrast(design_, racks_, [](const HostRow& h, int p) { return h.ln_p999[p]; });
  const double tol_log = std::log1p(s_.tolerance);
  const double alpha999 = AlphaAtLook(kP999Share * s_.alpha_total, s_);
  v1::MetricEvidence* ev999 = v_.add_metrics();
  ev999->set_metric(std::string(kP999Evidence));
  if (!Enough(c999, s_)) {
    DidResult none = TestPaired({}, 1, tol_log, 0, kPassAlpha);
    FillEvidence(none, 1, ev999);
    ev999->set_rack_pairs(static_cast<uint32_t>(Units(c999)));
    ev999->set_outcome("not_evaluated");
    ev999->set_note(absl::StrFormat("%s; %s with >= %d probes per host and period (%s needed)",
                                    DesignNote(c999), UnitsText(c999),
                                    kP999SampleFactor * s_.min_samples, NeededText(design_, s_)));
    return;
  }
  DidResult r999 = TestContrast(c999, 1, tol_log, alpha999, s_.pass_alpha);
  FillEvidence(r999, 1, ev999);
  ev999->set_note(
      absl::StrFormat("%s; ratio_lower: one-sided %.4g bound; ratio_upper: one-sided %.4g",
                      DesignNote(c999), 1 - r999.alpha, 1 - r999.pass_alpha));
  if (r999.reject) {
    ev999->set_outcome("fail");
    fails_.push_back(
        {v1::Verdict::FAIL, "p999_did_t_test",
         absl::StrFormat("FAIL: canary p999 %s changed %s relative to control over %s "
                         "(lower bound %s above the %s tolerance; p %.3g < alpha %.3g).",
                         SamplesWord(), Percent(std::exp(r999.mean)), UnitsText(c999),
                         Percent(std::exp(r999.fail_bound)), Percent(1 + s_.tolerance), r999.p,
                         r999.alpha)});
  } else {
    ev999->set_outcome(s_.final_look ? "pass" : "hold");
  }
}

// --- Constraints: the alpha each known constraint spends at this look.
double LookJudge::ConstraintAlpha() const {
  int known_constraints = 0;
  for (const v1::Constraint& c : config_.constraints) {
    if (FindGuardSpec(c.metric()) != nullptr) ++known_constraints;
  }
  return known_constraints == 0
             ? 0
             : AlphaAtLook(kConstraintShare * s_.alpha_total / known_constraints, s_);
}

// --- Constraints: paired DiD on log rates, plus absolute bounds.
void LookJudge::TestConstraint(const v1::Constraint& c, double alpha) {
  v1::MetricEvidence* ev = v_.add_metrics();
  ev->set_metric(ConstraintEvidence(c.metric()));
  const GuardSpec* spec = FindGuardSpec(c.metric());
  if (spec == nullptr) {
    ev->set_outcome("not_evaluated");
    ev->set_note(absl::StrCat("unknown metric \"", c.metric(), "\""));
    return;
  }
  const GuardKind kind = spec->kind;
  const double sign = spec->higher_is_worse ? 1 : -1;
  const double max_ratio = c.max_ratio() > 0 ? c.max_ratio() : spec->default_max_ratio;
  // max_ratio < 1 for a lower-is-worse metric reads as the floor itself.
  const double worse_ratio =
      spec->higher_is_worse ? max_ratio : (max_ratio < 1 ? 1 / max_ratio : max_ratio);
  const Contrast cc = MakeContrast(design_, racks_, [kind](const HostRow& h, int p) {
    return GuardLogValue(kind, p == 0 ? h.in->before : h.in->after);
  });
  const bool enough = Enough(cc, s_);
  DidResult r = TestContrast(cc, sign, std::log(std::max(1.0, worse_ratio)), enough ? alpha : 0,
                             s_.pass_alpha);
  FillEvidence(r, sign, ev);
  // Canary group means in the after period, and the control's, for the floor
  // and the absolute bounds.
  double canary_value = 0, control_value = 0, canary_events = 0;
  int nc = 0, nk = 0;
  for (const HostRow* h : used_[1]) {
    double x = GuardValue(kind, h->in->after);
    if (std::isnan(x)) continue;
    canary_value += x;
    canary_events += EventCount(kind, h->in->after);
    ++nc;
  }
  for (const HostRow* h : used_[0]) {
    double x = GuardValue(kind, h->in->after);
    if (std::isnan(x)) continue;
    control_value += x;
    ++nk;
  }
  if (nc > 0) canary_value /= nc, canary_events /= nc;
  if (nk > 0) control_value /= nk;
  std::string note = absl::StrFormat(
      "%s; tolerated ratio %.4g; canary %.4g vs control %.4g per host since the change",
      DesignNote(cc), spec->higher_is_worse ? worse_ratio : 1 / worse_ratio, canary_value,
      control_value);
  bool above_floor = true;
  if (kind == GuardKind::kCnp || kind == GuardKind::kRetransmits) {
    above_floor = canary_events >= kMinEventsPerHost;
  } else if (kind == GuardKind::kPauseRatio) {
    above_floor = canary_value >= kMinPauseRatioToFail;
  }
  // Absolute bounds from the constraint: FAIL only when the canary violates a
  // bound the control meets (a fleet-wide violation is not the change's).
  auto violates = [&c](double x) {
    return (c.has_max() && x > c.max()) || (c.has_min() && x < c.min());
  };
  if (nc > 0 && nk > 0 && violates(canary_value) && !violates(control_value)) {
    fails_.push_back({v1::Verdict::FAIL, absl::StrCat("constraint_bound:", c.metric()),
                      absl::StrFormat("FAIL: the canary's %s is %.4g per host since the change, "
                                      "outside the policy's bounds, while control's is %.4g.",
                                      c.metric(), canary_value, control_value)});
  }
  if (!enough) {
    ev->set_outcome("hold");
    absl::StrAppendFormat(&note, "; %s with exposure, %s needed", UnitsText(cc),
                          NeededText(design_, s_));
    holds_.push_back({v1::Verdict::HOLD, absl::StrCat("constraint_data:", c.metric()),
                      absl::StrFormat("HOLD: %s usable for %s (%s needed).", UnitsText(cc),
                                      c.metric(), NeededText(design_, s_))});
  } else if (r.reject && above_floor) {
    ev->set_outcome("fail");
    fails_.push_back(
        {v1::Verdict::FAIL, absl::StrCat("constraint:", c.metric()),
         absl::StrFormat("FAIL: canary %s changed %s relative to control over %s, "
                         "beyond the tolerated %s (p %.3g < alpha %.3g).",
                         c.metric(), Percent(std::exp(r.mean)), UnitsText(cc),
                         Percent(spec->higher_is_worse ? worse_ratio : 1 / worse_ratio), r.p,
                         r.alpha)});
  } else {
    if (r.reject) note += "; significant but below the absolute floor";
    ev->set_outcome(s_.final_look ? "pass" : "hold");
  }
  ev->set_note(note);
}

// --- Stability of the control group.
void LookJudge::ControlStability() {
  if (c99_.control.empty()) return;
  double shift = Mean(c99_.control);
  if (std::abs(shift) > kMaxControlShift) {
    holds_.push_back(
        {v1::Verdict::HOLD, "control_shift",
         absl::StrFormat("HOLD: control p99 itself moved %s between baseline and bake, so the "
                         "comparison is not trusted (fleet incident?).",
                         Percent(std::exp(shift)))});
  }
}

// --- Verdict order: hard guards and rejecting tests FAIL (first listed wins),
// then look and HOLD rules, then PASS.
void LookJudge::Decide() {
  Decision d;
  if (!fails_.empty()) {
    d = fails_.front();
  } else if (!s_.planned && !s_.extended) {
    d = {v1::Verdict::HOLD, "unplanned_look",
         absl::StrFormat("HOLD: look %d is outside the %d planned looks, so no test may decide.",
                         s_.look, s_.looks)};
  } else if (s_.spent) {
    d = {v1::Verdict::HOLD, "hold_looks_spent",
         absl::StrFormat("HOLD: hold look %d after the final look is past the %d the HOLD limit "
                         "allows; their error budget is spent, so no test may decide.",
                         s_.look - s_.looks, s_.hold_looks)};
  } else if (!holds_.empty()) {
    d = holds_.front();
  } else if (!s_.final_look) {
    d = {v1::Verdict::HOLD, "interim_look",
         absl::StrFormat("HOLD: no regression shown at interim look %d of %d (p99 %s relative to "
                         "control); PASS is decided at the final look.",
                         s_.look, s_.looks, Percent(std::exp(r99_.mean)))};
  } else if (!p99_width_ok_) {
    d = {v1::Verdict::HOLD, "p99_ucb_too_wide",
         absl::StrFormat("HOLD: no regression shown, but the p99 ratio's %.4g upper bound %s does "
                         "not rule out %s.",
                         1 - r99_.pass_alpha, Percent(std::exp(r99_.width_bound)),
                         Percent(1 + s_.pass_max_ucb_regression))};
  } else {
    d = {v1::Verdict::PASS, "p99_did_t_test",
         absl::StrFormat("PASS: canary p99 %s changed %s relative to control over %s "
                         "(%.4g upper bound %s, below %s).",
                         SamplesWord(), Percent(std::exp(r99_.mean)), UnitsText(c99_),
                         1 - r99_.pass_alpha, Percent(std::exp(r99_.width_bound)),
                         Percent(1 + s_.pass_max_ucb_regression))};
  }
  v_.set_outcome(d.outcome);
  v_.set_rule(d.rule);
  v_.set_summary(d.summary);
}

}  // namespace

uint32_t HoldLooksAllowed(uint32_t max_hold_seconds, uint32_t bake_seconds, uint32_t looks) {
  if (max_hold_seconds == 0 || bake_seconds == 0 || looks == 0) return 0;
  // Looks fall every bake / looks: k whole intervals fit in the limit, the
  // look after them is the one that finds the limit passed (and may still
  // decide), and one more covers a missed final look.
  const uint64_t k = static_cast<uint64_t>(max_hold_seconds) * looks / bake_seconds;
  return static_cast<uint32_t>(std::min<uint64_t>(k + 2, 1000));
}

std::vector<HardLimitBreach> HardLimitBreaches(const std::vector<HostInput>& hosts,
                                               const v1::Guard& guard) {
  std::vector<const HostInput*> order;
  for (const HostInput& h : hosts) order.push_back(&h);
  std::stable_sort(order.begin(), order.end(),
                   [](const HostInput* a, const HostInput* b) { return a->host_id < b->host_id; });
  return Breaches(order, guard);
}

v1::Verdict Judge(const std::vector<HostInput>& hosts, const JudgeConfig& config) {
  return LookJudge(hosts, config).Run();
}

DesignPower EstimateDesignPower(const std::vector<HostInput>& aa, const JudgeConfig& config) {
  JudgeConfig final_look = config;
  final_look.look = std::max<uint32_t>(1, config.looks);
  final_look.guard_event = false;
  const Settings s = Resolve(final_look);
  const v1::Verdict v = Judge(aa, final_look);
  DesignPower out;
  out.pass_margin_ratio = 1 + s.pass_max_ucb_regression;
  const v1::MetricEvidence* p99 = FindEvidence(v, kP99Evidence);
  if (p99 == nullptr || p99->alpha() <= 0 || p99->rack_pairs() < 2 || !std::isfinite(p99->sd())) {
    out.note = absl::StrCat("the judge cannot decide on this fleet now: ", v.summary());
    return out;
  }
  out.ok = true;
  out.units = static_cast<int>(p99->rack_pairs());
  out.sd = p99->sd();
  // The standard error and degrees of freedom the test used (df = pairs - 1
  // within-rack, racks - 2 rack-level, where the se also depends on the
  // group sizes).
  const bool rack_level = p99->note().find("rack-level") != std::string::npos;
  const double df = std::max(1.0, p99->df());
  const double se = p99->se();
  const double width_log = std::log(p99->ratio_upper()) - p99->mean();
  const double z = stats::StudentTQuantile(1 - p99->alpha(), df) + stats::StudentTQuantile(0.8, df);
  out.mde_ratio = std::exp(std::log1p(s.tolerance) + z * se);
  out.pass_bound_ratio = std::exp(width_log);
  out.note = absl::StrFormat(
      "%d %s, sd of a unit's ln p99 difference %.3f (A/A on recent telemetry): a final look "
      "FAILs a p99 regression of %s or more 80%% of the time; a neutral change reaches an upper "
      "bound of about %s against the PASS margin %s%s",
      out.units, rack_level ? "racks (rack-level)" : "rack pairs", out.sd, Percent(out.mde_ratio),
      Percent(out.pass_bound_ratio), Percent(out.pass_margin_ratio),
      out.pass_bound_ratio >= out.pass_margin_ratio
          ? ": it would likely never PASS (more racks, longer bakes, or a wider "
            "guard.pass_max_ucb_regression)"
          : "");
  return out;
}

std::string ConstraintEvidence(absl::string_view metric) {
  return absl::StrCat("ln_", metric, "_did");
}

const v1::MetricEvidence* FindEvidence(const v1::Verdict& v, absl::string_view metric) {
  for (const v1::MetricEvidence& m : v.metrics()) {
    if (m.metric() == metric) return &m;
  }
  return nullptr;
}

namespace {

// Mean over the hosts of one group (canary or control) with
// kCanaryOwnShiftMinProbes in both periods of ln p99 after - ln p99 before;
// nullopt when no host has.
std::optional<std::pair<double, int>> OwnShift(const std::vector<HostInput>& hosts, bool canary,
                                               v1::Objective::Metric objective) {
  double sum = 0;
  int n = 0;
  for (const HostInput& in : hosts) {
    const QuantileSketch& before = ObjectiveSamples(in.before, objective);
    const QuantileSketch& after = ObjectiveSamples(in.after, objective);
    if (in.canary != canary || before.count() < kCanaryOwnShiftMinProbes ||
        after.count() < kCanaryOwnShiftMinProbes) {
      continue;
    }
    sum += std::log(after.Quantile(0.99)) - std::log(before.Quantile(0.99));
    ++n;
  }
  if (n == 0) return std::nullopt;
  return std::make_pair(sum / n, n);
}

// The canary's p99 over the onset and over the whole period, each against
// its baseline, all three pooled over the canary hosts that reported in the
// onset (pooled, not per host: the onset is short, and a host's share of it
// holds too few probes for its own p99). `hosts` = 0 when no canary host has
// onset probes (the look's period is the onset itself).
struct OnsetShift {
  int hosts = 0;
  uint64_t probes = 0;    // in the onset
  bool measured = false;  // kCanaryOwnShiftMinProbes in the onset and baseline
  double onset_ln = kNaN;
  double whole_ln = kNaN;
};

OnsetShift CanaryOnsetShift(const std::vector<HostInput>& hosts, v1::Objective::Metric objective) {
  OnsetShift out;
  QuantileSketch before;
  QuantileSketch onset;
  QuantileSketch whole;
  for (const HostInput& in : hosts) {
    const QuantileSketch& b = ObjectiveSamples(in.before, objective);
    const QuantileSketch& o = ObjectiveSamples(in.onset, objective);
    const QuantileSketch& a = ObjectiveSamples(in.after, objective);
    if (!in.canary || o.empty() || b.empty() || a.empty()) continue;
    ++out.hosts;
    // Sketches of one store share its accuracy, so a merge does not fail; if
    // one did, the pools would no longer match: not measured.
    if (!before.Merge(b).ok() || !onset.Merge(o).ok() || !whole.Merge(a).ok()) {
      return out;
    }
  }
  out.probes = onset.count();
  out.measured =
      onset.count() >= kCanaryOwnShiftMinProbes && before.count() >= kCanaryOwnShiftMinProbes;
  if (out.measured) {
    const double base = std::log(before.Quantile(0.99));
    out.onset_ln = std::log(onset.Quantile(0.99)) - base;
    out.whole_ln = std::log(whole.Quantile(0.99)) - base;
  }
  return out;
}

v1::MetricEvidence* AddOwnShiftEvidence(absl::string_view metric, const char* group,
                                        std::pair<double, int> shift, v1::Verdict* v) {
  v1::MetricEvidence* m = v->add_metrics();
  m->set_metric(std::string(metric));
  m->set_outcome("info");
  m->set_mean(shift.first);
  m->set_ratio(std::exp(shift.first));
  m->set_note(absl::StrCat("mean over ", shift.second, " ", group,
                           " hosts of ln p99 after - ln p99 before"));
  return m;
}

}  // namespace

void AddCanaryOwnShift(const std::vector<HostInput>& hosts, v1::Verdict* v,
                       v1::Objective::Metric objective) {
  // The canary's own before/after change in p99, beside the DiD (shown with a
  // campaign's trials, not scored: fleet-wide drift moves it). Canary and
  // control share the fabric, so a change on canary senders also moves the
  // queues control hosts cross; the DiD subtracts that part, which a
  // fleet-wide promotion would get.
  const std::optional<std::pair<double, int>> canary = OwnShift(hosts, true, objective);
  if (!canary) return;
  const double canary_ratio =
      AddOwnShiftEvidence(kCanaryOwnShiftEvidence, "canary", *canary, v)->ratio();
  const std::optional<std::pair<double, int>> control = OwnShift(hosts, false, objective);
  const double control_ratio =
      control ? AddOwnShiftEvidence(kControlOwnShiftEvidence, "control", *control, v)->ratio()
              : kNaN;
  // In a shared fabric a bad change on canary senders fills the queues control
  // hosts cross too, so the judge sees control move with the canary and holds
  // ("control_shift"). So does a fleet incident (the simulator's shared-fabric
  // regressions move control almost as much as the canary, +235% vs +253%:
  // the two shifts cannot tell them apart). The onset can: a change acts once
  // applied, so its rise is there in the step's first interval; an incident
  // that began later is not.
  if (v->outcome() != v1::Verdict::HOLD || v->rule() != "control_shift" ||
      canary_ratio < kControlShiftRatio) {
    return;
  }
  const std::string control_text = std::isnan(control_ratio)
                                       ? std::string("not measured")
                                       : absl::StrFormat("%+.0f%%", 100 * (control_ratio - 1));
  const OnsetShift onset = CanaryOnsetShift(hosts, objective);
  std::string onset_text =
      onset.hosts == 0
          ? std::string("not told apart: this look's period is the onset itself")
          : absl::StrCat("not measured: ", onset.probes, " probes in the step's first interval");
  if (onset.measured) {
    v1::MetricEvidence* m = v->add_metrics();
    m->set_metric(std::string(kCanaryOnsetShiftEvidence));
    m->set_outcome("info");
    m->set_mean(onset.onset_ln);
    m->set_ratio(std::exp(onset.onset_ln));
    m->set_note(absl::StrFormat(
        "p99 of the %d canary hosts' %d probes in the step's first interval over their pooled "
        "baseline; over the whole period, pooled the same way: %+.0f%%",
        onset.hosts, onset.probes, 100 * (std::exp(onset.whole_ln) - 1)));
    onset_text = absl::StrFormat("%+.0f%% in the first interval, %+.0f%% over the period, pooled",
                                 100 * (m->ratio() - 1), 100 * (std::exp(onset.whole_ln) - 1));
    // An incident: the onset had not risen x1.5, nor by half of the period's
    // rise (on the same pooled estimator), so most of the rise came later.
    if (RiseBeganAfterOnset(onset.onset_ln, onset.whole_ln, kControlShiftRatio)) {
      v->set_rule("fleet_shift");
      v->set_summary(absl::StrFormat(
          "HOLD: canary p99 rose %+.0f%% over its own baseline and control %s, but the canary's "
          "rise was not there when the change took effect (%s): it began later, as a fleet "
          "incident's does, so the change is neither failed nor passed (%s)",
          100 * (canary_ratio - 1), control_text, onset_text, v->summary()));
      return;
    }
  }
  v->set_outcome(v1::Verdict::FAIL);
  v->set_rule("fabric_regression");
  v->set_summary(absl::StrFormat(
      "FAIL: canary p99 rose %+.0f%% over its own baseline after the change (onset %s), control "
      "%s (%s): in a shared fabric the change is the likely cause",
      100 * (canary_ratio - 1), onset_text, control_text, v->summary()));
}

}  // namespace rocetune::controller
