#include "controller/tuner/rehearsal.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "model/cc_params.h"
#include "model/switch_params.h"
#include "sim/dcqcn_config.h"
#include "sim/fabric.h"
#include "sim/summary.h"

namespace rocetune::controller {
namespace {

constexpr double kMaxThroughputLoss = 0.05;

// Sets a switch ECN knob (ecn.<profile>.green_{min,max}_threshold in bytes,
// ecn.<profile>.green_drop_probability in percent) on the scenario's switches:
// the simulator has one lossless queue profile, so the profile name selects
// nothing. Other colours and pfc.<port>.pfc_enable are not modelled.
absl::Status SetSwitchValue(v1::EcnSettings* ecn, const std::string& name, int64_t value) {
  absl::StatusOr<SwitchKnob> k = ParseSwitchKnob(name);
  if (!k.ok()) return k.status();
  if (k->kind != SwitchKnob::Kind::kEcn) {
    return absl::InvalidArgumentError(
        absl::StrCat("\"", name, "\": the rehearsal simulates ECN thresholds, not per-port PFC"));
  }
  if (k->field == "green_min_threshold" || k->field == "green_max_threshold") {
    if (value < 0 || value > kMaxWredThresholdBytes) {
      return absl::InvalidArgumentError(absl::StrCat(
          "\"", name, "\" = ", value, ": want bytes in [0, ", kMaxWredThresholdBytes, "]"));
    }
    if (k->field == "green_min_threshold") {
      ecn->set_kmin_bytes(static_cast<uint64_t>(value));
    } else {
      ecn->set_kmax_bytes(static_cast<uint64_t>(value));
    }
    return absl::OkStatus();
  }
  if (k->field == "green_drop_probability") {
    if (value <= 0 || value > 100) {
      return absl::InvalidArgumentError(
          absl::StrCat("\"", name, "\" = ", value, ": want a percentage in (0, 100]"));
    }
    ecn->set_pmax(static_cast<double>(value) / 100);
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "\"", name, "\": the rehearsal simulates the green colour only (one lossless class)"));
}

}  // namespace

absl::StatusOr<sim::SimSummary> SimulateWithKnobs(const v1::Scenario& scenario,
                                                  const std::map<std::string, int64_t>& knobs,
                                                  const SimulationStop& stop) {
  v1::Scenario s = scenario;
  // The DCQCN enables (bit p = priority p), set on every host once the fabric exists.
  uint8_t masks[2] = {0xff, 0xff};  // reaction point, notification point
  for (const auto& [name, value] : knobs) {
    if (name == kRpEnableMask || name == kNpEnableMask) {
      if (value < 0 || value > 0xff) {
        return absl::InvalidArgumentError(absl::StrCat("rehearsal of \"", scenario.name(),
                                                       "\": knob \"", name, "\" = ", value,
                                                       ": want a priority mask in [0, 255]"));
      }
      masks[name == kRpEnableMask ? 0 : 1] = static_cast<uint8_t>(value);
      continue;
    }
    const absl::Status st = absl::StartsWith(name, "ecn.")
                                ? SetSwitchValue(s.mutable_ecn(), name, value)
                                : sim::SetDcqcnValue(s.mutable_dcqcn(), name, value);
    if (!st.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("rehearsal of \"", scenario.name(), "\": knob ", st.message()));
    }
  }
  if (s.ecn().kmin_bytes() > s.ecn().kmax_bytes()) {
    return absl::InvalidArgumentError(absl::StrCat("rehearsal of \"", scenario.name(),
                                                   "\": ECN Kmin ", s.ecn().kmin_bytes(),
                                                   " is above Kmax ", s.ecn().kmax_bytes()));
  }
  absl::StatusOr<std::unique_ptr<sim::Fabric>> fabric = sim::Fabric::Create(s);
  if (!fabric.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("rehearsal of \"", scenario.name(), "\": ", fabric.status().message()));
  }
  for (int h = 0; h < (*fabric)->host_count(); ++h) {
    (*fabric)->SetHostEnableMasks(h, masks[0], masks[1]);
  }
  constexpr int64_t kSliceNs = 1'000'000;  // 1 ms of simulated time
  while (!(*fabric)->done()) {
    (*fabric)->RunUntil(std::min((*fabric)->now_ns() + kSliceNs, (*fabric)->end_ns()));
    if (!stop) continue;
    if (absl::Status s = stop(); !s.ok()) {
      return absl::Status(
          s.code(), absl::StrCat("rehearsal of \"", scenario.name(), "\" stopped at ",
                                 (*fabric)->now_ns() / 1'000'000, " of ",
                                 (*fabric)->end_ns() / 1'000'000, " simulated ms: ", s.message()));
    }
  }
  return (*fabric)->Summary(0);
}

