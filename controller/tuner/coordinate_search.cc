#include "controller/tuner/coordinate_search.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "controller/judge/judge.h"
#include "model/cc_params.h"

namespace rocetune::controller {
namespace {

constexpr uint32_t kDefaultBudget = 20;
constexpr double kDefaultMinImprovement = 0.02;
// Bounds beyond this are refused so that step arithmetic cannot overflow.
constexpr int64_t kMaxMagnitude = int64_t{1} << 53;
constexpr double kMaxExponent = 16;          // log_scale: at most a factor 2^16 per move
constexpr double kMinExponent = 1.0 / 1024;  // log_scale: smaller exponents count as the floor
constexpr int kProposeIterationLimit = 1 << 20;

// Floor division for a positive divisor.
int64_t FloorDiv(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && (a < 0)) --q;
  return q;
}

// One knob's geometry: bounds snapped to the grid origin + n * step.
struct Axis {
  const v1::Knob* knob = nullptr;
  int64_t origin = 0;
  int64_t lo = 0;         // lowest grid point >= min
  int64_t hi = 0;         // highest grid point <= max
  int64_t max_units = 1;  // largest additive move, in steps

  int64_t step() const { return knob->step(); }
  // The grid point nearest to v, inside [lo, hi].
  int64_t Snap(int64_t v) const {
    v = std::clamp(v, lo, hi);  // first, so that any int64 is safe
    const int64_t n = FloorDiv(v - origin + step() / 2, step());
    return std::clamp(origin + n * step(), lo, hi);
  }
};

Axis MakeAxis(const v1::Knob& knob, const KnobValues& start) {
  Axis a;
  a.knob = &knob;
  a.origin = KnobOrigin(knob, start);
  a.lo = a.origin - FloorDiv(a.origin - knob.min(), knob.step()) * knob.step();
  a.hi = a.origin + FloorDiv(knob.max() - a.origin, knob.step()) * knob.step();
  int64_t units = std::max<int64_t>(1, (a.hi - a.lo) / knob.step());
  if (knob.max_step() > 0)
    units = std::min(units, std::max<int64_t>(1, knob.max_step() / knob.step()));
  a.max_units = units;
  return a;
}

// A policy constraint the judge knows, with its tolerance on the
// candidate/reference ratio.
struct Limit {
  std::string metric;
  ConstraintTolerance tolerance;

  // ln of the distance from `ratio` to the tolerance, positive inside.
  double Margin(double ratio) const {
    return tolerance.higher_is_worse ? std::log(tolerance.ratio / ratio)
                                     : std::log(ratio / tolerance.ratio);
  }
};

bool UsableRatio(double r) { return std::isfinite(r) && r > 0; }

// The replayed search.
class SearchState {
 public:
  SearchState(const std::vector<v1::Knob>& knobs, const std::vector<v1::Constraint>& constraints,
              const KnobValues& start, double min_improvement)
      : min_improvement_(min_improvement), incumbent_(start) {
    for (const v1::Constraint& c : constraints) {
      const ConstraintTolerance t = ToleranceOf(c);
      if (!UsableRatio(t.ratio)) continue;
      limits_.push_back({c.metric(), t});
      // The reference is the start: its own ratios are 1.
      incumbent_ratios_[c.metric()] = 1.0;
    }
    for (const v1::Knob& k : knobs) {
      axes_.push_back(MakeAxis(k, start));
      incumbent_[k.parameter()] = axes_.back().origin;
      PerKnob pk;
      if (k.log_scale()) {
        // A quarter of the range in log2 terms, at least a factor 2.
        const Axis& a = axes_.back();
        const double floor = static_cast<double>(std::max(a.lo, a.step()));
        const double span = a.hi > floor ? std::log2(static_cast<double>(a.hi) / floor) : 0;
        pk.exponent = std::clamp(span / 4, 1.0, kMaxExponent);
      } else {
        pk.units = std::clamp<int64_t>((axes_.back().hi - axes_.back().lo) / 4 / k.step(), 1,
                                       axes_.back().max_units);
      }
      pk.initial_units = pk.units;
      pk.initial_exponent = pk.exponent;
      per_knob_.push_back(pk);
    }
    dir_ = 1;
    measured_.insert(Key(incumbent_));
  }

