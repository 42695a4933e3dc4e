#include "controller/rollout/rollout_manager.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <set>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "controller/audit/audit_values.h"
#include "controller/fleet/inventory_check.h"
#include "controller/policy/policy_loader.h"
#include "controller/rollout/judge_inputs.h"
#include "controller/rollout/rollout_util.h"
#include "controller/rollout/switch_plan.h"
#include "controller/tuner/tuner.h"
#include "daemon/logging.h"
#include "google/protobuf/util/message_differencer.h"
#include "model/in_effect.h"

namespace rocetune::controller {
using rollout_util::IdNumber;
using rollout_util::InFlight;
using rollout_util::IsActiveState;
using rollout_util::LooksOf;
using rollout_util::RunsChangeAt;
using rollout_util::Secs;
using rollout_util::StageCount;
using rollout_util::StateName;

RolloutManager::RolloutManager(Fleet* fleet, TelemetryStore* telemetry, Store* store,
                               EventBus* events, Clock* clock, RolloutOptions options,
                               ControlLoop* loop)
    : fleet_(fleet),
      telemetry_(telemetry),
      store_(store),
      events_(events),
      clock_(clock),
      options_(options),
      evaluator_(telemetry, std::min(absl::Milliseconds(500), options.window / 2)),
      campaigns_(this, store, events, clock, options.window, options.campaign_trial_wait),
      own_loop_(loop == nullptr ? std::make_unique<ControlLoop>(store) : nullptr),
      loop_(loop != nullptr ? loop : own_loop_.get()) {}

RolloutManager::~RolloutManager() { Stop(); }

void RolloutManager::Start() {
  fleet_->SetListener(this);
  fleet_->SetObserveOnlyCheck(
      [this](const std::string& host_id) { return IsObserveOnly(host_id); });
  if (options_.tick <= absl::ZeroDuration()) return;
  ticker_ = std::thread([this] {
    while (!stop_.WaitForNotificationWithTimeout(options_.tick)) PostTick();
  });
}

bool RolloutManager::PostTick() {
  // Ticks coalesce: while one is queued, another adds nothing but delay for
  // what is queued behind it (a slow tick must not build a backlog).
  if (tick_pending_.exchange(true)) {
    ticks_coalesced_.fetch_add(1);
    return false;
  }
  if (!loop_->Post([this] {
        tick_pending_.store(false);
        Tick();
      })) {
    tick_pending_.store(false);
    return false;
  }
  return true;
}

void RolloutManager::Stop() {
  if (!stop_.HasBeenNotified()) stop_.Notify();
  if (ticker_.joinable()) ticker_.join();
  // The controller's loop is drained by the controller (before this).
  if (own_loop_ != nullptr) own_loop_->Stop();
  fleet_->SetListener(nullptr);
  fleet_->SetObserveOnlyCheck(nullptr);
}

absl::Status RolloutManager::Load() {
  absl::Status result;
  loop_->RunSync([&] {
    if (store_ == nullptr) return;
    absl::StatusOr<std::vector<v1::PolicyVersion>> versions = store_->ListPolicyVersions();
    if (!versions.ok()) {
      result = versions.status();
      return;
    }
    for (v1::PolicyVersion& v : *versions) {
      bool created = false;
      policies_.Add(std::move(v), &created);
    }
    RefreshObserveOnly();
    absl::StatusOr<std::vector<v1::Change>> changes = store_->LoadChanges();
    if (!changes.ok()) {
      result = changes.status();
      return;
    }
    for (v1::Change& c : *changes) {
      change_seq_ = std::max(change_seq_, IdNumber(c.id()));
      IndexHosts(c);
      changes_[c.id()] = std::move(c);
    }
    if (absl::Status s = campaigns_.Load(); !s.ok()) {
      result = s;
      return;
    }
    const std::map<std::string, v1::StepBaseline> records = LoadStepRecords();
    for (auto& [id, c] : changes_) {
      if (!InFlight(c.state())) continue;
      const std::string reason =
          "the controller restarted during the bake and found no usable baseline persisted for "
          "the step, so the change is rolled back";
      if (c.canary_only()) {
        campaigns_.TrialFinished(&c, /*restarted=*/true);
        continue;
      }
      if (ResumeStep(&c, records)) continue;
      if (absl::Status s = Restore(&c, v1::ROLLED_BACK, "controller", false, reason); !s.ok()) {
        LogError("cannot roll back a change after restart",
                 {{"change", id}, {"error", s.ToString()}});
      } else if (metrics_ != nullptr) {
        metrics_->RecordRollback(RollbackReason::kRestart);
      }
    }
    if (metrics_ != nullptr) metrics_->Refresh(changes_, clock_->Now());
  });
  return result;
}

// ---------------------------------------------------------------- helpers

absl::Duration RolloutManager::ReportGrace() const {
  return std::min(absl::Milliseconds(500), options_.window / 2);
}

v1::Change* RolloutManager::Find(const std::string& id) {
  auto it = changes_.find(id);
  return it == changes_.end() ? nullptr : &it->second;
}

const v1::Change* RolloutManager::Find(const std::string& id) const {
  auto it = changes_.find(id);
  return it == changes_.end() ? nullptr : &it->second;
}

bool RolloutManager::Active(const v1::Change& c) const { return IsActiveState(c.state()); }

std::string RolloutManager::NextChangeId() const { return absl::StrCat("c-", change_seq_ + 1); }

std::string RolloutManager::ActiveChangeOf(const std::string& host_id) const {
  absl::MutexLock lock(&index_mu_);
  auto it = active_by_host_.find(host_id);
  return it == active_by_host_.end() ? "" : it->second;
}

void RolloutManager::IndexHosts(const v1::Change& c) {
  absl::MutexLock lock(&index_mu_);
  const bool active = IsActiveState(c.state());
  for (const v1::HostTarget& h : c.hosts()) {
    auto it = active_by_host_.find(h.host_id());
    if (active) {
      active_by_host_[h.host_id()] = c.id();
      // An earlier change's restore stays tracked until this one pushes.
      if (!h.pushed_version().empty()) unacked_by_host_.erase(h.host_id());
      continue;
    }
    const bool other_active = it != active_by_host_.end() && it->second != c.id();
    if (it != active_by_host_.end() && !other_active) active_by_host_.erase(it);
    auto unacked = unacked_by_host_.find(h.host_id());
    if (!h.pushed_version().empty() && h.acked_version() != h.pushed_version()) {
      if (!other_active) unacked_by_host_[h.host_id()] = c.id();
    } else if (unacked != unacked_by_host_.end() && unacked->second == c.id()) {
      unacked_by_host_.erase(unacked);
    }
  }
}

v1::ChangeTransition RolloutManager::Transition(const v1::Change& c, v1::ChangeState to,
                                                const std::string& actor,
                                                const std::string& reason) const {
  v1::ChangeTransition t;
  t.set_from(c.state());
  t.set_to(to);
  t.set_unix_nanos(absl::ToUnixNanos(clock_->Now()));
  t.set_actor(actor);
  t.set_reason(reason);
  t.set_stage(c.stage());
  return t;
}

v1::AuditEntry RolloutManager::MakeAudit(const std::string& action, const v1::Change& c,
                                         const Identity& who, const std::string& reason,
                                         const std::string& detail) const {
  v1::AuditEntry a;
  a.set_unix_nanos(absl::ToUnixNanos(clock_->Now()));
  a.set_actor(who.name);
  a.set_authenticated(who.authenticated);
  a.set_action(action);
  a.set_subject(c.id());
  a.set_change_id(c.id());
  a.set_reason(reason);
  a.set_detail(detail);
  return a;
}

void RolloutManager::Publish(const v1::Change& c, const std::string& detail, double progress) {
  if (events_ == nullptr) return;
  v1::Event e;
  e.set_unix_nanos(absl::ToUnixNanos(clock_->Now()));
  e.set_kind("change");
  e.set_subject(c.id());
  e.set_change_id(c.id());
  e.set_state(c.state());
  e.set_stage(c.stage());
  e.set_progress(progress);
  e.set_detail(detail);
  events_->Publish(e);
}

absl::Status RolloutManager::Commit(v1::Change* change,
                                    std::optional<v1::ChangeTransition> transition,
                                    std::vector<v1::AuditEntry> audit,
                                    const std::vector<DesiredUpdate>& updates,
                                    const v1::StepBaseline* step_baseline) {
  v1::Change next = *change;
  if (transition.has_value()) {
    next.set_state(transition->to());
    *next.add_transitions() = *transition;
  }
  // Runs inside Fleet::UpdateDesiredStates with the fleet's decision; it
  // reads the fleet only through `d`.
  auto persist = [&](const DesiredDecision& d) -> absl::Status {
    std::vector<v1::ValueChange> values;
    for (const StoredHost& h : d.next) {
      for (v1::ValueChange& v : DiffParameterSets(
               h.info.host_id(), PreviousParameters(d.before.at(h.info.host_id())), h.desired)) {
        values.push_back(std::move(v));
      }
    }
    for (v1::HostTarget& t : *next.mutable_hosts()) {
      auto it = d.versions.find(t.host_id());
      if (it != d.versions.end() && t.pushed_version() != it->second) {
        t.set_pushed_version(it->second);
        t.clear_not_in_effect();  // they described the version pushed before
      }
    }
    if (!audit.empty()) {
      for (const DesiredUpdate& u : updates) audit.front().add_host_ids(u.host_id);
      for (v1::ValueChange& v : values) *audit.front().add_values() = std::move(v);
    }
    if (store_ == nullptr) return absl::OkStatus();
    Store::Batch batch;
    batch.hosts = d.next;
    batch.changes.push_back(next);
    batch.audit = audit;
    if (step_baseline != nullptr) batch.step_baselines.push_back(*step_baseline);
    return store_->Commit(batch);
  };
  absl::Status status;
  if (updates.empty()) {
    status = persist(DesiredDecision{});
  } else {
    status = fleet_->UpdateDesiredStates(updates, persist).status();
  }
  if (!status.ok()) return status;
  *change = std::move(next);
  if (!change->id().empty()) IndexHosts(*change);
  if (metrics_ != nullptr && transition.has_value()) metrics_->RecordTransition(transition->to());
  return absl::OkStatus();
}

// ---------------------------------------------------------------- policies

namespace {

// A policy applied by an older controller may hold an objective this one no
// longer accepts (validated when it was applied, under older rules): refused
// at proposal, saying what to do, rather than judged as something else.
absl::Status CheckObjectiveStillValid(const v1::PolicyVersion& pv, const std::string& label) {
  const v1::Objective& o = pv.policy().objective();
  const std::string which = absl::StrCat("policy ", pv.name(), " version ", pv.sequence());
  // Applied before the validator knew the probe classes, or under another
  // --probe_locality_label: its objective would read no probes.
  if (!o.peer_class().empty() && o.metric() != v1::Objective::STEP_TIME_P99 &&
      !KnownProbePeerClass(o.peer_class(), label)) {
    return absl::FailedPreconditionError(absl::StrCat(
        which, ": objective.peer_class \"", o.peer_class(),
        "\" is not a class the probes report (the controller's --probe_locality_label is ", label,
        ": intra_", label, " or inter_", label, "); apply the policy again with one of them"));
  }
  if (o.metric() == v1::Objective::PROBE_RTT_P999) {
    return absl::FailedPreconditionError(absl::StrCat(
        which,
        ": objective PROBE_RTT_P999 is not judged (the judge decides on the p99); apply "
        "the policy again with PROBE_RTT_P99"));
  }
  const bool reads_job =
      o.metric() == v1::Objective::STEP_TIME_P99 ||
      std::any_of(pv.policy().constraints().begin(), pv.policy().constraints().end(),
                  [](const v1::Constraint& c) { return c.metric() == "step_time_p99"; });
  for (const v1::Constraint& c : pv.policy().constraints()) {
    if ((c.metric() == "probe_rtt_p99" || c.metric() == "step_time_p99") &&
        (c.has_min() || c.has_max())) {
      return absl::FailedPreconditionError(absl::StrCat(
          which, ": its ", c.metric(),
          " constraint has min or max, which nothing checks at a stage with no control left; "
          "apply it again with max_ratio only (docs/policies.md)"));
    }
  }
  if (reads_job && o.op().empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        which,
        " reads the job signal (STEP_TIME_P99 or a step_time_p99 constraint) but names no "
        "objective.op: apply it again with objective.op, e.g. \"step\" (docs/policies.md)"));
  }
  return absl::OkStatus();
}

