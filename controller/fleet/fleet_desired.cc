// Fleet: desired state, the agents' Acks, Nacks and guard events, and host
// persistence. The registry half is in fleet.cc.
#include <algorithm>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "controller/audit/audit_values.h"
#include "controller/fleet/fleet.h"
#include "daemon/logging.h"
#include "google/protobuf/util/message_differencer.h"

namespace rocetune::controller {
namespace {

bool Contains(const google::protobuf::RepeatedPtrField<std::string>& list, const std::string& s) {
  return std::find(list.begin(), list.end(), s) != list.end();
}

// Keeps the newest `kMaxRejected` rejected versions.
constexpr int kMaxRejected = 16;
void AddRejected(v1::HostInfo* info, const std::string& version) {
  if (version.empty() || Contains(info->rejected_versions(), version)) return;
  info->add_rejected_versions(version);
  while (info->rejected_versions_size() > kMaxRejected) {
    info->mutable_rejected_versions()->erase(info->mutable_rejected_versions()->begin());
  }
}

}  // namespace

v1::AuditEntry Fleet::MakeAudit(const std::string& actor, const std::string& action,
                                const std::string& host_id, const std::string& detail) const {
  v1::AuditEntry audit;
  audit.set_unix_nanos(absl::ToUnixNanos(clock_->Now()));
  audit.set_actor(actor);
  audit.set_action(action);
  audit.set_subject(host_id);
  audit.set_detail(detail);
  audit.add_host_ids(host_id);
  return audit;
}

void Fleet::PersistHost(const std::string& host_id, const v1::AuditEntry* audit) {
  if (store_ == nullptr) return;
  // The snapshot is taken when the write runs, so a write posted before a
  // desired-state commit cannot overwrite it with the older row.
  auto write = [this, host_id,
                audit = audit != nullptr ? std::optional<v1::AuditEntry>(*audit) : std::nullopt] {
    absl::MutexLock order(&persist_mu_);
    std::optional<StoredHost> snapshot;
    {
      absl::MutexLock lock(&mu_);
      auto it = hosts_.find(host_id);
      if (it != hosts_.end()) snapshot = it->second->stored;
    }
    absl::Status s;
    if (snapshot.has_value()) {
      s = audit.has_value() ? store_->SaveHostWithAudit(*snapshot, *audit)
                            : store_->SaveHost(*snapshot);
    } else if (audit.has_value()) {
      // Forgotten meanwhile: the row of what happened is kept all the same.
      s = store_->AppendAudit(*audit).status();
    }
    if (!s.ok()) LogError("cannot persist host", {{"host", host_id}, {"error", s.ToString()}});
  };
  if (loop_ != nullptr) {
    loop_->Write(std::move(write));
  } else {
    write();
  }
}

absl::StatusOr<std::string> Fleet::SetDesiredState(const std::string& host_id,
                                                   const v1::ParameterSet& params,
                                                   const DesiredStateActor& actor) {
  auto versions = UpdateDesiredStates(
      {DesiredUpdate{host_id, params}}, [&](const DesiredDecision& d) -> absl::Status {
        if (store_ == nullptr || d.next.empty()) return absl::OkStatus();
        Store::Batch batch;
        batch.hosts = d.next;
        for (const StoredHost& h : d.next) {
          v1::AuditEntry audit = MakeAudit(actor.actor, "set_desired_state", h.info.host_id(),
                                           absl::StrCat("version=", h.info.desired_version(),
                                                        " devices=", h.desired.devices_size()));
          audit.set_reason(actor.reason);
          audit.set_authenticated(actor.authenticated);
          audit.set_change_id(actor.change_id);
          const StoredHost& before = d.before.at(h.info.host_id());
          const v1::ParameterSet& old =
              before.desired_seq != 0 ? before.desired : before.info.current_parameters();
          for (v1::ValueChange& v : DiffParameterSets(h.info.host_id(), old, h.desired)) {
            *audit.add_values() = std::move(v);
          }
          batch.audit.push_back(std::move(audit));
        }
        absl::Status s = store_->Commit(batch);
        if (!s.ok()) {
          return absl::UnavailableError(
              absl::StrCat("cannot store desired state of ", host_id, ": ", s.message()));
        }
        return absl::OkStatus();
      });
  if (!versions.ok()) return versions.status();
  return versions->at(host_id);
}

absl::StatusOr<std::map<std::string, std::string>> Fleet::UpdateDesiredStates(
    const std::vector<DesiredUpdate>& updates, const CommitFn& commit) {
  absl::MutexLock writers(&desired_mu_);
  DesiredDecision decision;
  std::map<std::string, std::string>& versions = decision.versions;
  std::vector<StoredHost>& next = decision.next;
  {
    absl::MutexLock lock(&mu_);
    for (const DesiredUpdate& u : updates) {
      auto it = hosts_.find(u.host_id);
      if (it == hosts_.end()) {
        return absl::NotFoundError(absl::StrCat("unknown host \"", u.host_id, "\""));
      }
      const Host& h = *it->second;
      const bool same =
          h.stored.desired_seq != 0 &&
          google::protobuf::util::MessageDifferencer::Equals(h.stored.desired, u.params);
      if (same && h.stored.info.desired_lease_seconds() == u.lease_seconds) {
        versions[u.host_id] = h.stored.info.desired_version();
        continue;
      }
      decision.before[u.host_id] = h.stored;
      StoredHost n = h.stored;
      if (!same) {
        n.desired_seq = h.stored.desired_seq + 1;
        n.desired = u.params;
        n.info.set_desired_version(absl::StrCat(n.desired_seq));
      }
      // The same set with another lease keeps its version: confirming a
      // provisional set (lease 0) is pushed again, not applied anew.
      n.info.set_desired_lease_seconds(u.lease_seconds);
      versions[u.host_id] = n.info.desired_version();
      next.push_back(std::move(n));
    }
  }
  // Persisted before it takes effect; the fleet-wide lock is free meanwhile.
  if (absl::Status s = commit(decision); !s.ok()) return s;
  std::vector<std::pair<std::shared_ptr<AgentConnection>, const StoredHost*>> pushes;
  std::vector<v1::Event> events;
  {
    absl::MutexLock lock(&mu_);
    for (const StoredHost& n : next) {
      auto it = hosts_.find(n.info.host_id());
      if (it == hosts_.end()) continue;
      Host& h = *it->second;
      // Only the desired state is this writer's; the rest of the info may
      // have moved on (acks, reconnects) since the snapshot.
      h.stored.desired_seq = n.desired_seq;
      h.stored.desired = n.desired;
      h.stored.info.set_desired_version(n.info.desired_version());
      h.stored.info.set_desired_lease_seconds(n.info.desired_lease_seconds());
      if (h.conn != nullptr) pushes.emplace_back(h.conn, &n);
      events.push_back(MakeEvent("desired_state", n.info.host_id(),
                                 absl::StrCat("version=", n.info.desired_version())));
    }
  }
  for (auto& [conn, n] : pushes) {
    conn->PushDesiredState(n->info.desired_version(), n->desired, n->info.desired_lease_seconds());
  }
  Publish(events);
  return versions;
}

std::string Fleet::DesiredVersion(const std::string& host_id) const {
  absl::MutexLock lock(&mu_);
  auto it = hosts_.find(host_id);
  return it == hosts_.end() ? "" : it->second->stored.info.desired_version();
}

void Fleet::HandleAck(const std::string& host_id, const v1::Ack& ack) {
  if (ack.kind() == v1::PROBE_PLAN) {
    LogDebug("probe plan acked", {{"host", host_id}, {"version", ack.version()}});
    return;
  }
  {
    absl::MutexLock lock(&mu_);
    auto it = hosts_.find(host_id);
    if (it == hosts_.end()) return;
    v1::HostInfo& info = it->second->stored.info;
    info.set_last_ack_version(ack.version());
    info.set_current_version(ack.version());
    *info.mutable_current_parameters() = ack.applied();
    *info.mutable_not_in_effect() = ack.not_in_effect();
    info.clear_drift();
  }
  PersistHost(host_id, nullptr);
  if (FleetListener* l = listener_.load()) l->OnAck(host_id, ack.version());
  Publish({MakeEvent("ack", host_id, absl::StrCat("version=", ack.version()))});
}

void Fleet::HandleNack(const std::string& host_id, const v1::Nack& nack) {
  if (nack.kind() == v1::PROBE_PLAN) {
    LogWarning("probe plan refused",
               {{"host", host_id}, {"version", nack.version()}, {"error", nack.error()}});
    Publish({MakeEvent("probe_plan_nack", host_id, nack.error())});
    return;
  }
  v1::AuditEntry audit =
      MakeAudit(host_id, "nack", host_id,
                absl::StrCat("version=", nack.version(), " kept=", nack.kept_version(),
                             " error=", nack.error()));
  {
    absl::MutexLock lock(&mu_);
    auto it = hosts_.find(host_id);
    if (it == hosts_.end()) return;
    v1::HostInfo& info = it->second->stored.info;
    info.set_last_nack_version(nack.version());
    info.set_last_nack_error(nack.error());
    info.set_current_version(nack.kept_version());
    if (info.current_version() != info.last_ack_version()) info.clear_not_in_effect();
    AddRejected(&info, nack.version());
  }
  PersistHost(host_id, &audit);
  LogWarning("desired state refused",
             {{"host", host_id}, {"version", nack.version()}, {"error", nack.error()}});
  if (FleetListener* l = listener_.load()) l->OnNack(host_id, nack.version(), nack.error());
  Publish({MakeEvent("nack", host_id,
                     absl::StrCat("version=", nack.version(), " error=", nack.error()))});
}

void Fleet::ApplyRestoredParameters(const v1::GuardEvent& e, v1::HostInfo* info) {
  // Agents before restored_parameters send none: the last acked set is kept.
  if (e.has_restored_parameters() && e.restored_parameters().devices_size() > 0) {
    *info->mutable_current_parameters() = e.restored_parameters();
  }
}

void Fleet::HandleGuardEvents(const std::string& host_id,
                              const google::protobuf::RepeatedPtrField<v1::GuardEvent>& events) {
  for (const v1::GuardEvent& e : events) {
    if (e.kind() == "drift") {
      HandleDrift(host_id, e);
      continue;
    }
    const std::string text =
        absl::StrCat(e.kind(), ": ", e.detail(),
                     e.restored_version().empty() && e.kind() != "drift"
                         ? ""
                         : absl::StrCat(" (restored ", e.restored_version(), ")"));
    v1::AuditEntry audit = MakeAudit(host_id, "guard_event", host_id, text);
    {
      absl::MutexLock lock(&mu_);
      auto it = hosts_.find(host_id);
      if (it == hosts_.end()) return;
      v1::HostInfo& info = it->second->stored.info;
      info.set_last_guard_event(text);
      // A lease that expired judged nothing: the values are not rejected (the
      // agent refuses the version while its change is in flight, and takes it
      // again when pushed as final). It ran out with no stream, so the Hello
      // that followed already told what the host holds, and an ACK after
      // that may have put it back: the host's versions are left as they are.
      const bool lease = e.kind() == "lease_expired";
      // The guard restored last-known-good: the set it judged (named by the
      // event; agents before judged_version: the version it last acked) is
      // rejected and never re-pushed.
      const std::string judged =
          e.judged_version().empty() ? info.current_version() : e.judged_version();
      const std::string restored = e.restored_version() == "baseline" ? "" : e.restored_version();
      if (!lease && judged != restored) AddRejected(&info, judged);
      // The host holds the restored set only if the guard restored one (an
      // agent with no last-known-good restores nothing and keeps the judged
      // set) and nothing newer was acked since the set it judged.
      if (!lease && !e.restored_version().empty() && judged == info.current_version()) {
        info.set_current_version(restored);
        info.clear_not_in_effect();  // they described the set given up
        ApplyRestoredParameters(e, &info);
      }
    }
    PersistHost(host_id, &audit);
    LogWarning("agent guard event", {{"host", host_id}, {"event", text}});
    if (FleetListener* l = listener_.load()) l->OnGuardEvent(host_id, e);
    Publish({MakeEvent("guard_event", host_id, text)});
  }
}

void Fleet::SetObserveOnlyCheck(std::function<bool(const std::string& host_id)> check) {
  absl::MutexLock lock(&observe_mu_);
  observe_only_check_ = std::move(check);
}

namespace {

// The first correction of a drift finding goes out at once; when the same
// finding comes back, the next re-push waits kDriftRetryFirst, doubling to
// kDriftRetryMax. A finding that has not come back for kDriftRetryForget (or
// twice the current wait, if longer) starts over.
constexpr absl::Duration kDriftRetryFirst = absl::Seconds(1);
constexpr absl::Duration kDriftRetryMax = absl::Minutes(5);
constexpr absl::Duration kDriftRetryForget = absl::Minutes(1);

// The wait before the next re-push after `attempts` corrections of one finding.
absl::Duration DriftRetryWait(int attempts) {
  if (attempts <= 0) return absl::ZeroDuration();
  return std::min(kDriftRetryMax, kDriftRetryFirst * (int64_t{1} << std::min(attempts - 1, 20)));
}

// Whether `desired` names `p` (so that re-pushing it can write `p` back).
bool Names(const v1::ParameterSet& desired, const v1::DriftedParameter& p) {
  for (const v1::DeviceParameters& d : desired.devices()) {
    if (d.device() != p.device()) continue;
    const std::string& n = p.parameter();
    if (d.dcqcn().count(n) != 0) return true;
    if (n == "rp_enable_mask") return d.has_rp_enable_mask();
    if (n == "np_enable_mask") return d.has_np_enable_mask();
    if (n == "pfc.enable_mask") return d.has_pfc();
    if (n == "pfc.delay") return d.has_pfc() && d.pfc().has_delay();
    if (n == "pfc.prevention_timeout_ms") return d.has_pfc() && d.pfc().has_prevention_timeout_ms();
    return false;
  }
  return false;
}

}  // namespace

void Fleet::HandleDrift(const std::string& host_id, const v1::GuardEvent& event) {
  bool observe_only = options_.observe_only;
  if (!observe_only) {
    absl::MutexLock lock(&observe_mu_);
    observe_only = observe_only_check_ != nullptr && observe_only_check_(host_id);
  }
  const std::string found = absl::StrCat("drift: ", event.detail());
  const absl::Time now = clock_->Now();
  std::shared_ptr<AgentConnection> conn;
  std::string version;
  v1::ParameterSet desired;
  uint32_t lease = 0;
  bool repeated = false;
  bool waiting = false;  // a correction of this finding is backing off
  int attempt = 0;
  absl::Duration next_wait;
  std::vector<std::string> unmanaged;  // drifted parameters the desired state does not name
  {
    absl::MutexLock lock(&mu_);
    auto it = hosts_.find(host_id);
    if (it == hosts_.end()) return;
    Host& h = *it->second;
    v1::HostInfo& info = h.stored.info;
    repeated = info.last_guard_event() == found;
    info.set_last_guard_event(found);
    info.clear_drift();
    info.add_drift(event.detail());
    // A version the host rejected (Nack, guard restore) is never re-pushed.
    const bool can_push = !observe_only && h.stored.desired_seq != 0 && h.conn != nullptr &&
                          !Contains(info.rejected_versions(), info.desired_version());
    // A re-push writes only what the desired state names (agents before
    // `drifted` list nothing: the re-push is tried).
    bool any_managed = event.drifted().empty();
    for (const v1::DriftedParameter& p : event.drifted()) {
      if (h.stored.desired_seq != 0 && Names(h.stored.desired, p)) {
        any_managed = true;
      } else {
        unmanaged.push_back(absl::StrCat(p.device(), "/", p.parameter()));
      }
    }
    if (can_push && any_managed) {
      Host::DriftRetry& r = h.drift_retry;
      const std::string key = absl::StrCat(info.desired_version(), " ", event.detail());
      if (r.finding != key ||
          now - r.last > std::max(kDriftRetryForget, 2 * DriftRetryWait(r.attempts))) {
        r = Host::DriftRetry{key, 0, now, now};
      }
      if (now < r.next) {
        waiting = true;
      } else {
        attempt = ++r.attempts;
        r.last = now;
        next_wait = DriftRetryWait(r.attempts);
        r.next = now + next_wait;
        conn = h.conn;
        version = info.desired_version();
        desired = h.stored.desired;
        lease = info.desired_lease_seconds();
      }
    }
  }
  if (waiting) return;  // counted by the agent's drift gauge; audited at the next attempt
  std::string action;
  std::string detail;
  if (observe_only) {
    action = "drift_observed";
    detail = absl::StrCat("observe-only, not corrected; found ", event.detail());
  } else if (conn != nullptr) {
    action = "drift_corrected";
    detail = absl::StrCat("re-pushed desired version ", version, "; found ", event.detail());
    if (attempt > 1) {
      absl::StrAppend(&detail, " (attempt ", attempt,
                      ": the drift came back after the last re-push, so something else writes "
                      "these parameters; the next re-push waits ",
                      absl::FormatDuration(next_wait), ")");
    }
    if (!unmanaged.empty()) {
      absl::StrAppend(&detail, "; not in the desired state, so not corrected: ",
                      absl::StrJoin(unmanaged, ", "));
    }
  } else if (!unmanaged.empty() && !event.drifted().empty()) {
    action = "drift_observed";
    detail = absl::StrCat(
        "not in the host's desired state, so a re-push cannot correct it (push the value, or "
        "push without --replace): ",
        absl::StrJoin(unmanaged, ", "), "; found ", event.detail());
  } else {
    action = "drift_observed";
    detail = absl::StrCat("no desired state to re-push (none, rejected, or not connected); found ",
                          event.detail());
  }
  // A finding that repeats without a correction is audited once.
  if (repeated && conn == nullptr) {
    PersistHost(host_id, nullptr);
    return;
  }
  v1::AuditEntry audit = MakeAudit(host_id, action, host_id, detail);
  PersistHost(host_id, &audit);
  LogWarning("agent reported parameter drift",
             {{"host", host_id}, {"action", action}, {"detail", event.detail()}});
  if (conn != nullptr) conn->PushDesiredState(version, desired, lease);
  if (FleetListener* l = listener_.load()) l->OnGuardEvent(host_id, event);
  Publish({MakeEvent(action, host_id, detail)});
}

}  // namespace rocetune::controller