  // The next candidate (advancing past moves that need no trial), or nullopt
  // when every knob is stuck.
  std::optional<KnobValues> Propose() {
    pending_pair_.reset();
    if (std::optional<Pair> pair = BestPair(); pair.has_value()) {
      pending_pair_ = pair->a;
      proposal_reason_ = pair->reason;
      return std::move(pair->values);
    }
    for (int i = 0; i < kProposeIterationLimit; ++i) {
      if (AllStuck()) return std::nullopt;
      PerKnob& pk = per_knob_[cursor_];
      if (pk.stuck) {
        Advance();
        continue;
      }
      const Axis& a = axes_[cursor_];
      const int64_t x = incumbent_.at(a.knob->parameter());
      const int64_t v = Move(cursor_, x, dir_);
      KnobValues cand = incumbent_;
      cand[a.knob->parameter()] = v;
      if (v == x || measured_.contains(Key(cand))) {
        Fail();
        continue;
      }
      proposal_reason_ =
          absl::StrCat(a.knob->parameter(), " ", x, " -> ", v, " (", dir_ > 0 ? "up" : "down", ")");
      return cand;
    }
    return std::nullopt;
  }

  // Records the result of the trial that followed `proposed` (nullopt when the
  // search had converged; the trial then only moves the incumbent).
  void Apply(const TrialResult& trial, bool had_proposal) {
    KnobValues measured = incumbent_;
    for (const Axis& a : axes_) {
      auto it = trial.knobs.find(a.knob->parameter());
      if (it != trial.knobs.end()) measured[a.knob->parameter()] = a.Snap(it->second);
    }
    measured_.insert(Key(measured));
    const bool pair = had_proposal && pending_pair_.has_value();
    if (pair) moves_[*pending_pair_].paired = true;
    if (TrialImproves(trial, min_improvement_)) {
      incumbent_ = std::move(measured);
      best_ratio_ *= *trial.objective_ratio;
      // Knobs interact (an ECN Kmax that did nothing at one Kmin can matter
      // at another): from the new incumbent every other knob is tried again
      // at no less than its first step, whatever its failures at the old one
      // had halved it to.
      for (size_t k = 0; k < per_knob_.size(); ++k) {
        PerKnob& pk = per_knob_[k];
        pk.stuck = false;
        if (!pair && had_proposal && k == cursor_) continue;
        pk.units = std::max(pk.units, pk.initial_units);
        pk.exponent = std::max(pk.exponent, pk.initial_exponent);
      }
      incumbent_ratios_ = LimitRatios(trial);
      moves_.clear();
      if (pair) {
        // A fresh visit of the current knob from the new incumbent.
        first_failed_ = false;
        dir_ = per_knob_[cursor_].last_dir;
      } else if (had_proposal) {
        PerKnob& pk = per_knob_[cursor_];
        if (axes_[cursor_].knob->log_scale()) {
          pk.exponent = std::min(pk.exponent * 2, kMaxExponent);
        } else {
          pk.units = std::min(pk.units * 2, axes_[cursor_].max_units);
        }
        pk.last_dir = dir_;
        // The opposite direction leads back towards the old incumbent, which
        // is known to be worse: a failure in this direction ends the visit.
        first_failed_ = true;
      }
      return;
    }
    if (pair) return;  // the sweep resumes where the pair interrupted it
    if (had_proposal) {
      RecordMove(measured, trial);
      Fail();
    }
  }

  const KnobValues& incumbent() const { return incumbent_; }
  double best_ratio() const { return best_ratio_; }
  const std::string& proposal_reason() const { return proposal_reason_; }

 private:
  struct PerKnob {
    int64_t units = 1;    // additive step, in Knob.step units
    double exponent = 1;  // log_scale step: factor 2^exponent
    int last_dir = 1;
    bool stuck = false;
    int64_t initial_units = 1;  // the step the search started with
    double initial_exponent = 1;
  };

