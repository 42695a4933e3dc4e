#include "controller/rollout/baseline_record.h"

#include <cmath>
#include <iterator>

#include "absl/strings/str_cat.h"

namespace rocetune::controller {
namespace {

v1::HostPeriodRecord Encode(const std::string& host_id, const HostPeriod& p) {
  v1::HostPeriodRecord r;
  r.set_host_id(host_id);
  if (!p.rtt.empty()) p.rtt.ToProto(r.mutable_rtt());
  if (!p.job.empty()) p.job.ToProto(r.mutable_job());
  r.set_probes_sent(p.probes_sent);
  r.set_probes_lost(p.probes_lost);
  r.set_windows_present(p.windows_present);
  r.set_windows_expected(p.windows_expected);
  r.set_covered_seconds(p.covered_seconds);
  r.set_cnp(p.cnp);
  r.set_retransmits(p.retransmits);
  r.set_tx_bytes(p.tx_bytes);
  // Trailing zero priorities are left out.
  int last = 7;
  while (last >= 0 && p.pause_us[last] == 0) --last;
  for (int i = 0; i <= last; ++i) r.add_pause_us(p.pause_us[i]);
  return r;
}

absl::Status Decode(const std::string& change_id, const v1::HostPeriodRecord& r,
                    std::map<std::string, HostPeriod>* out) {
  const std::string where =
      absl::StrCat("step baseline of change ", change_id, ", host \"", r.host_id(), "\": ");
  if (r.host_id().empty()) return absl::DataLossError(absl::StrCat(where, "no host id"));
  if (r.pause_us_size() > 8) {
    return absl::DataLossError(
        absl::StrCat(where, r.pause_us_size(), " pause priorities (at most 8)"));
  }
  HostPeriod p;
  if (r.has_rtt()) {
    absl::StatusOr<QuantileSketch> sketch = QuantileSketch::FromProto(r.rtt());
    if (!sketch.ok()) {
      return absl::DataLossError(absl::StrCat(where, "rtt sketch: ", sketch.status().message()));
    }
    p.rtt = *std::move(sketch);
  }
  if (r.has_job()) {
    absl::StatusOr<QuantileSketch> sketch = QuantileSketch::FromProto(r.job());
    if (!sketch.ok()) {
      return absl::DataLossError(absl::StrCat(where, "job sketch: ", sketch.status().message()));
    }
    p.job = *std::move(sketch);
  }
  p.probes_sent = r.probes_sent();
  p.probes_lost = r.probes_lost();
  p.windows_present = r.windows_present();
  p.windows_expected = r.windows_expected();
  p.covered_seconds = r.covered_seconds();
  p.cnp = r.cnp();
  p.retransmits = r.retransmits();
  p.tx_bytes = r.tx_bytes();
  for (int i = 0; i < r.pause_us_size(); ++i) p.pause_us[i] = r.pause_us(i);
  (*out)[r.host_id()] = std::move(p);
  return absl::OkStatus();
}

}  // namespace

v1::StepBaseline ToRecord(const std::string& change_id, const StepBaselines& b) {
  v1::StepBaseline r;
  r.set_change_id(change_id);
  r.set_stage(b.stage);
  for (const auto& [id, p] : b.hosts) *r.add_hosts() = Encode(id, p);
  for (const auto& [id, p] : b.fleet.hosts) *r.add_fleet() = Encode(id, p);
  if (!b.fleet.rtt.empty()) b.fleet.rtt.ToProto(r.mutable_fleet_rtt());
  if (b.fleet.spread.metrics_size() > 0) *r.mutable_fleet_spread() = b.fleet.spread;
  r.set_fleet_other_metric(b.fleet.other_metric);
  if (!b.fleet.other.empty()) b.fleet.other.ToProto(r.mutable_fleet_other());
  return r;
}

absl::StatusOr<StepBaselines> FromRecord(const v1::StepBaseline& record) {
  StepBaselines b;
  b.stage = record.stage();
  for (const v1::HostPeriodRecord& r : record.hosts()) {
    if (absl::Status s = Decode(record.change_id(), r, &b.hosts); !s.ok()) return s;
  }
  for (const v1::HostPeriodRecord& r : record.fleet()) {
    if (absl::Status s = Decode(record.change_id(), r, &b.fleet.hosts); !s.ok()) return s;
  }
  if (record.has_fleet_rtt()) {
    absl::StatusOr<QuantileSketch> sketch = QuantileSketch::FromProto(record.fleet_rtt());
    if (!sketch.ok()) {
      return absl::DataLossError(absl::StrCat("step baseline of ", record.change_id(),
                                              ": fleet rtt sketch: ", sketch.status().message()));
    }
    b.fleet.rtt = *std::move(sketch);
  }
  b.fleet.other_metric = record.fleet_other_metric();
  if (record.has_fleet_other()) {
    absl::StatusOr<QuantileSketch> sketch = QuantileSketch::FromProto(record.fleet_other());
    if (!sketch.ok()) {
      return absl::DataLossError(absl::StrCat("step baseline of ", record.change_id(), ": fleet ",
                                              record.fleet_other_metric(),
                                              " sketch: ", sketch.status().message()));
    }
    b.fleet.other = *std::move(sketch);
  }
  for (const v1::FleetSpread::Metric& m : record.fleet_spread().metrics()) {
    if (!std::isfinite(m.rms_ln_ratio()) || m.rms_ln_ratio() < 0) {
      return absl::DataLossError(absl::StrCat("step baseline of ", record.change_id(),
                                              ": fleet spread of ", m.metric(), ": rms ln ratio ",
                                              m.rms_ln_ratio(), " is not a finite value >= 0"));
    }
  }
  b.fleet.spread = record.fleet_spread();
  return b;
}

}  // namespace rocetune::controller