absl::StatusOr<v1::RehearsalResult> RehearseScenario(const v1::Scenario& scenario,
                                                     const std::map<std::string, int64_t>& knobs,
                                                     const SimulationStop& stop) {
  if (!(scenario.probe().interval_us() > 0)) {
    return absl::InvalidArgumentError(absl::StrCat("scenario \"", scenario.name(),
                                                   "\" sends no latency probes "
                                                   "(probe.interval_us is 0): no p99 to predict"));
  }
  absl::StatusOr<sim::SimSummary> summary = SimulateWithKnobs(scenario, knobs, stop);
  if (!summary.ok()) return summary.status();
  const sim::SimSummary& sum = *summary;
  const int hosts = static_cast<int>(scenario.topology().hosts());
  const double measured_s = sum.measured_seconds;
  if (!(measured_s > 0) || sum.probe_rtt_us.count == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "rehearsal of \"", scenario.name(), "\": no measured probes (measured ", measured_s,
        " s, duration_ms ", scenario.duration_ms(), ", warmup_ms ", scenario.warmup_ms(), ")"));
  }
  return SummaryFigures(sum, hosts);
}

v1::RehearsalResult SummaryFigures(const sim::SimSummary& sum, int hosts) {
  const double measured_s = sum.measured_seconds;
  double worst_paused_us = 0;
  for (const sim::SimSummary::Link& l : sum.links) {
    worst_paused_us = std::max(worst_paused_us, l.paused_us);
  }
  v1::RehearsalResult r;
  if (hosts <= 0 || !(measured_s > 0)) return r;
  r.set_probe_p99_seconds(sum.probe_rtt_us.p99 * 1e-6);
  r.set_probe_p999_seconds(sum.probe_rtt_us.p999 * 1e-6);
  r.set_throughput_gbps(sum.delivered_gbps / hosts);
  r.set_cnp_per_second(static_cast<double>(sum.cnp_sent) / measured_s / hosts);
  r.set_pfc_pause_ratio(std::min(1.0, worst_paused_us * 1e-6 / measured_s));
  r.set_step_time_seconds(sum.allreduce_step_us.count > 0 ? sum.allreduce_step_us.p99 * 1e-6 : 0);
  r.set_incast_burst_seconds(sum.incast_burst_us.count > 0 ? sum.incast_burst_us.p99 * 1e-6 : 0);
  return r;
}

std::string RehearsalRegression(const v1::RehearsalResult& current,
                                const v1::RehearsalResult& proposed, double tolerance) {
  std::vector<std::string> reasons;
  auto worse = [&](const char* what, double cur, double prop) {
    if (!(cur > 0)) return;
    if (!(prop > 0)) {
      // The same scenario, and none completed with the proposed values.
      reasons.push_back(absl::StrCat(what, ": none completed with the proposed values"));
      return;
    }
    if (!(prop > cur * (1 + tolerance))) return;
    reasons.push_back(absl::StrFormat("%s p99 %+.1f%% (beyond %.1f%%)", what,
                                      100 * (prop / cur - 1), 100 * tolerance));
  };
  worse("probe RTT", current.probe_p99_seconds(), proposed.probe_p99_seconds());
  worse("all-reduce step", current.step_time_seconds(), proposed.step_time_seconds());
  worse("incast burst", current.incast_burst_seconds(), proposed.incast_burst_seconds());
  if (current.throughput_gbps() > 0 &&
      proposed.throughput_gbps() < current.throughput_gbps() * (1 - kMaxThroughputLoss)) {
    reasons.push_back(
        absl::StrFormat("throughput %+.1f%% (beyond -%.0f%%)",
                        100 * (proposed.throughput_gbps() / current.throughput_gbps() - 1),
                        100 * kMaxThroughputLoss));
  }
  return absl::StrJoin(reasons, "; ");
}

absl::StatusOr<v1::Rehearsal> Rehearse(const v1::Scenario& scenario, const std::string& name,
                                       const std::map<std::string, int64_t>& current,
                                       const std::map<std::string, int64_t>& proposed,
                                       double tolerance, const SimulationStop& stop) {
  if (!(tolerance >= 0) || !std::isfinite(tolerance)) {
    return absl::InvalidArgumentError(
        absl::StrCat("rehearsal tolerance ", tolerance, " is not a finite value >= 0"));
  }
  absl::StatusOr<v1::RehearsalResult> cur = RehearseScenario(scenario, current, stop);
  if (!cur.ok()) return cur.status();
  absl::StatusOr<v1::RehearsalResult> prop = RehearseScenario(scenario, proposed, stop);
  if (!prop.ok()) return prop.status();
  v1::Rehearsal out;
  out.set_scenario(name.empty() ? scenario.name() : name);
  *out.mutable_current() = *cur;
  *out.mutable_proposed() = *prop;
  out.set_regression_reason(RehearsalRegression(*cur, *prop, tolerance));
  out.set_regression(!out.regression_reason().empty());
  out.set_unix_nanos(absl::ToUnixNanos(absl::Now()));
  return out;
}

}  // namespace rocetune::controller
