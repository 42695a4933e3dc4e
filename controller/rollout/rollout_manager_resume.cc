// The rollout manager's bake resume: a step's baselines are persisted when
// the step starts (v1::StepBaseline, store table step_baselines), so a
// restarted controller resumes the bake instead of rolling the change back.
#include <map>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "controller/policy/policy_loader.h"
#include "controller/rollout/baseline_record.h"
#include "controller/rollout/rollout_manager.h"
#include "controller/rollout/rollout_util.h"
#include "daemon/logging.h"

namespace rocetune::controller {
namespace {

// Measured hosts that must have reported since the restart before a resumed
// bake starts again (the rest count as missing windows).
constexpr double kResumeReportedShare = 0.8;

}  // namespace

using rollout_util::Secs;

v1::StepBaseline RolloutManager::StepRecord(const std::string& change_id, uint32_t stage) const {
  StepBaselines b;
  b.stage = stage;
  auto step = steps_.find(change_id);
  if (step != steps_.end()) b.hosts = step->second.baseline;
  auto fleet = fleet_baselines_.find(change_id);
  if (fleet != fleet_baselines_.end()) b.fleet = fleet->second;
  return ToRecord(change_id, b);
}

std::map<std::string, v1::StepBaseline> RolloutManager::LoadStepRecords() {
  std::map<std::string, v1::StepBaseline> out;
  if (store_ == nullptr) return out;
  absl::StatusOr<std::vector<v1::StepBaseline>> records = store_->LoadStepBaselines();
  if (!records.ok()) {
    LogError("cannot load step baselines: changes found mid-bake are rolled back",
             {{"error", records.status().ToString()}});
    return out;
  }
  for (v1::StepBaseline& r : *records) out[r.change_id()] = std::move(r);
  return out;
}

bool RolloutManager::ResumeStep(v1::Change* c,
                                const std::map<std::string, v1::StepBaseline>& records) {
  auto it = records.find(c->id());
  if (it == records.end() || it->second.stage() != c->stage()) return false;
  absl::StatusOr<StepBaselines> b = FromRecord(it->second);
  if (!b.ok()) {
    LogError("cannot resume a change's bake",
             {{"change", c->id()}, {"error", b.status().ToString()}});
    return false;
  }
  const absl::Time now = clock_->Now();
  Step step;
  step.baseline = std::move(b->hosts);
  step.after_start = telemetry_->WindowStart(telemetry_->WindowIndex(now) + 1);
  step.resumed_at = now;
  step.resumed = true;
  steps_[c->id()] = std::move(step);
  if (!b->fleet.hosts.empty()) fleet_baselines_[c->id()] = std::move(b->fleet);
  v1::Change next = *c;
  next.set_hold_since_unix_nanos(0);
  const std::string reason = absl::StrCat(
      "the controller restarted during the bake of ",
      c->state() == v1::CANARY ? std::string("the canary") : absl::StrCat("stage ", c->stage()),
      ": resumed with the baseline persisted when the step started (",
      steps_[c->id()].baseline.size(),
      " hosts); the bake starts again once the hosts report, the gap counts as missing windows");
  // A transition to the same state records the resume in the change's history
  // (not counted as entering the state again).
  *next.add_transitions() = Transition(next, next.state(), "controller", reason);
  if (absl::Status s = Commit(&next, std::nullopt,
                              {MakeAudit("change_resumed", next, Identity{"controller", false},
                                         reason, absl::StrCat("stage ", c->stage()))},
                              {});
      !s.ok()) {
    LogError("cannot resume a change's bake", {{"change", c->id()}, {"error", s.ToString()}});
    steps_.erase(c->id());
    fleet_baselines_.erase(c->id());
    return false;
  }
  *c = next;
  LogInfo("change resumed", {{"change", c->id()}, {"stage", absl::StrCat(c->stage())}});
  Publish(*c, reason, 0);
  return true;
}

bool RolloutManager::AwaitResumedHosts(const v1::Change& c, Step* step, absl::Time now) {
  if (step->resumed_at == absl::InfinitePast()) return false;
  size_t reported = 0;
  for (const auto& [host, period] : step->baseline) {
    std::shared_ptr<HostTelemetry> t = telemetry_->Find(host);
    if (t != nullptr && t->last_report() > step->resumed_at) ++reported;
  }
  absl::StatusOr<v1::PolicyVersion> pv = policies_.Get(c.policy_name(), c.policy_version());
  const v1::Policy policy = WithDefaults(pv.ok() ? pv->policy() : v1::Policy());
  const bool enough = static_cast<double>(reported) >=
                      kResumeReportedShare * static_cast<double>(step->baseline.size());
  // Hosts that stay away do not hold the bake back for longer than the HOLD
  // limit: the judge then sees their windows missing.
  if (!enough && now - step->resumed_at <= Secs(policy.guard().max_hold_seconds())) return true;
  step->resumed_at = absl::InfinitePast();
  step->after_start = telemetry_->WindowStart(telemetry_->WindowIndex(now) + 1);
  LogInfo("resumed bake starts", {{"change", c.id()},
                                  {"hosts_reported", absl::StrCat(reported)},
                                  {"after_start", absl::FormatTime(step->after_start)}});
  return false;
}

}  // namespace rocetune::controller