// For a switch's device (named "switch", agent/switch/switch_inventory.h):
// lowers context->min_switch_buffer_bytes to its buffer and returns true.
bool AddSwitchContext(const v1::NicDevice& d, PolicyContext* context) {
  if (d.name() != "switch") return false;
  const int64_t buffer = static_cast<int64_t>(d.switch_buffer_bytes());
  if (buffer > 0 && (!context->min_switch_buffer_bytes.has_value() ||
                     buffer < *context->min_switch_buffer_bytes)) {
    context->min_switch_buffer_bytes = buffer;
  }
  return true;
}

}  // namespace

absl::StatusOr<v1::ApplyPolicyResponse> RolloutManager::ApplyPolicy(
    const v1::ApplyPolicyRequest& req, const Identity& who) {
  const std::string file = req.file_name().empty() ? "<policy>" : req.file_name();
  absl::StatusOr<PolicyFile> parsed = PolicyFile::Parse(req.text(), file);
  if (!parsed.ok()) return parsed.status();
  PolicyContext context;
  context.probe_locality_label = options_.probe_locality_label;
  std::map<std::string, std::string> selector(parsed->policy().selector().match_labels().begin(),
                                              parsed->policy().selector().match_labels().end());
  for (const v1::HostInfo& h : fleet_->ListHosts(selector)) {
    for (const v1::NicDevice& d : h.devices()) {
      if (AddSwitchContext(d, &context)) continue;  // a switch's ports are not host links
      for (const v1::NicPort& p : d.ports()) {
        if (p.speed_mbps() == 0) continue;
        if (!context.min_link_speed_mbps.has_value() ||
            p.speed_mbps() < *context.min_link_speed_mbps) {
          context.min_link_speed_mbps = p.speed_mbps();
        }
      }
    }
  }
  if (absl::Status s = ErrorsToStatus(parsed->Validate(context)); !s.ok()) return s;
  const v1::Policy full = WithDefaults(parsed->policy());
  const absl::Duration window = options_.window;
  if (Secs(full.rollout().baseline_seconds()) + window > options_.retention ||
      Secs(full.rollout().bake_seconds()) + window > options_.retention) {
    return absl::FailedPreconditionError(
        absl::StrCat(file, ": rollout.baseline_seconds (", full.rollout().baseline_seconds(),
                     ") and rollout.bake_seconds (", full.rollout().bake_seconds(),
                     ") must each fit in the controller's --retention (",
                     absl::FormatDuration(options_.retention), ") less one --window"));
  }
  // A look while a HOLD lasts reads the step's whole bake so far: the bake and
  // the HOLD limit together must still be in telemetry, or every host would
  // drop out of the hold looks for missing windows.
  // The last hold look judged comes up to one look interval after the limit.
  const absl::Duration bake_and_holds =
      Secs(full.rollout().bake_seconds()) + Secs(full.guard().max_hold_seconds()) +
      Secs(full.rollout().bake_seconds()) / std::max<uint32_t>(1, LooksOf(full));
  if (bake_and_holds + window > options_.retention) {
    return absl::FailedPreconditionError(absl::StrCat(
        file, ": rollout.bake_seconds (", full.rollout().bake_seconds(),
        ") plus guard.max_hold_seconds (", full.guard().max_hold_seconds(),
        ", default 3 x bake) and one look interval must fit in the controller's --retention (",
        absl::FormatDuration(options_.retention),
        ") less one --window: a look while a HOLD lasts reads the whole bake so far. Start the "
        "controller with --retention=",
        absl::FormatDuration(absl::Ceil(bake_and_holds + window, absl::Minutes(1))),
        " or more, or lower guard.max_hold_seconds"));
  }
  v1::ApplyPolicyResponse resp;
  const std::string hash = PolicyHash(parsed->policy());
  if (const v1::PolicyVersion* existing = policies_.FindHash(parsed->policy().name(), hash)) {
    *resp.mutable_version() = *existing;
    resp.set_created(false);
    if (req.dry_run()) DryRunFleetNotes(full, &resp);
    return resp;
  }
  v1::PolicyVersion v;
  v.set_name(parsed->policy().name());
  v.set_version_hash(hash);
  v.set_created_unix_nanos(absl::ToUnixNanos(clock_->Now()));
  *v.mutable_policy() = parsed->policy();
  v.set_created_by(who.name);
  v.set_sequence(policies_.NextSequence(v.name()));
  v.set_source_text(req.text());
  // The version is served back whole (policy show, this response): one that
  // cannot be sent is refused here, before anything is stored or audited.
  constexpr size_t kEnvelope = 1024;  // the response's other fields
  if (v.ByteSizeLong() + kEnvelope > options_.max_message_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat(
        file, ": the policy version would take ", v.ByteSizeLong(), " bytes (its text is ",
        req.text().size(),
        "), more than the controller's --max_message_bytes=", options_.max_message_bytes,
        " allows in a reply; nothing was stored (shorten its comments)"));
  }
  resp.set_created(true);
  if (req.dry_run()) {
    *resp.mutable_version() = v;
    DryRunFleetNotes(full, &resp);
    return resp;
  }
  if (store_ != nullptr) {
    Store::Batch batch;
    batch.policy_versions.push_back(v);
    v1::AuditEntry a;
    a.set_unix_nanos(v.created_unix_nanos());
    a.set_actor(who.name);
    a.set_authenticated(who.authenticated);
    a.set_action("policy_apply");
    a.set_subject(absl::StrCat(v.name(), "@", v.sequence()));
    a.set_reason(req.reason());
    a.set_detail(absl::StrCat("version ", v.sequence(), " hash ", hash, " from ", file));
    batch.audit.push_back(std::move(a));
    if (absl::Status s = store_->Commit(batch); !s.ok()) {
      return absl::UnavailableError(
          absl::StrCat("cannot store policy ", v.name(), ": ", s.message()));
    }
  }
  bool created = false;
  *resp.mutable_version() = policies_.Add(v, &created);
  RefreshObserveOnly();
  return resp;
}

absl::Status RolloutManager::CheckApprovalsPossible(const v1::Change& c,
                                                    const Identity& who) const {
  // Without roles (plaintext on loopback) identities are declared and any
  // other name can approve.
  if (authorizer_ == nullptr || !who.authenticated) return absl::OkStatus();
  const Authorizer::OtherApprovers others = authorizer_->ApproversBesides(who.name);
  const size_t needed = static_cast<size_t>(std::max(1, c.approvals_required()));
  if (others.pattern || others.exact.size() >= needed) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      "policy ", c.policy_name(), " needs ", needed, " approval", needed == 1 ? "" : "s",
      " from identities other than the proposer \"", who.name,
      "\", but the controller's "
      "--roles_file grants the approver role to ",
      others.exact.empty()
          ? "no other identity"
          : absl::StrCat(others.exact.size(), " other (", absl::StrJoin(others.exact, ", "), ")"),
      ": the change could never be approved. Add approvers to the roles file (and restart the "
      "controller), or propose from another identity"));
}

