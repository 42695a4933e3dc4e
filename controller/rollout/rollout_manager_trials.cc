// RolloutManager's side of tuning campaigns (controller/campaign): a trial
// is a canary-only change of this state machine, a promotion an ordinary
// proposal. The change state machine is in rollout_manager.cc.
#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "controller/policy/policy_loader.h"
#include "controller/rollout/rollout_manager.h"
#include "controller/rollout/rollout_util.h"

namespace rocetune::controller {

Knobs RolloutManager::CurrentKnobValues(const v1::Policy& policy,
                                        const std::vector<std::string>& hosts) const {
  Knobs out;
  for (const v1::Knob& k : policy.knobs()) {
    std::optional<int64_t> value;
    for (const std::string& id : hosts) {
      absl::StatusOr<StoredHost> h = fleet_->GetStored(id);
      if (!h.ok()) continue;
      const v1::ParameterSet previous = PreviousParameters(*h);
      for (const v1::DeviceParameters& d : previous.devices()) {
        auto it = d.dcqcn().find(k.parameter());
        if (it != d.dcqcn().end()) {
          value = it->second;
          break;
        }
      }
      if (value.has_value()) break;
    }
    if (!value.has_value()) value = k.has_start() ? k.start() : k.min();
    out[k.parameter()] = std::clamp(*value, k.min(), k.max());
  }
  return out;
}

absl::StatusOr<v1::PolicyVersion> RolloutManager::GetPolicyVersion(
    const std::string& name, const std::string& version) const {
  return policies_.Get(name, version);
}

absl::StatusOr<KnobValues> RolloutManager::StartValues(const v1::PolicyVersion& pv) const {
  const v1::Policy policy = WithDefaults(pv.policy());
  std::map<std::string, std::string> selector(policy.selector().match_labels().begin(),
                                              policy.selector().match_labels().end());
  std::vector<std::string> hosts = fleet_->Select(selector);
  std::sort(hosts.begin(), hosts.end());
  if (hosts.empty()) {
    return absl::FailedPreconditionError(absl::StrCat("policy ", pv.name(), " selects no host"));
  }
  return CurrentKnobValues(policy, WithRackSwitches(policy, hosts));
}

const v1::Change* RolloutManager::FindChange(const std::string& id) const { return Find(id); }

bool RolloutManager::TrialRunning(const std::string& campaign_id) const {
  for (const auto& [id, c] : changes_) {
    if (c.campaign_id() == campaign_id && Active(c) && c.canary_only()) return true;
  }
  return false;
}

void RolloutManager::AbortCampaignChanges(const std::string& campaign_id, const Identity& who,
                                          const std::string& reason) {
  for (auto& [id, c] : changes_) {
    if (c.campaign_id() == campaign_id && Active(c)) {
      Restore(&c, v1::ABORTED, who.name, who.authenticated, reason).IgnoreError();
    }
  }
}

absl::StatusOr<v1::Change> RolloutManager::BuildTrial(
    const v1::Campaign& t, const v1::PolicyVersion& policy, const KnobValues& knobs, uint32_t index,
    const std::string& reason, uint32_t bake_seconds, const std::string& fresh_from) {
  // Seeded by the campaign: every search trial of a campaign has the same
  // canary. A confirmation is planned under its own seed, away from the
  // canary members, then the control members, of the trial that found the
  // winner.
  std::string seed = t.id();
  PlanAvoid avoid;
  if (!fresh_from.empty()) {
    seed = absl::StrCat(t.id(), "/confirmation");
    if (const v1::Change* w = Find(fresh_from); w != nullptr) {
      for (const v1::HostTarget& h : w->hosts()) {
        if (h.role() == v1::HostTarget::CANARY) avoid[h.host_id()] = 2;
        if (h.role() == v1::HostTarget::CONTROL) avoid[h.host_id()] = 1;
      }
    }
  }
  absl::StatusOr<v1::Change> c =
      BuildChange(policy, knobs, Identity{t.proposer(), false}, reason, seed, avoid);
  if (!c.ok()) return c.status();
  const v1::Policy full = WithDefaults(policy.policy());
  bake_seconds = std::min(bake_seconds, MaxTrialBakeSeconds(policy));
  if (bake_seconds > full.rollout().bake_seconds()) c->set_bake_seconds(bake_seconds);
  c->set_id(NextChangeId());
  c->set_campaign_id(t.id());
  c->set_trial(index);
  c->set_canary_only(true);
  *c->mutable_approvals() = t.approvals();
  v1::ChangeTransition proposed = Transition(*c, v1::PROPOSED, "tuner", c->reason());
  proposed.set_from(v1::CHANGE_STATE_UNSPECIFIED);
  *c->add_transitions() = proposed;
  return c;
}

uint32_t RolloutManager::MaxTrialBakeSeconds(const v1::PolicyVersion& policy) const {
  // The bound the policy's own bake was checked against when it was applied:
  // bake + HOLD limit + one look interval + a window within --retention.
  const v1::Policy full = WithDefaults(policy.policy());
  const double looks = rollout_util::LooksOf(full);
  const double room =
      absl::ToDoubleSeconds(options_.retention - options_.window) - full.guard().max_hold_seconds();
  return room <= 0 ? 0 : static_cast<uint32_t>(std::floor(room / (1 + 1 / looks)));
}

absl::Status RolloutManager::CommitTrial(v1::Change c) {
  const std::map<std::string, int64_t> knobs(c.knobs().begin(), c.knobs().end());
  if (absl::Status s = Commit(&c,
                              Transition(c, v1::APPROVED, "tuner",
                                         absl::StrCat("inside campaign ", c.campaign_id(),
                                                      " approved by its approvers")),
                              {MakeAudit("trial_start", c, Identity{"tuner", false}, c.reason(),
                                         absl::StrJoin(knobs, ",", absl::PairFormatter("=")))},
                              {});
      !s.ok()) {
    return s;
  }
  if (metrics_ != nullptr) metrics_->RecordTransition(v1::PROPOSED);
  ++change_seq_;
  const std::string id = c.id();
  changes_[id] = std::move(c);
  return absl::OkStatus();
}

absl::StatusOr<std::string> RolloutManager::ProposePromotion(const v1::Campaign& t,
                                                             const KnobValues& knobs,
                                                             const std::string& reason) {
  v1::ProposeChangeRequest req;
  req.set_policy_name(t.policy_name());
  req.set_policy_version(t.policy_version());
  for (const auto& [k, v] : knobs) (*req.mutable_knobs())[k] = v;
  req.set_reason(reason);
  absl::StatusOr<v1::Change> c = Propose(req, Identity{t.proposer(), t.proposer_authenticated()});
  if (!c.ok()) return c.status();
  changes_[c->id()].set_campaign_id(t.id());
  return c->id();
}

std::string RolloutManager::RejectedBy(const std::string& policy_name,
                                       const KnobValues& knobs) const {
  // The newest such change. A judge FAIL or a guard (local, fleet, hard
  // limits) rejects the values; a NACK (the device could not take them) or
  // an operator's rollback does not.
  std::string found;
  for (const auto& [id, c] : changes_) {
    if (c.state() != v1::ROLLED_BACK || c.policy_name() != policy_name || c.verdicts_size() == 0) {
      continue;
    }
    const v1::Verdict& v = c.verdicts(c.verdicts_size() - 1);
    // Nor does a lease that expired: the host lost the controller, which
    // says nothing about the values.
    if (v.outcome() != v1::Verdict::FAIL || v.rule() == "nack" || v.rule() == "lease_expired") {
      continue;
    }
    if (KnobValues(c.knobs().begin(), c.knobs().end()) != knobs) continue;
    if (found.empty() || rollout_util::IdNumber(id) > rollout_util::IdNumber(found)) found = id;
  }
  return found;
}

void RolloutManager::PersistChange(const std::string& id) {
  v1::Change* c = Find(id);
  if (c != nullptr) Commit(c, std::nullopt, {}, {}).IgnoreError();
}

void RolloutManager::EndTrial(v1::Change* c, bool failed, const std::string& reason) {
  Restore(c, failed ? v1::ROLLED_BACK : v1::DONE, "controller", false, reason).IgnoreError();
}

}  // namespace rocetune::controller