  // A single-knob move measured from the current incumbent (not an
  // improvement, or it would be the incumbent).
  struct SingleMove {
    size_t knob = 0;
    int64_t value = 0;
    double objective_ratio = 1;
    double min_improvement = 0;            // the bar this move was measured against
    std::map<std::string, double> ratios;  // per Limit metric, when measured
    bool feasible = true;                  // constraints_ok
    bool strong_infeasible = false;        // improves strongly but breaks a Limit
    bool paired = false;                   // its pair move was tried
  };
  struct Pair {
    KnobValues values;
    size_t a = 0;  // index into moves_ of the constraint-breaking move
    std::string reason;
  };

  std::map<std::string, double> LimitRatios(const TrialResult& trial) const {
    std::map<std::string, double> out;
    for (const Limit& l : limits_) {
      auto it = trial.constraint_ratios.find(l.metric);
      if (it != trial.constraint_ratios.end() && UsableRatio(it->second)) {
        out[l.metric] = it->second;
      }
    }
    return out;
  }

  void RecordMove(const KnobValues& measured, const TrialResult& trial) {
    if (limits_.empty() || !trial.objective_ratio.has_value() ||
        !UsableRatio(*trial.objective_ratio)) {
      return;
    }
    std::optional<size_t> knob;
    for (size_t k = 0; k < axes_.size(); ++k) {
      const std::string& name = axes_[k].knob->parameter();
      if (measured.at(name) == incumbent_.at(name)) continue;
      if (knob.has_value()) return;  // more than one knob moved
      knob = k;
    }
    if (!knob.has_value()) return;
    SingleMove m;
    m.knob = *knob;
    m.value = measured.at(axes_[*knob].knob->parameter());
    m.objective_ratio = *trial.objective_ratio;
    m.min_improvement = trial.min_improvement.value_or(min_improvement_);
    m.ratios = LimitRatios(trial);
    m.feasible = trial.constraints_ok;
    if (!trial.constraints_ok && m.objective_ratio < 1 - m.min_improvement) {
      for (const Limit& l : limits_) {
        auto it = m.ratios.find(l.metric);
        if (it != m.ratios.end() && !l.tolerance.Within(it->second)) m.strong_infeasible = true;
      }
    }
    moves_.push_back(std::move(m));
  }

  // The most promising untried compensated pair, if any: a constraint-breaking
  // strong move `a` joined with a feasible move `b` on another knob from the
  // same incumbent, whose predicted objective improves and whose predicted
  // constraint ratios (a * b / incumbent per metric) are all within tolerance.
  // Best: the largest predicted worst margin, then the lowest predicted
  // objective, then the earliest moves.
  std::optional<Pair> BestPair() const {
    std::optional<Pair> best;
    double best_margin = 0, best_objective = 0;
    for (size_t a = 0; a < moves_.size(); ++a) {
      const SingleMove& ma = moves_[a];
      if (!ma.strong_infeasible || ma.paired) continue;
      for (size_t b = 0; b < moves_.size(); ++b) {
        const SingleMove& mb = moves_[b];
        if (!mb.feasible || mb.knob == ma.knob) continue;
        const double objective = ma.objective_ratio * mb.objective_ratio;
        // A pair must clear the higher of its two moves' bars.
        if (!(objective < 1 - std::max(ma.min_improvement, mb.min_improvement))) continue;
        double worst = std::numeric_limits<double>::infinity();
        std::string worst_metric;
        bool predictable = true;
        for (const Limit& l : limits_) {
          auto ra = ma.ratios.find(l.metric);
          if (ra == ma.ratios.end()) continue;
          auto rb = mb.ratios.find(l.metric);
          auto ri = incumbent_ratios_.find(l.metric);
          if (rb == mb.ratios.end() || ri == incumbent_ratios_.end()) {
            predictable = false;
            break;
          }
          const double m = l.Margin(ra->second * rb->second / ri->second);
          if (m < worst) {
            worst = m;
            worst_metric = l.metric;
          }
        }
        if (!predictable || !(worst >= 0) || std::isinf(worst)) continue;
        if (best.has_value() &&
            (worst < best_margin || (worst == best_margin && objective >= best_objective))) {
          continue;
        }
        KnobValues values = incumbent_;
        const std::string& name_a = axes_[ma.knob].knob->parameter();
        const std::string& name_b = axes_[mb.knob].knob->parameter();
        values[name_a] = ma.value;
        values[name_b] = mb.value;
        if (measured_.contains(Key(values))) continue;
        best_margin = worst;
        best_objective = objective;
        best = Pair{std::move(values), a,
                    absl::StrCat("pair: ", name_a, " ", incumbent_.at(name_a), " -> ", ma.value,
                                 " with ", name_b, " ", incumbent_.at(name_b), " -> ", mb.value,
                                 " (predicted ratio ", absl::SixDigits(objective), ", ",
                                 worst_metric, " margin ", absl::SixDigits(worst), ")")};
      }
    }
    return best;
  }