void RolloutManager::RefreshObserveOnly() {
  std::vector<std::map<std::string, std::string>> selectors;
  for (const v1::PolicyVersion& pv : policies_.Latest()) {
    if (!pv.policy().observe_only()) continue;
    selectors.emplace_back(pv.policy().selector().match_labels().begin(),
                           pv.policy().selector().match_labels().end());
  }
  absl::MutexLock lock(&observe_mu_);
  observe_only_selectors_ = std::move(selectors);
}

bool RolloutManager::IsObserveOnly(const std::string& host_id) const {
  std::vector<std::map<std::string, std::string>> selectors;
  {
    absl::MutexLock lock(&observe_mu_);
    if (observe_only_selectors_.empty()) return false;
    selectors = observe_only_selectors_;
  }
  absl::StatusOr<v1::HostInfo> info = fleet_->GetHost(host_id);
  if (!info.ok()) return false;
  for (const auto& selector : selectors) {
    bool match = true;
    for (const auto& [k, v] : selector) {
      auto it = info->labels().find(k);
      if (it == info->labels().end() || it->second != v) {
        match = false;
        break;
      }
    }
    if (match) return true;
  }
  return false;
}

v1::ListPoliciesResponse RolloutManager::ListPolicies(const v1::ListPoliciesRequest& req) const {
  v1::ListPoliciesResponse resp;
  std::vector<v1::PolicyVersion> list =
      req.name().empty() ? policies_.Latest() : policies_.History(req.name());
  for (v1::PolicyVersion& v : list) {
    v.clear_source_text();
    *resp.add_policies() = std::move(v);
  }
  return resp;
}

std::vector<StoredHost> RolloutManager::ConnectedHosts(
    const std::map<std::string, std::string>& selector) const {
  std::vector<StoredHost> out;
  for (const v1::HostInfo& info : fleet_->ListHosts(selector)) {
    if (info.state() != v1::HOST_CONNECTED) continue;
    absl::StatusOr<StoredHost> h = fleet_->GetStored(info.host_id());
    if (h.ok()) out.push_back(*std::move(h));
  }
  return out;
}

void RolloutManager::DryRunFleetNotes(const v1::Policy& policy,
                                      v1::ApplyPolicyResponse* resp) const {
  std::map<std::string, std::string> selector(policy.selector().match_labels().begin(),
                                              policy.selector().match_labels().end());
  std::vector<StoredHost> selected = ConnectedHosts(selector);
  resp->add_notes(absl::StrCat("selects ", selected.size(), " connected host(s) (selector ",
                               absl::StrJoin(selector, ",", absl::PairFormatter("=")), ")"));
  if (selected.empty() || HasSwitchKnobs(policy)) return;
  if (absl::Status s = CheckProbeRate(policy, selected); !s.ok()) {
    resp->add_notes(std::string(s.message()));
  }
  absl::StatusOr<std::vector<v1::HostTarget>> plan = PlanHosts(policy, selected, "dry-run");
  if (!plan.ok()) {
    resp->add_notes(std::string(plan.status().message()));
    return;
  }
  if (absl::Status s = CheckJudgeable(policy, *plan); !s.ok()) {
    resp->add_notes(std::string(s.message()));
    return;
  }
  const std::string design = MeasureDesign(policy, *plan);
  if (!design.empty()) resp->add_notes(absl::StrCat("a change would have ", design));
}

absl::StatusOr<v1::PolicyVersion> RolloutManager::GetPolicy(const v1::GetPolicyRequest& req) const {
  return policies_.Get(req.name(), req.version());
}

// ---------------------------------------------------------------- changes

absl::Status RolloutManager::CheckJudgeable(const v1::Policy& policy,
                                            const std::vector<v1::HostTarget>& plan) {
  // Racks with a rack label, and those holding both a canary and a control
  // host: no design of the judge can reach its minimum with fewer labelled
  // racks than that minimum (rack pairs, or canary plus control racks).
  std::map<std::string, std::pair<int, int>> racks;  // rack -> canary, control hosts
  int unlabelled = 0;
  for (const v1::HostTarget& h : plan) {
    if (h.rack().empty()) {
      ++unlabelled;
      continue;
    }
    auto& [canary, control] = racks[h.rack()];
    (h.role() == v1::HostTarget::CANARY ? canary : control) += 1;
  }
  const uint32_t need = MinRackPairs(policy.guard());
  if (racks.size() >= need) return absl::OkStatus();
  const std::string label =
      policy.rollout().rack_label().empty() ? "rack" : policy.rollout().rack_label();
  return absl::FailedPreconditionError(absl::StrCat(
      "the judge could never decide this change: its ", plan.size(), " hosts span ", racks.size(),
      " labelled rack(s) (", unlabelled, " host(s) without a \"", label,
      "\" label), and a verdict needs at least ", need,
      " (guard.min_rack_pairs); it would only HOLD until the HOLD limit aborts it. Label the "
      "hosts with ",
      label, "=..., select more racks, or lower guard.min_rack_pairs (not below 2)"));
}

std::string RolloutManager::MeasureDesign(const v1::Policy& policy,
                                          const std::vector<v1::HostTarget>& plan) const {
  // Two consecutive periods as long as the bake (or as half of what the
  // telemetry keeps), ending at the last complete window: nothing changed
  // between them, so the judge on them with the plan's roles is an A/A run.
  const absl::Duration window = options_.window;
  const absl::Time to =
      telemetry_->WindowStart(telemetry_->WindowIndex(clock_->Now() - ReportGrace()));
  absl::Duration period =
      std::min(Secs(policy.rollout().bake_seconds()), (options_.retention - window) / 2);
  period = window * std::floor(absl::FDivDuration(period, window));
  if (period < window) return "";
  const int expected = static_cast<int>(absl::FDivDuration(period, window));
  // The canary step's roles, as TakeBaseline measures them: canary hosts, and
  // as control the CONTROL hosts and the REST hosts of racks holding a canary.
  std::set<std::string> canary_racks;
  for (const v1::HostTarget& h : plan) {
    if (h.role() == v1::HostTarget::CANARY && !IsSwitchTarget(h)) canary_racks.insert(h.rack());
  }
  std::vector<HostInput> aa;
  for (const v1::HostTarget& h : plan) {
    if (IsSwitchTarget(h) || h.rack().empty()) continue;
    if (h.role() == v1::HostTarget::REST && canary_racks.count(h.rack()) == 0) continue;
    std::shared_ptr<HostTelemetry> t = telemetry_->Find(h.host_id());
    if (t == nullptr) continue;
    HostInput in;
    in.host_id = h.host_id();
    in.rack = h.rack();
    in.canary = h.role() == v1::HostTarget::CANARY;
    const std::string& peers = policy.objective().peer_class();
    in.before = ToHostPeriod(t->Aggregate(to - 2 * period, to - period, peers), expected,
                             policy.objective());
    in.after = ToHostPeriod(t->Aggregate(to - period, to, peers), expected, policy.objective());
    aa.push_back(std::move(in));
  }
  JudgeConfig cfg;
  cfg.guard = policy.guard();
  cfg.looks = LooksOf(policy);
  cfg.objective = policy.objective().metric();
  const DesignPower power = EstimateDesignPower(aa, cfg);
  return absl::StrCat(power.note, " (periods of ", absl::FormatDuration(period), ")");
}

