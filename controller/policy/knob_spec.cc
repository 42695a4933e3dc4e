#include "controller/policy/knob_spec.h"

#include "absl/strings/match.h"
#include "model/cc_params.h"
#include "model/switch_params.h"

namespace rocetune::controller {
namespace {

// Knobs outside the DCQCN table. pfc.prevention_timeout_ms is tuned inside the
// driver's numeric range only: its special values 0 (off) and 65535 (auto) are
// settings, not points on a scale a tuner can step through.
std::vector<KnobSpec> ExtraSpecs() {
  return {
      {kRpEnableMask, "bitmask", 0, 255},
      {kNpEnableMask, "bitmask", 0, 255},
      {"pfc.delay", "pfc_delay", 0, kPfcDelayMax},
      {"pfc.prevention_timeout_ms", "ms", kPfcPreventionMinMs, kPfcPreventionMaxMs},
  };
}

}  // namespace

std::vector<KnobSpec> KnobSpecs() {
  std::vector<KnobSpec> specs;
  for (const CcParamSpec& p : CcParamTable()) {
    specs.push_back({p.name, p.unit, p.min, p.max});
  }
  for (KnobSpec& s : ExtraSpecs()) specs.push_back(std::move(s));
  return specs;
}

std::optional<KnobSpec> FindKnobSpec(absl::string_view name) {
  if (const CcParamSpec* p = FindCcParam(name); p != nullptr) {
    return KnobSpec{p->name, p->unit, p->min, p->max};
  }
  for (KnobSpec& s : ExtraSpecs()) {
    if (s.name == name) return std::move(s);
  }
  if (absl::StatusOr<SwitchKnob> k = ParseSwitchKnob(name); k.ok()) {
    KnobSpec s{std::string(name), "bitmask", 0, 255, true};
    if (k->kind == SwitchKnob::Kind::kEcn) {
      const bool prob = absl::EndsWith(k->field, "_drop_probability");
      s.unit = prob ? "percent" : "bytes";
      s.min = prob ? 1 : 0;
      s.max = prob ? 100 : kMaxWredThresholdBytes;
    }
    return s;
  }
  return std::nullopt;
}

}  // namespace rocetune::controller
