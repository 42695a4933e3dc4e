#include "controller/tuner/coordinate_search.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <set>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "agent/host/cc_params.h"

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

// The replayed search.
class SearchState {
 public:
  SearchState(const std::vector<v1::Knob>& knobs, const KnobValues& start, double min_improvement)
      : min_improvement_(min_improvement), incumbent_(start) {
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
      per_knob_.push_back(pk);
    }
    dir_ = 1;
    measured_.insert(Key(incumbent_));
  }

  // The next candidate (advancing past moves that need no trial), or nullopt
  // when every knob is stuck.
  std::optional<KnobValues> Propose() {
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
    if (TrialImproves(trial, min_improvement_)) {
      incumbent_ = std::move(measured);
      best_ratio_ *= *trial.objective_ratio;
      for (PerKnob& pk : per_knob_) pk.stuck = false;
      if (had_proposal) {
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
    if (had_proposal) Fail();
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
  };

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
  std::vector<Axis> axes_;
  std::vector<PerKnob> per_knob_;
  KnobValues incumbent_;
  double best_ratio_ = 1.0;
  size_t cursor_ = 0;
  int dir_ = 1;
  bool first_failed_ = false;
  std::set<std::vector<int64_t>> measured_;
  std::string proposal_reason_;
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
  return std::unique_ptr<CoordinateSearch>(new CoordinateSearch(std::move(knobs), budget, mi));
}

TunerDecision CoordinateSearch::Next(const KnobValues& start,
                                     const std::vector<TrialResult>& trials) {
  SearchState state(knobs_, start, min_improvement_);
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