absl::Status RolloutManager::CheckProbeRate(const v1::Policy& policy,
                                            const std::vector<StoredHost>& selected) const {
  const uint64_t need = policy.guard().min_samples();
  const uint32_t period =
      std::min(policy.rollout().baseline_seconds(), policy.rollout().bake_seconds());
  if (need == 0 || period == 0) return absl::OkStatus();
  // The probe RTTs each measured host reported per second over the last
  // complete windows (up to kProbeRateLookback), in the objective's class.
  constexpr absl::Duration kProbeRateLookback = absl::Seconds(30);
  const absl::Time to =
      telemetry_->WindowStart(telemetry_->WindowIndex(clock_->Now() - ReportGrace()));
  const absl::Time from = to - std::min(kProbeRateLookback, options_.retention);
  std::vector<double> rates;
  std::vector<double> job_rates;  // the job signal's series, for a step_time_p99 constraint
  size_t measured = 0;
  for (const StoredHost& h : selected) {
    if (IsSwitchMember(h.info)) continue;
    ++measured;
    std::shared_ptr<HostTelemetry> t = telemetry_->Find(h.info.host_id());
    if (t == nullptr) continue;
    const PeriodAggregate agg = t->Aggregate(from, to, policy.objective().peer_class());
    if (agg.windows_present < 2 || !(agg.covered_seconds > 0)) continue;
    const HostPeriod p = ToHostPeriod(agg, 1, policy.objective());
    rates.push_back(static_cast<double>(ObjectiveSamples(p, policy.objective().metric()).count()) /
                    agg.covered_seconds);
    job_rates.push_back(static_cast<double>(p.job.count()) / agg.covered_seconds);
  }
  // Refused only on evidence: most measured hosts reported for a while.
  if (measured == 0 || rates.size() * 2 < measured) return absl::OkStatus();
  std::sort(rates.begin(), rates.end());
  std::sort(job_rates.begin(), job_rates.end());
  const bool job_constraint =
      std::any_of(policy.constraints().begin(), policy.constraints().end(),
                  [](const v1::Constraint& c) { return c.metric() == "step_time_p99"; });
  if (job_constraint && policy.objective().metric() != v1::Objective::STEP_TIME_P99) {
    const double job_expected = job_rates[job_rates.size() / 2] * period;
    if (job_expected < static_cast<double>(kCanaryOwnShiftMinProbes)) {
      return rollout_util::RetryLater(absl::FailedPreconditionError(absl::StrFormat(
          "the step_time_p99 constraint could not be judged: the selected hosts report a median "
          "%.1f events a second of the job signal's op \"%s\"%s (over the last %s), so a %u s "
          "baseline or bake holds about %.0f per host, under the %d a host's p99 needs. Check "
          "that the job runs and reports to its agents (rocetunectl status), or lengthen "
          "rollout.baseline_seconds and rollout.bake_seconds",
          job_rates[job_rates.size() / 2], policy.objective().op(),
          policy.objective().job().empty()
              ? ""
              : absl::StrCat(" of job \"", policy.objective().job(), "\""),
          absl::FormatDuration(to - from), period, job_expected, kCanaryOwnShiftMinProbes)));
    }
  }
  const double median = rates[rates.size() / 2];
  const double expected = median * period;
  if (expected >= static_cast<double>(need)) return absl::OkStatus();
  if (policy.objective().metric() == v1::Objective::STEP_TIME_P99) {
    return rollout_util::RetryLater(absl::FailedPreconditionError(absl::StrFormat(
        "the judge could not admit this change's hosts: the objective is the job signal's p99 "
        "(STEP_TIME_P99, op \"%s\"%s), and they report a median %.1f of its events a second "
        "(over the last %s), so a %u s baseline or bake holds about %.0f per host, under "
        "guard.min_samples (%u). Check that the job runs and reports to its agents "
        "(rocetunectl status lists what they receive; docs/job-signal.md), lengthen "
        "rollout.baseline_seconds and rollout.bake_seconds, or lower guard.min_samples",
        policy.objective().op(),
        policy.objective().job().empty() ? ", every job"
                                         : absl::StrCat(", job \"", policy.objective().job(), "\""),
        median, absl::FormatDuration(to - from), period, expected, need)));
  }
  return rollout_util::RetryLater(absl::FailedPreconditionError(absl::StrFormat(
      "the judge could not admit this change's hosts: they report a median %.1f probe RTTs a "
      "second%s (over the last %s), so a %u s baseline or bake holds about %.0f per host, under "
      "guard.min_samples (%u). Raise the controller's --probe_rate (per peer) or --probe_peers, "
      "lengthen rollout.baseline_seconds and rollout.bake_seconds, or lower guard.min_samples",
      median,
      policy.objective().peer_class().empty()
          ? ""
          : absl::StrCat(" in peer class ", policy.objective().peer_class()),
      absl::FormatDuration(to - from), period, expected, need)));
}

absl::StatusOr<v1::Change> RolloutManager::BuildChange(const v1::PolicyVersion& pv,
                                                       const Knobs& knobs, const Identity& who,
                                                       const std::string& reason,
                                                       const std::string& seed,
                                                       const PlanAvoid& avoid) {
  const v1::Policy policy = WithDefaults(pv.policy());
  if (absl::Status s = CheckKnobs(policy, knobs); !s.ok()) return s;
  if (absl::Status s = CheckObjectiveStillValid(pv, options_.probe_locality_label); !s.ok()) {
    return s;
  }
  std::map<std::string, std::string> selector(policy.selector().match_labels().begin(),
                                              policy.selector().match_labels().end());
  std::vector<StoredHost> selected = ConnectedHosts(selector);
  if (selected.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("policy ", pv.name(), " selects no connected host (selector ",
                     absl::StrJoin(selector, ",", absl::PairFormatter("=")), ")"));
  }
  for (const StoredHost& h : selected) {
    const std::string holder = ActiveChangeOf(h.info.host_id());
    if (!holder.empty()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "host ", h.info.host_id(), " takes part in active change ", holder, " (",
          StateName(changes_.at(holder).state()), "): a host joins at most one active change"));
    }
  }
  if (absl::Status s = CheckProbeRate(policy, selected); !s.ok()) return s;
  // Switch knobs: planned rack by rack (rollout_manager_switch.cc).
  absl::StatusOr<std::vector<v1::HostTarget>> plan =
      HasSwitchKnobs(policy) ? PlanSwitchChange(policy, selected, knobs, seed, avoid)
                             : PlanHosts(policy, selected, seed, avoid);
  if (!plan.ok()) return plan.status();
  if (!HasSwitchKnobs(policy)) {
    if (absl::Status s = CheckJudgeable(policy, *plan); !s.ok()) return s;
  }
  v1::Change c;
  c.set_design_note(MeasureDesign(policy, *plan));
  c.set_policy_name(pv.name());
  c.set_policy_version(pv.version_hash());
  c.set_state(v1::PROPOSED);
  c.set_proposer(who.name);
  c.set_proposer_authenticated(who.authenticated);
  c.set_reason(reason);
  c.set_created_unix_nanos(absl::ToUnixNanos(clock_->Now()));
  c.set_approvals_required(
      static_cast<int32_t>(std::max<uint32_t>(1, policy.approval().approvers())));
  for (const auto& [k, v] : knobs) (*c.mutable_knobs())[k] = v;
  std::map<std::string, const StoredHost*> by_id;
  for (const StoredHost& h : selected) by_id[h.info.host_id()] = &h;
  // The agents' guard judges each new set as the policy says; a set carried
  // over from an earlier change does not keep that change's setting.
  auto guard_as_policy_says = [&policy](v1::ParameterSet* target) {
    if (policy.guard().local_guard_rounds() > 0) {
      target->mutable_local_guard()->set_rounds_over(policy.guard().local_guard_rounds());
    } else {
      target->clear_local_guard();
    }
  };
  for (v1::HostTarget& t : *plan) {
    if (HasSwitchKnobs(policy)) {  // targets filled by the rack planner
      if (t.has_target()) guard_as_policy_says(t.mutable_target());
      *c.add_hosts() = std::move(t);
      continue;
    }
    const StoredHost& h = *by_id.at(t.host_id());
    const v1::ParameterSet previous = PreviousParameters(h);
    absl::StatusOr<v1::ParameterSet> target = ApplyKnobs(h, previous, knobs);
    if (!target.ok()) return target.status();
    guard_as_policy_says(&*target);
    *t.mutable_previous() = previous;
    t.set_previous_version(h.info.desired_version());
    *t.mutable_target() = *std::move(target);
    *c.add_hosts() = std::move(t);
  }
  return c;
}

absl::StatusOr<v1::Change> RolloutManager::Propose(const v1::ProposeChangeRequest& req,
                                                   const Identity& who) {
  absl::StatusOr<v1::PolicyVersion> pv = policies_.Get(req.policy_name(), req.policy_version());
  if (!pv.ok()) return pv.status();
  Knobs knobs(req.knobs().begin(), req.knobs().end());
  const std::string id = NextChangeId();
  absl::StatusOr<v1::Change> c = BuildChange(*pv, knobs, who, req.reason(), id);
  if (!c.ok()) return c.status();
  c->set_id(id);
  // A set the judge or a guard rolled back is not proposed again by accident.
  const std::string rejected_by = RejectedBy(pv->name(), knobs);
  if (!rejected_by.empty() && req.override_rejected().empty()) {
    const v1::Change& earlier = changes_.at(rejected_by);
    const v1::Verdict& v = earlier.verdicts(earlier.verdicts_size() - 1);
    return absl::FailedPreconditionError(
        absl::StrCat("these values were rolled back before: ", rejected_by, " (", pv->name(), ", ",
                     absl::StrJoin(knobs, ",", absl::PairFormatter("=")), ") ended ROLLED_BACK on ",
                     v1::Verdict::Outcome_Name(v.outcome()), " (", v.rule(), "): ", v.summary(),
                     "; to try them again give the reason (rocetunectl change propose ... "
                     "--override-rejected=REASON; it is audited)"));
  }
  if (absl::Status s = CheckApprovalsPossible(*c, who); !s.ok()) return s;
  if (req.dry_run()) return c;
  v1::ChangeTransition t = Transition(*c, v1::PROPOSED, who.name, req.reason());
  t.set_from(v1::CHANGE_STATE_UNSPECIFIED);
  *c->add_transitions() = t;
  std::vector<v1::AuditEntry> audit{MakeAudit(
      "change_propose", *c, who, req.reason(),
      absl::StrCat("policy ", pv->name(), "@", pv->sequence(), " knobs ",
                   absl::StrJoin(knobs, ",", absl::PairFormatter("=")), "; ", c->hosts_size(),
                   " hosts",
                   rejected_by.empty() ? std::string()
                                       : absl::StrCat("; overrides the rollback of ", rejected_by,
                                                      ": ", req.override_rejected())))};
  for (const v1::HostTarget& h : c->hosts()) audit.front().add_host_ids(h.host_id());
  if (absl::Status s = Commit(&*c, std::nullopt, audit, {}); !s.ok()) return s;
  if (metrics_ != nullptr) metrics_->RecordTransition(v1::PROPOSED);
  ++change_seq_;
  changes_[id] = *c;
  Publish(*c, absl::StrCat("proposed by ", who.name));
  return c;
}

