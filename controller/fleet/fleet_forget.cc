// Fleet: forgetting a host that is gone for good (rocetunectl host forget).
#include "absl/strings/str_cat.h"
#include "controller/fleet/fleet.h"
#include "daemon/logging.h"

namespace rocetune::controller {

absl::Status Fleet::ForgetHost(const std::string& host_id, const DesiredStateActor& actor) {
  // persist_mu_ first (as PersistHost): no older snapshot of the host is
  // written back after its row is deleted.
  absl::MutexLock persist(&persist_mu_);
  std::string detail;
  {
    // Held across the store write: a Hello for this host waits, so the host
    // cannot come back between the check and the erase.
    absl::MutexLock lock(&mu_);
    auto it = hosts_.find(host_id);
    if (it == hosts_.end()) {
      return absl::NotFoundError(absl::StrCat("unknown host \"", host_id, "\""));
    }
    const v1::HostState state = StateOf(*it->second, clock_->Now());
    if (state != v1::HOST_GONE) {
      return absl::FailedPreconditionError(
          absl::StrCat("host ", host_id, " is ", v1::HostState_Name(state),
                       "; only a GONE host (disconnected, or silent past --gone_after) can be "
                       "forgotten"));
    }
    const v1::HostInfo& info = it->second->stored.info;
    detail = absl::StrCat("forgotten: current_version=", info.current_version(),
                          " desired_version=", info.desired_version());
    if (store_ != nullptr) {
      Store::Batch batch;
      batch.forget_hosts.push_back(host_id);
      v1::AuditEntry audit = MakeAudit(actor.actor, "host_forgotten", host_id, detail);
      audit.set_reason(actor.reason);
      audit.set_authenticated(actor.authenticated);
      batch.audit.push_back(std::move(audit));
      if (absl::Status s = store_->Commit(batch); !s.ok()) {
        return absl::Status(s.code(),
                            absl::StrCat("cannot forget host ", host_id, ": ", s.message()));
      }
    }
    hosts_.erase(it);
  }
  if (telemetry_ != nullptr) telemetry_->Remove(host_id);
  LogInfo("host forgotten", {{"host", host_id}, {"actor", actor.actor}});
  Publish({MakeEvent("host_forgotten", host_id, detail)});
  return absl::OkStatus();
}

}  // namespace rocetune::controller