  std::vector<int64_t> Key(const KnobValues& values) const {
    std::vector<int64_t> key;
    key.reserve(axes_.size());
    for (const Axis& a : axes_) key.push_back(values.at(a.knob->parameter()));
    return key;
  }

  bool AllStuck() const {
    return std::all_of(per_knob_.begin(), per_knob_.end(),
                       [](const PerKnob& p) { return p.stuck; });
  }

  // Size of a move from x in direction dir, in steps (>= 1).
  int64_t MoveUnits(size_t k, int64_t x, int dir) const {
    const Axis& a = axes_[k];
    const PerKnob& pk = per_knob_[k];
    if (!a.knob->log_scale()) return pk.units;
    const double factor = std::exp2(pk.exponent);
    const double raw =
        dir > 0 ? static_cast<double>(x) * (factor - 1) : static_cast<double>(x) * (1 - 1 / factor);
    const double units = std::round(std::abs(raw) / static_cast<double>(a.step()));
    if (!(units >= 1)) return 1;
    return static_cast<int64_t>(std::min(units, static_cast<double>(a.max_units)));
  }

  int64_t Move(size_t k, int64_t x, int dir) const {
    const Axis& a = axes_[k];
    return std::clamp(x + dir * MoveUnits(k, x, dir) * a.step(), a.lo, a.hi);
  }

  bool AtSmallestStep(size_t k) const {
    const Axis& a = axes_[k];
    const PerKnob& pk = per_knob_[k];
    if (!a.knob->log_scale()) return pk.units <= 1;
    if (pk.exponent <= kMinExponent) return true;
    const int64_t x = incumbent_.at(a.knob->parameter());
    return MoveUnits(k, x, 1) <= 1 && MoveUnits(k, x, -1) <= 1;
  }

  // The current direction of the current knob did not improve.
  void Fail() {
    if (!first_failed_) {
      first_failed_ = true;
      dir_ = -dir_;
      return;
    }
    PerKnob& pk = per_knob_[cursor_];
    if (AtSmallestStep(cursor_)) {
      pk.stuck = true;
    } else if (axes_[cursor_].knob->log_scale()) {
      pk.exponent /= 2;
    } else {
      pk.units = std::max<int64_t>(1, pk.units / 2);
    }
    Advance();
  }

  void Advance() {
    cursor_ = (cursor_ + 1) % axes_.size();
    first_failed_ = false;
    dir_ = per_knob_[cursor_].last_dir;
  }

  double min_improvement_;
  std::vector<Limit> limits_;
  std::vector<Axis> axes_;
  std::vector<PerKnob> per_knob_;
  KnobValues incumbent_;
  double best_ratio_ = 1.0;
  size_t cursor_ = 0;
  int dir_ = 1;
  bool first_failed_ = false;
  std::set<std::vector<int64_t>> measured_;
  std::string proposal_reason_;
  // Compensated pairs: the incumbent's measured constraint ratios (empty when
  // the trial that made it lacked them), the single-knob moves measured from
  // it, and the move whose pair is the pending proposal.
  std::map<std::string, double> incumbent_ratios_;
  std::vector<SingleMove> moves_;
  std::optional<size_t> pending_pair_;
};

}  // namespace