absl::StatusOr<v1::Change> RolloutManager::Approve(const v1::ChangeActionRequest& req,
                                                   const Identity& who) {
  v1::Change* c = Find(req.id());
  if (c == nullptr) return absl::NotFoundError(absl::StrCat("no change ", req.id()));
  if (c->state() != v1::PROPOSED) {
    return absl::FailedPreconditionError(
        absl::StrCat("change ", c->id(), " is ", StateName(c->state()), ", not PROPOSED"));
  }
  if (who.name == c->proposer()) {
    return absl::PermissionDeniedError(absl::StrCat(
        who.name, " proposed change ", c->id(), " and cannot approve it: approvals must come from ",
        "someone other than the proposer"));
  }
  for (const v1::Approval& a : c->approvals()) {
    if (a.approver() == who.name) {
      return absl::AlreadyExistsError(
          absl::StrCat(who.name, " already approved change ", c->id(),
                       ": approvals are counted per distinct identity"));
    }
  }
  absl::StatusOr<v1::PolicyVersion> pv = policies_.Get(c->policy_name(), c->policy_version());
  if (pv.ok() && pv->policy().approval().require_rehearsal()) {
    if (!c->has_rehearsal()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "policy ", c->policy_name(), " requires a rehearsal before approval: run rocetunectl ",
          "change rehearse ", c->id(), " --scenario=FILE"));
    }
    if (c->rehearsal().regression()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "the rehearsal of change ", c->id(), " on ", c->rehearsal().scenario(),
          " predicts a regression; the policy requires a rehearsal that predicts none"));
    }
  }
  v1::Change next = *c;
  v1::Approval* a = next.add_approvals();
  a->set_approver(who.name);
  a->set_unix_nanos(absl::ToUnixNanos(clock_->Now()));
  a->set_authenticated(who.authenticated);
  a->set_reason(req.reason());
  const bool enough = next.approvals_size() >= next.approvals_required();
  if (req.dry_run()) {
    if (enough) next.set_state(v1::APPROVED);
    return next;
  }
  std::optional<v1::ChangeTransition> t;
  if (enough) t = Transition(next, v1::APPROVED, who.name, req.reason());
  std::vector<v1::AuditEntry> audit{
      MakeAudit("change_approve", next, who, req.reason(),
                absl::StrCat("approval ", next.approvals_size(), " of ", next.approvals_required(),
                             who.authenticated ? "" : " (unauthenticated identity)"))};
  if (absl::Status s = Commit(&next, t, audit, {}); !s.ok()) return s;
  *c = next;
  Publish(*c, absl::StrCat("approved by ", who.name));
  return *c;
}

absl::StatusOr<v1::Change> RolloutManager::Reject(const v1::ChangeActionRequest& req,
                                                  const Identity& who) {
  v1::Change* c = Find(req.id());
  if (c == nullptr) return absl::NotFoundError(absl::StrCat("no change ", req.id()));
  if (c->state() != v1::PROPOSED) {
    return absl::FailedPreconditionError(
        absl::StrCat("change ", c->id(), " is ", StateName(c->state()),
                     "; only a PROPOSED change can be rejected (use rollback or abort)"));
  }
  v1::Change next = *c;
  if (req.dry_run()) {
    next.set_state(v1::REJECTED);
    return next;
  }
  if (absl::Status s = Commit(&next, Transition(next, v1::REJECTED, who.name, req.reason()),
                              {MakeAudit("change_reject", next, who, req.reason(), "")}, {});
      !s.ok()) {
    return s;
  }
  *c = next;
  Publish(*c, absl::StrCat("rejected by ", who.name));
  return *c;
}

absl::StatusOr<v1::Change> RolloutManager::Rollback(const v1::ChangeActionRequest& req,
                                                    const Identity& who) {
  v1::Change* c = Find(req.id());
  if (c == nullptr) return absl::NotFoundError(absl::StrCat("no change ", req.id()));
  if (!InFlight(c->state()) && c->state() != v1::DONE) {
    return absl::FailedPreconditionError(
        absl::StrCat("change ", c->id(), " is ", StateName(c->state()),
                     ": only a change in CANARY, STAGE or DONE has hosts to roll back"));
  }
  if (c->state() == v1::DONE) {
    for (const v1::HostTarget& h : c->hosts()) {
      if (h.pushed_version().empty()) continue;
      // The host still runs this change when its desired state is the set the
      // change gave it: the same version, or the same content under a newer
      // version (a later change on these hosts that was rolled back or
      // aborted restored exactly this set, as a new version).
      absl::StatusOr<StoredHost> now = fleet_->GetStored(h.host_id());
      const bool same_set =
          now.ok() && now->desired_seq != 0 &&
          google::protobuf::util::MessageDifferencer::Equals(now->desired, h.target());
      if (fleet_->DesiredVersion(h.host_id()) != h.pushed_version() && !same_set) {
        return absl::FailedPreconditionError(absl::StrCat(
            "host ", h.host_id(), " moved on since change ", c->id(), " (desired version ",
            fleet_->DesiredVersion(h.host_id()), ", the change set ", h.pushed_version(),
            "): roll back the later change first"));
      }
    }
  }
  if (req.dry_run()) {
    v1::Change next = *c;
    next.set_state(v1::ROLLED_BACK);
    return next;
  }
  const std::string reason =
      req.reason().empty() ? absl::StrCat("rollback requested by ", who.name) : req.reason();
  if (absl::Status s = Restore(c, v1::ROLLED_BACK, who.name, who.authenticated, reason); !s.ok()) {
    return s;
  }
  if (metrics_ != nullptr && !c->canary_only()) metrics_->RecordRollback(RollbackReason::kManual);
  return *c;
}

absl::StatusOr<v1::Change> RolloutManager::Abort(const v1::ChangeActionRequest& req,
                                                 const Identity& who) {
  v1::Change* c = Find(req.id());
  if (c == nullptr) return absl::NotFoundError(absl::StrCat("no change ", req.id()));
  if (!Active(*c)) {
    return absl::FailedPreconditionError(
        absl::StrCat("change ", c->id(), " is ", StateName(c->state()), " and no longer active"));
  }
  if (req.dry_run()) {
    v1::Change next = *c;
    next.set_state(v1::ABORTED);
    return next;
  }
  const std::string reason =
      req.reason().empty() ? absl::StrCat("aborted by ", who.name) : req.reason();
  if (absl::Status s = Restore(c, v1::ABORTED, who.name, who.authenticated, reason); !s.ok()) {
    return s;
  }
  if (metrics_ != nullptr && !c->canary_only()) metrics_->RecordRollback(RollbackReason::kManual);
  return *c;
}

absl::StatusOr<v1::Change> RolloutManager::GetChange(const std::string& id) const {
  const v1::Change* c = Find(id);
  if (c == nullptr) return absl::NotFoundError(absl::StrCat("no change ", id));
  return *c;
}

absl::StatusOr<v1::ListChangesResponse> RolloutManager::ListChanges(
    const v1::ListChangesRequest& req) const {
  const uint32_t page = req.page_size() == 0 ? 100 : std::min<uint32_t>(req.page_size(), 1000);
  int64_t before = INT64_MAX;
  if (!req.page_token().empty() && !absl::SimpleAtoi(req.page_token(), &before)) {
    return absl::InvalidArgumentError(absl::StrCat("bad page_token \"", req.page_token(), "\""));
  }
  std::vector<const v1::Change*> all;
  for (const auto& [id, c] : changes_) {
    if (IdNumber(id) >= before) continue;
    if (!req.campaign_id().empty() && c.campaign_id() != req.campaign_id()) continue;
    if (!req.states().empty() &&
        std::find(req.states().begin(), req.states().end(), c.state()) == req.states().end()) {
      continue;
    }
    all.push_back(&c);
  }
  std::sort(all.begin(), all.end(), [](const v1::Change* a, const v1::Change* b) {
    return IdNumber(a->id()) > IdNumber(b->id());
  });
  v1::ListChangesResponse resp;
  for (size_t i = 0; i < all.size() && i < page; ++i) {
    v1::Change* out = resp.add_changes();
    *out = *all[i];
    // Lists stay small: per-host targets and evidence are in GetChange.
    out->clear_verdicts();
    if (all[i]->verdicts_size() > 0)
      *out->add_verdicts() = all[i]->verdicts(all[i]->verdicts_size() - 1);
    for (v1::Verdict& v : *out->mutable_verdicts()) {
      for (v1::GroupEvidence& g : *v.mutable_groups()) g.clear_rtt();
    }
    for (v1::HostTarget& h : *out->mutable_hosts()) {
      h.clear_target();
      h.clear_previous();
    }
  }
  if (all.size() > page) resp.set_next_page_token(absl::StrCat(IdNumber(all[page - 1]->id())));
  return resp;
}

absl::StatusOr<std::pair<Knobs, Knobs>> RolloutManager::RehearsalKnobs(
    const std::string& id) const {
  const v1::Change* c = Find(id);
  if (c == nullptr) return absl::NotFoundError(absl::StrCat("no change ", id));
  absl::StatusOr<v1::PolicyVersion> pv = policies_.Get(c->policy_name(), c->policy_version());
  if (!pv.ok()) return pv.status();
  std::vector<std::string> hosts;
  for (const v1::HostTarget& h : c->hosts()) {
    if (h.role() == v1::HostTarget::CANARY) hosts.push_back(h.host_id());
  }
  return std::make_pair(CurrentKnobValues(pv->policy(), hosts),
                        Knobs(c->knobs().begin(), c->knobs().end()));
}

