#include "controller/control_loop.h"

#include <utility>

#include "daemon/logging.h"

namespace rocetune::controller {

void ControlLoop::Audit(v1::AuditEntry entry, std::string what) {
  if (store_ == nullptr) return;
  Write([store = store_, e = std::move(entry), what = std::move(what)] {
    if (absl::StatusOr<int64_t> id = store->AppendAudit(e); !id.ok()) {
      LogError("cannot audit " + what, {{"actor", e.actor()},
                                        {"action", e.action()},
                                        {"subject", e.subject()},
                                        {"error", id.status().ToString()}});
    }
  });
}

}  // namespace rocetune::controller