int64_t KnobOrigin(const v1::Knob& knob, const KnobValues& start) {
  int64_t v = knob.min();
  if (auto it = start.find(knob.parameter()); it != start.end()) {
    v = it->second;
  } else if (knob.has_start()) {
    v = knob.start();
  } else if (const CcParamSpec* spec = FindCcParam(knob.parameter());
             spec != nullptr && spec->mlx5_default.has_value()) {
    v = *spec->mlx5_default;
  }
  return std::clamp(v, knob.min(), knob.max());
}

bool TrialImproves(const TrialResult& trial, double min_improvement) {
  if (trial.min_improvement.has_value()) min_improvement = *trial.min_improvement;
  return trial.constraints_ok && trial.objective_ratio.has_value() &&
         std::isfinite(*trial.objective_ratio) && *trial.objective_ratio >= 0 &&
         *trial.objective_ratio < 1 - min_improvement;
}

absl::Status ValidateKnobs(const v1::Policy& policy) {
  if (policy.knobs().empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("policy \"", policy.name(), "\": no knobs to tune"));
  }
  absl::flat_hash_set<std::string> seen;
  for (int i = 0; i < policy.knobs_size(); ++i) {
    const v1::Knob& k = policy.knobs(i);
    const std::string where =
        absl::StrCat("policy \"", policy.name(), "\" knobs[", i, "] (\"", k.parameter(), "\")");
    if (k.parameter().empty()) return absl::InvalidArgumentError(where + ": empty parameter");
    if (!seen.insert(k.parameter()).second) {
      return absl::InvalidArgumentError(where + ": parameter listed twice");
    }
    if (k.min() > k.max()) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": min ", k.min(), " > max ", k.max()));
    }
    if (std::abs(k.min()) > kMaxMagnitude || std::abs(k.max()) > kMaxMagnitude) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": bounds beyond +-2^53"));
    }
    if (k.step() <= 0) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": step ", k.step(), " <= 0"));
    }
    if (k.max_step() < 0) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": max_step ", k.max_step(), " < 0"));
    }
  }
  const double mi = policy.tuner().min_improvement();
  if (!(mi >= 0 && mi < 1)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "policy \"", policy.name(), "\": tuner.min_improvement ", mi, " outside [0, 1)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<CoordinateSearch>> CoordinateSearch::Create(const v1::Policy& policy,
                                                                           uint32_t budget) {
  if (absl::Status s = ValidateKnobs(policy); !s.ok()) return s;
  if (budget == 0) budget = policy.tuner().trial_budget();
  if (budget == 0) budget = kDefaultBudget;
  double mi = policy.tuner().min_improvement();
  if (mi == 0) mi = kDefaultMinImprovement;
  std::vector<v1::Knob> knobs(policy.knobs().begin(), policy.knobs().end());
  std::vector<v1::Constraint> constraints(policy.constraints().begin(), policy.constraints().end());
  return std::unique_ptr<CoordinateSearch>(
      new CoordinateSearch(std::move(knobs), std::move(constraints), budget, mi));
}

TunerDecision CoordinateSearch::Next(const KnobValues& start,
                                     const std::vector<TrialResult>& trials) {
  SearchState state(knobs_, constraints_, start, min_improvement_);
  const size_t used = std::min<size_t>(trials.size(), budget_);
  for (size_t i = 0; i < used; ++i) {
    const bool had_proposal = state.Propose().has_value();
    state.Apply(trials[i], had_proposal);
  }
  TunerDecision d;
  if (used >= budget_) {
    d.reason = absl::StrCat("budget spent (", budget_, " trials)");
  } else if (std::optional<KnobValues> next = state.Propose(); next.has_value()) {
    d.next = std::move(next);
    d.reason = absl::StrCat("trial ", used + 1, " of ", budget_, ": ", state.proposal_reason());
  } else {
    d.reason =
        absl::StrCat("converged after ", used, " trials: no knob improves at its smallest step");
  }
  d.best = state.incumbent();
  d.best_ratio = state.best_ratio();
  return d;
}

}  // namespace rocetune::controller