absl::StatusOr<v1::Change> RolloutManager::RecordRehearsal(const std::string& id,
                                                           const v1::Rehearsal& r) {
  v1::Change* c = Find(id);
  if (c == nullptr) return absl::NotFoundError(absl::StrCat("no change ", id));
  if (c->state() != v1::PROPOSED) {
    return absl::FailedPreconditionError(
        absl::StrCat("change ", id, " is ", StateName(c->state()), "; rehearse before approval"));
  }
  v1::Change next = *c;
  *next.mutable_rehearsal() = r;
  Identity who{r.actor(), false};
  if (absl::Status s =
          Commit(&next, std::nullopt,
                 {MakeAudit("change_rehearse", next, who, "",
                            absl::StrFormat("scenario %s: p99 %.3g s -> %.3g s%s", r.scenario(),
                                            r.current().probe_p99_seconds(),
                                            r.proposed().probe_p99_seconds(),
                                            r.regression() ? " (regression)" : ""))},
                 {});
      !s.ok()) {
    return s;
  }
  *c = next;
  return *c;
}

namespace {

// What an operator can do about the active change `c` that holds a host:
// only commands that its state accepts.
std::string WayOut(const v1::Change& c) {
  switch (c.state()) {
    case v1::PROPOSED:
      return absl::StrCat("reject it (rocetunectl change reject ", c.id(),
                          ") or approve it and let it finish");
    case v1::APPROVED:
      return absl::StrCat("abort it (rocetunectl change abort ", c.id(), ")");
    default:
      return absl::StrCat("roll it back (rocetunectl change rollback ", c.id(),
                          ") or let it finish");
  }
}

}  // namespace

absl::Status RolloutManager::ForgetHost(const v1::ForgetHostRequest& req, const Identity& who) {
  if (req.host_id().empty()) return absl::InvalidArgumentError("host_id is empty");
  const std::string holder = ActiveChangeOf(req.host_id());
  if (!holder.empty()) {
    const v1::Change& c = changes_.at(holder);
    return absl::FailedPreconditionError(
        absl::StrCat("host ", req.host_id(), " takes part in active change ", holder, " (",
                     StateName(c.state()), "); ", WayOut(c), " first"));
  }
  return fleet_->ForgetHost(req.host_id(),
                            DesiredStateActor{who.name, who.authenticated, req.reason(), ""});
}

absl::StatusOr<v1::SetDesiredStateResponse> RolloutManager::SetDesiredState(
    const v1::SetDesiredStateRequest& req, const Identity& who) {
  const std::string holder = ActiveChangeOf(req.host_id());
  if (!holder.empty()) {
    const v1::Change& c = changes_.at(holder);
    return absl::FailedPreconditionError(
        absl::StrCat("host ", req.host_id(), " takes part in active change ", holder, " (",
                     StateName(c.state()), "); ", WayOut(c), " before pushing by hand"));
  }
  absl::StatusOr<StoredHost> host = fleet_->GetStored(req.host_id());
  if (!host.ok()) return host.status();
  // Devices, layout, parameters the layout has, ranges and the link, against
  // what the host reported: refused here rather than NACKed later.
  if (absl::Status s = CheckAgainstInventory(host->info, req.parameters()); !s.ok()) return s;
  const v1::ParameterSet previous = PreviousParameters(*host);
  const v1::ParameterSet next =
      req.replace() ? req.parameters() : MergeParameterSets(previous, req.parameters());
  DesiredStateActor actor{who.name, who.authenticated, req.reason(), ""};
  absl::StatusOr<std::string> version = fleet_->SetDesiredState(req.host_id(), next, actor);
  if (!version.ok()) return version.status();
  v1::SetDesiredStateResponse resp;
  resp.set_version(*version);
  for (v1::ValueChange& v : DiffParameterSets(req.host_id(), previous, next)) {
    *resp.add_changes() = std::move(v);
  }
  return resp;
}

// ---------------------------------------------------------------- rollout

void RolloutManager::TakeBaseline(const v1::Change& c, uint32_t stage, absl::Time step_start) {
  absl::StatusOr<v1::PolicyVersion> pv = policies_.Get(c.policy_name(), c.policy_version());
  const v1::Policy policy = WithDefaults(pv.ok() ? pv->policy() : v1::Policy());
  const int64_t index = telemetry_->WindowIndex(step_start);
  const absl::Time boundary = telemetry_->WindowStart(index);
  const absl::Duration baseline = Secs(policy.rollout().baseline_seconds());
  const int expected =
      std::max<int>(1, static_cast<int>(std::ceil(absl::FDivDuration(baseline, options_.window))));
  Step step;
  step.after_start = telemetry_->WindowStart(index + 1);
  // In a rack where a host runs the change, every host not changed yet is
  // measured as control: REST hosts of later stages too, not only the canary's
  // designated control host. The judge averages them into the rack's control
  // side, so the rack's DiD is less noisy. (In rack-level plans a rack is
  // changed whole, so such racks hold no unchanged host.)
  auto treated = [stage](const v1::HostTarget& h) { return RunsChangeAt(h, stage); };
  std::set<std::string> changed_racks;
  for (const v1::HostTarget& h : c.hosts()) {
    if (treated(h) && !IsSwitchTarget(h)) changed_racks.insert(h.rack());
  }
  for (const v1::HostTarget& h : c.hosts()) {
    const bool control = !treated(h) && h.stage() > stage &&
                         (h.role() == v1::HostTarget::CONTROL ||
                          (h.role() == v1::HostTarget::REST && changed_racks.count(h.rack()) != 0));
    if (!treated(h) && !control) continue;
    if (IsSwitchTarget(h)) continue;  // judged through the hosts of its rack
    std::shared_ptr<HostTelemetry> t = telemetry_->Find(h.host_id());
    PeriodAggregate agg;
    if (t != nullptr)
      agg = t->Aggregate(boundary - baseline, boundary, policy.objective().peer_class());
    step.baseline[h.host_id()] = ToHostPeriod(agg, expected, policy.objective());
  }
  steps_[c.id()] = std::move(step);
}

absl::Status RolloutManager::StartStep(v1::Change* c, uint32_t stage) {
  // Every step's set is provisional until the change is DONE: a host that
  // loses the controller for the policy's lease restores its last-known-good.
  absl::StatusOr<v1::PolicyVersion> pv = policies_.Get(c->policy_name(), c->policy_version());
  const v1::Policy policy = WithDefaults(pv.ok() ? pv->policy() : v1::Policy());
  const uint32_t lease = policy.guard().provisional_lease_seconds();
  std::vector<DesiredUpdate> updates;
  for (const v1::HostTarget& h : c->hosts()) {
    const bool now_changed = stage == 0 ? h.role() == v1::HostTarget::CANARY : h.stage() == stage;
    // A host a switch change only measures has no target to push.
    if (now_changed && !IsMeasuredOnly(h))
      updates.push_back(DesiredUpdate{h.host_id(), h.target(), lease});
  }
  const absl::Time now = clock_->Now();
  TakeBaseline(*c, stage, now);
  // A trial's too when its policy holds the other p99 series (its fleet-wide
  // check: FleetGuardConfig::trial).
  if (stage == 0 && (!c->canary_only() || HoldsOtherP99(policy))) TakeFleetBaseline(*c, now);
  v1::Change next = *c;
  const v1::ChangeState to = stage == 0 ? v1::CANARY : v1::STAGE;
  v1::ChangeTransition t =
      Transition(next, to, "controller",
                 stage == 0 ? absl::StrCat("canary on ", updates.size(), " hosts")
                            : absl::StrCat("stage ", stage, " on ", updates.size(), " more hosts"));
  t.set_stage(stage);
  next.set_stage(stage);
  next.set_step_started_unix_nanos(absl::ToUnixNanos(now));
  next.set_hold_since_unix_nanos(0);
  Identity controller{"controller", false};
  std::vector<v1::AuditEntry> audit{MakeAudit(
      stage == 0 ? "change_canary" : "change_stage", next, controller, t.reason(),
      absl::StrCat("knobs ", absl::StrJoin(next.knobs(), ",", absl::PairFormatter("="))))};
  const v1::StepBaseline record = StepRecord(c->id(), stage);
  if (absl::Status s = Commit(&next, t, audit, updates, &record); !s.ok()) {
    steps_.erase(c->id());
    return s;
  }
  *c = next;
  Publish(*c, t.reason(), 0);
  return absl::OkStatus();
}

absl::Status RolloutManager::Restore(v1::Change* c, v1::ChangeState end, const std::string& actor,
                                     bool authenticated, const std::string& reason) {
  std::vector<DesiredUpdate> updates;
  for (const v1::HostTarget& h : c->hosts()) {
    if (h.pushed_version().empty()) continue;
    updates.push_back(DesiredUpdate{h.host_id(), h.previous()});
  }
  v1::Change next = *c;
  const char* action = end == v1::ROLLED_BACK ? "change_rolled_back"
                       : end == v1::ABORTED   ? "change_aborted"
                                              : "trial_restored";
  std::vector<v1::AuditEntry> audit{
      MakeAudit(action, next, Identity{actor, authenticated}, reason,
                absl::StrCat(updates.size(), " hosts returned to their previous desired state"))};
  if (absl::Status s = Commit(&next, Transition(next, end, actor, reason), audit, updates);
      !s.ok()) {
    LogError("cannot restore the hosts of a change",
             {{"change", c->id()}, {"error", s.ToString()}});
    return s;
  }
  *c = next;
  steps_.erase(c->id());
  fleet_baselines_.erase(c->id());
  LogInfo("change ended", {{"change", c->id()}, {"state", StateName(end)}, {"reason", reason}});
  Publish(*c, reason, 1);
  return absl::OkStatus();
}

std::vector<DesiredUpdate> RolloutManager::ConfirmUpdates(const v1::Change& c) const {
  // The set each host was given, now final (lease 0): the same version pushed
  // again, which the agent may make its last-known-good. A host whose desired
  // state moved on since (another push) is left alone.
  std::vector<DesiredUpdate> updates;
  for (const v1::HostTarget& h : c.hosts()) {
    if (h.pushed_version().empty() || IsMeasuredOnly(h)) continue;
    if (fleet_->DesiredVersion(h.host_id()) != h.pushed_version()) continue;
    updates.push_back(DesiredUpdate{h.host_id(), h.target(), 0});
  }
  return updates;
}

void RolloutManager::AddVerdict(v1::Change* c, v1::Verdict v) {
  for (v1::Verdict& old : *c->mutable_verdicts()) {
    for (v1::GroupEvidence& g : *old.mutable_groups()) g.clear_rtt();
  }
  *c->add_verdicts() = std::move(v);
  while (c->verdicts_size() > options_.max_verdicts) {
    c->mutable_verdicts()->erase(c->mutable_verdicts()->begin());
  }
}

void RolloutManager::Fail(v1::Change* c, const std::string& rule, const std::string& why) {
  LogWarning("change failed", {{"change", c->id()}, {"rule", rule}, {"why", why}});
  if (c->canary_only()) {
    // The trial's verdict is recorded, its canary restored.
    campaigns_.TrialFinished(c);
    return;
  }
  if (Restore(c, v1::ROLLED_BACK, "judge", false, absl::StrCat("FAIL (", rule, "): ", why)).ok() &&
      metrics_ != nullptr) {
    metrics_->RecordRollback(RollbackReasonForRule(rule));
  }
}

void RolloutManager::Drive(v1::Change* c) {
  if (c->state() == v1::APPROVED) {
    if (absl::Status s = StartStep(c, 0); !s.ok()) {
      LogError("cannot start the canary", {{"change", c->id()}, {"error", s.ToString()}});
    }
    return;
  }
  if (!InFlight(c->state())) return;
  auto it = steps_.find(c->id());
  if (it == steps_.end()) return;
  absl::StatusOr<v1::PolicyVersion> pv = policies_.Get(c->policy_name(), c->policy_version());
  v1::Policy policy = WithDefaults(pv.ok() ? pv->policy() : v1::Policy());
  // A trial that retries a HOLD bakes longer than its policy says.
  if (c->bake_seconds() > 0) policy.mutable_rollout()->set_bake_seconds(c->bake_seconds());
  const absl::Time now = clock_->Now();
  const absl::Duration bake = Secs(policy.rollout().bake_seconds());
  const uint32_t looks = LooksOf(policy);
  if (AwaitResumedHosts(*c, &it->second, now)) return;
  const absl::Time after_start = it->second.after_start;
  if (now < after_start) return;
  const double progress = std::min(1.0, absl::FDivDuration(now - after_start, bake));
  const absl::Duration interval = bake / looks;
  const int64_t due = static_cast<int64_t>(
      std::floor(absl::FDivDuration(now - after_start - ReportGrace(), interval)));
  Step& step = it->second;
  if (due <= step.last_look) {
    // Progress events at most every tenth of the bake.
    const int tenth = static_cast<int>(progress * 10);
    if (tenth != step.last_progress_tenth) {
      step.last_progress_tenth = tenth;
      Publish(*c, "baking", progress);
    }
    return;
  }
  step.last_look = due;
  // Looks past the plan (a HOLD at the final look) spend the judge's hold-look
  // share of alpha (evenly over the hold looks the HOLD limit allows); the
  // HOLD limit aborts.
  StepLook look;
  look.change = c;
  look.policy = policy;
  look.after_start = step.after_start;
  look.resumed = step.resumed;
  look.baseline = &step.baseline;
  auto fleet_base = fleet_baselines_.find(c->id());
  look.fleet_baseline = fleet_base != fleet_baselines_.end() ? &fleet_base->second : nullptr;
  look.look = static_cast<uint32_t>(due);
  look.looks = looks;
  look.now = now;
  for (const v1::HostTarget& h : c->hosts()) {
    absl::StatusOr<StoredHost> stored = fleet_->GetStored(h.host_id());
    if (stored.ok()) look.current_versions[h.host_id()] = stored->info.current_version();
  }
  std::vector<v1::Verdict> verdicts = evaluator_.Look(look);
  if (verdicts.empty()) {
    Publish(*c, "baking", progress);
    return;
  }
  for (v1::Verdict& v : verdicts) AddVerdict(c, std::move(v));
  // The last verdict decides the look (a fleet guard FAIL after the judge's
  // HOLD or PASS, say): the metric counts one verdict per look, that one.
  const v1::Verdict& v = c->verdicts(c->verdicts_size() - 1);
  if (metrics_ != nullptr) metrics_->RecordVerdict(v);
  switch (v.outcome()) {
    case v1::Verdict::FAIL:
      Fail(c, v.rule(), v.summary());
      return;
    case v1::Verdict::PASS:
      if (due < looks) break;  // PASS counts at the final look only
      if (c->canary_only()) {
        campaigns_.TrialFinished(c);
        return;
      } else {
        uint32_t next_stage = c->state() == v1::CANARY ? 1 : c->stage() + 1;
        // A stage that adds no host (min_canary_hosts already covered its
        // share) has nothing to bake: the change goes on to the next one.
        auto adds_hosts = [&](uint32_t stage) {
          for (const v1::HostTarget& h : c->hosts()) {
            if (h.stage() == stage && h.role() != v1::HostTarget::CANARY && !IsMeasuredOnly(h)) {
              return true;
            }
          }
          return false;
        };
        while (next_stage <= StageCount(policy) && !adds_hosts(next_stage)) ++next_stage;
        if (next_stage > StageCount(policy)) {
          v1::Change next = *c;
          if (absl::Status s = Commit(&next, Transition(next, v1::DONE, "controller", v.summary()),
                                      {MakeAudit("change_done", next, Identity{"controller", false},
                                                 v.summary(), v.rule())},
                                      ConfirmUpdates(*c));
              s.ok()) {
            *c = next;
            steps_.erase(c->id());
            fleet_baselines_.erase(c->id());
            Publish(*c, "done", 1);
          } else {
            LogError("cannot store a change as DONE; retried at the next look",
                     {{"change", c->id()}, {"error", s.ToString()}});
          }
          return;
        }
        if (absl::Status s = StartStep(c, next_stage); !s.ok()) {
          LogError("cannot start the next stage", {{"change", c->id()}, {"error", s.ToString()}});
        }
        return;
      }
    default:
      break;
  }
  // HOLD (or an interim PASS): persist the verdict; a HOLD past the limit aborts.
  // The HOLD clock runs in memory whether or not the store takes the verdict:
  // a store that cannot write (disk full) must not stop the limit.
  if (v.outcome() == v1::Verdict::HOLD && due >= looks && c->hold_since_unix_nanos() == 0) {
    c->set_hold_since_unix_nanos(absl::ToUnixNanos(now));
  }
  v1::Change next = *c;
  if (v.outcome() == v1::Verdict::HOLD && due >= looks) {
    const absl::Duration held = now - absl::FromUnixNanos(next.hold_since_unix_nanos());
    if (held > Secs(policy.guard().max_hold_seconds())) {
      const std::string why = absl::StrCat("HOLD for ", absl::FormatDuration(held), " (limit ",
                                           policy.guard().max_hold_seconds(), " s): ", v.summary());
      if (c->canary_only()) {
        campaigns_.TrialFinished(c);
      } else {
        if (Restore(c, v1::ABORTED, "judge", false, why).ok() && metrics_ != nullptr) {
          metrics_->RecordRollback(RollbackReason::kHoldTimeout);
        }
      }
      return;
    }
  }
  if (absl::Status s = Commit(&next, std::nullopt, {}, {}); s.ok()) {
    *c = next;
  } else {
    // Kept in memory (the verdict, the HOLD clock); the store catches up at
    // the next write that succeeds.
    LogError("cannot store a verdict; the change goes on in memory",
             {{"change", c->id()}, {"verdict", v.summary()}, {"error", s.ToString()}});
  }
  Publish(*c, absl::StrCat("verdict ", v1::Verdict::Outcome_Name(v.outcome()), ": ", v.rule()),
          progress);
}

void RolloutManager::ExpireProposals() {
  if (options_.proposal_ttl <= absl::ZeroDuration()) return;
  const absl::Time now = clock_->Now();
  for (auto& [id, c] : changes_) {
    if (c.state() != v1::PROPOSED || !c.campaign_id().empty() || c.created_unix_nanos() == 0) {
      continue;
    }
    const absl::Duration age = now - absl::FromUnixNanos(c.created_unix_nanos());
    if (age <= options_.proposal_ttl) continue;
    const std::string why =
        absl::StrCat("expired: not approved within ", absl::FormatDuration(options_.proposal_ttl),
                     " of its proposal (--proposal_ttl); its hosts are free again");
    v1::Change next = c;
    if (absl::Status s =
            Commit(&next, Transition(next, v1::REJECTED, "controller", why),
                   {MakeAudit("change_expired", next, Identity{"controller", false}, why, "")}, {});
        !s.ok()) {
      LogError("cannot expire a proposed change; retried at the next tick",
               {{"change", id}, {"error", s.ToString()}});
      continue;
    }
    c = std::move(next);
    LogInfo("change expired", {{"change", id}, {"reason", why}});
    Publish(c, why);
  }
}

void RolloutManager::CheckRestores() {
  std::map<std::string, std::vector<std::string>> unconfirmed;  // change -> hosts
  {
    absl::MutexLock lock(&index_mu_);
    for (const auto& [host, id] : unacked_by_host_) unconfirmed[id].push_back(host);
  }
  const absl::Time now = clock_->Now();
  int overdue_hosts = 0;
  for (const auto& [id, hosts] : unconfirmed) {
    auto it = changes_.find(id);
    // Restores are the last pushes of rolled-back and aborted changes (a
    // DONE change's last push is its own set).
    if (it == changes_.end() ||
        (it->second.state() != v1::ROLLED_BACK && it->second.state() != v1::ABORTED) ||
        it->second.transitions().empty()) {
      continue;
    }
    const v1::Change& c = it->second;
    const absl::Time ended =
        absl::FromUnixNanos(c.transitions(c.transitions_size() - 1).unix_nanos());
    // A refused restore counts at once; a silent host after the bound. One
    // pass over the change's hosts (this runs every tick).
    std::map<std::string, std::string> refusals;  // host -> its NACK
    for (const v1::HostTarget& h : c.hosts()) {
      if (absl::StartsWith(h.rejected(), "restore NACK")) refusals[h.host_id()] = h.rejected();
    }
    int refused = 0;
    for (const std::string& host : hosts) refused += refusals.count(host) != 0;
    if (now - ended < options_.restore_confirm_timeout) {
      overdue_hosts += refused;
      continue;
    }
    overdue_hosts += static_cast<int>(hosts.size());
    if (restore_overdue_audited_.contains(id)) continue;
    std::vector<std::string> named;
    for (const std::string& host : hosts) {
      if (named.size() == 16) {
        named.push_back(absl::StrCat("and ", hosts.size() - 16, " more"));
        break;
      }
      auto refusal = refusals.find(host);
      named.push_back(
          absl::StrCat(host, " (", refusal == refusals.end() ? "no ack" : refusal->second, ")"));
    }
    const std::string reason =
        absl::StrCat(hosts.size(), " host(s) did not confirm the restore of ", id, " within ",
                     absl::FormatDuration(options_.restore_confirm_timeout),
                     " of its end (--restore_confirm_timeout); they may still run its values: ",
                     absl::StrJoin(named, ", "));
    v1::Change next = c;
    if (absl::Status st = Commit(
            &next, std::nullopt,
            {MakeAudit("restore_unconfirmed", next, Identity{"controller", false}, reason, "")},
            {});
        !st.ok()) {
      LogError("cannot audit an unconfirmed restore; retried at the next tick",
               {{"change", id}, {"error", st.ToString()}});
      continue;
    }
    it->second = std::move(next);
    restore_overdue_audited_.insert(id);
    LogWarning("restore unconfirmed", {{"change", id}, {"hosts", absl::StrJoin(hosts, ",")}});
    Publish(it->second, reason);
  }
  if (metrics_ != nullptr) metrics_->SetRestoresUnconfirmed(overdue_hosts);
}

void RolloutManager::Tick() {
  ExpireProposals();
  CheckRestores();
  std::vector<std::string> ids;
  for (const auto& [id, c] : changes_) {
    if (c.state() == v1::APPROVED || InFlight(c.state())) ids.push_back(id);
  }
  for (const std::string& id : ids) Drive(&changes_.at(id));
  campaigns_.Tick();
  if (metrics_ != nullptr) metrics_->Refresh(changes_, clock_->Now());
}

void RolloutManager::OnAck(const std::string& host_id, const std::string& version) {
  loop_->Post([this, host_id, version] {
    std::string id = ActiveChangeOf(host_id);
    bool ended = false;
    if (!id.empty()) {
      // The active change may not have pushed this version (it is still
      // PROPOSED, say): then it is an ended change's restore.
      bool pushed_by_active = false;
      for (const v1::HostTarget& h : changes_.at(id).hosts()) {
        pushed_by_active |= h.host_id() == host_id && h.pushed_version() == version;
      }
      if (!pushed_by_active) id.clear();
    }
    if (id.empty()) {
      // An ended change's last push (a rollback's restore): recorded and
      // persisted, so `change show` counts the hosts restored.
      absl::MutexLock lock(&index_mu_);
      auto it = unacked_by_host_.find(host_id);
      if (it == unacked_by_host_.end()) return;
      id = it->second;
      ended = true;
    }
    auto c = changes_.find(id);
    if (c == changes_.end()) return;
    bool acked = false;
    for (v1::HostTarget& h : *c->second.mutable_hosts()) {
      if (h.host_id() != host_id || h.pushed_version() != version) continue;
      // Every ack of the pushed version (a reconnect re-pushes it) says again
      // what is in effect: a block switched off since, or back on.
      if (!ended) RecordNotInEffect(c->second, &h);
      if (h.acked_version() != version) {
        h.set_acked_version(version);
        acked = true;
      }
    }
    if (!ended || !acked) return;
    {
      absl::MutexLock lock(&index_mu_);
      auto it = unacked_by_host_.find(host_id);
      if (it != unacked_by_host_.end() && it->second == id) unacked_by_host_.erase(it);
    }
    PersistChange(id);
  });
}

void RolloutManager::RecordNotInEffect(const v1::Change& c, v1::HostTarget* h) const {
  h->clear_not_in_effect();
  absl::StatusOr<StoredHost> stored = fleet_->GetStored(h->host_id());
  if (!stored.ok() || stored->info.current_version() != h->pushed_version()) return;
  for (const v1::ParameterNote& n : stored->info.not_in_effect()) {
    // A change that sets the enable deciding it (rp_enable_mask, say) has
    // switched the block off itself: that is its effect, judged as such.
    if (c.knobs().contains(n.parameter()) && !c.knobs().contains(DecidingKnob(n.parameter()))) {
      *h->add_not_in_effect() = n;
    }
  }
  if (h->not_in_effect_size() > 0) {
    LogWarning(
        "a host applied the change, but not all of it is in effect: it is not counted as "
        "changed",
        {{"change", c.id()},
         {"host", h->host_id()},
         {"parameter", h->not_in_effect(0).parameter()},
         {"reason", h->not_in_effect(0).reason()}});
  }
}

void RolloutManager::OnNack(const std::string& host_id, const std::string& version,
                            const std::string& error) {
  loop_->PostUrgent([this, host_id, version, error] {
    const std::string id = ActiveChangeOf(host_id);
    bool pushed_by_active = false;
    if (!id.empty()) {
      for (const v1::HostTarget& h : changes_.at(id).hosts()) {
        pushed_by_active |= h.host_id() == host_id && h.pushed_version() == version;
      }
    }
    // Not the active change's version (none is active, or it has not pushed
    // to this host yet): an ended change's restore, still tracked.
    if (!pushed_by_active) {
      RestoreNacked(host_id, version, error);
      return;
    }
    v1::Change& c = changes_.at(id);
    if (!InFlight(c.state())) return;
    std::optional<v1::Verdict> v = StepEvaluator::Nack(c, host_id, version, error, clock_->Now());
    if (!v.has_value()) return;
    for (v1::HostTarget& h : *c.mutable_hosts()) {
      if (h.host_id() == host_id) h.set_rejected(absl::StrCat("NACK: ", error));
    }
    const std::string summary = v->summary();
    AddVerdict(&c, *std::move(v));
    Fail(&c, "nack", summary);
  });
}

void RolloutManager::RestoreNacked(const std::string& host_id, const std::string& version,
                                   const std::string& error) {
  std::string id;
  {
    absl::MutexLock lock(&index_mu_);
    auto it = unacked_by_host_.find(host_id);
    if (it == unacked_by_host_.end()) return;
    id = it->second;
  }
  auto c = changes_.find(id);
  if (c == changes_.end()) return;
  for (v1::HostTarget& h : *c->second.mutable_hosts()) {
    if (h.host_id() != host_id || h.pushed_version() != version) continue;
    // The host keeps the change's values (or whatever it could apply): the
    // restore stays unconfirmed, now with the agent's reason.
    h.set_rejected(absl::StrCat("restore NACK: ", error));
    LogError("a host refused the restore of an ended change",
             {{"change", id}, {"host", host_id}, {"version", version}, {"error", error}});
    PersistChange(id);
    return;
  }
}

void RolloutManager::OnGuardEvent(const std::string& host_id, const v1::GuardEvent& event) {
  if (event.kind() == "drift") return;
  loop_->PostUrgent([this, host_id, event] {
    const std::string id = ActiveChangeOf(host_id);
    if (id.empty()) return;
    v1::Change& c = changes_.at(id);
    if (!InFlight(c.state())) return;
    std::optional<v1::Verdict> v = StepEvaluator::GuardEvent(c, host_id, event, clock_->Now());
    if (!v.has_value()) return;
    const std::string rule = v->rule();
    for (v1::HostTarget& h : *c.mutable_hosts()) {
      if (h.host_id() == host_id) {
        h.set_rejected(rule == "lease_expired"
                           ? absl::StrCat("lease expired: ", event.detail())
                           : absl::StrCat("local guard: ", event.kind(), ": ", event.detail()));
      }
    }
    const std::string summary = v->summary();
    AddVerdict(&c, *std::move(v));
    Fail(&c, rule, summary);
  });
}

}  // namespace rocetune::controller
