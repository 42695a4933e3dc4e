#include "controller/control_loop.h"

#include <algorithm>
#include <cstddef>
#include <iterator>
#include <utility>

#include "absl/strings/str_cat.h"
#include "daemon/logging.h"

namespace rocetune::controller {

void ControlLoop::Write(std::function<void()> write) {
  {
    absl::MutexLock lock(&writes_mu_);
    writes_.push_back(std::move(write));
    if (flush_posted_) return;
    flush_posted_ = true;
  }
  if (!executor_.Post([this] { FlushWrites(); })) FlushWrites();
}

void ControlLoop::FlushWrites() {
  absl::MutexLock flushing(&flush_mu_);
  for (;;) {
    std::vector<std::function<void()>> batch;
    bool more = false;
    {
      absl::MutexLock lock(&writes_mu_);
      const size_t n = std::min(writes_.size(), kMaxWriteBatch);
      batch.assign(std::make_move_iterator(writes_.begin()),
                   std::make_move_iterator(writes_.begin() + static_cast<ptrdiff_t>(n)));
      writes_.erase(writes_.begin(), writes_.begin() + static_cast<ptrdiff_t>(n));
      more = !writes_.empty();
      if (!more) flush_posted_ = false;
    }
    RunBatch(batch);
    // The rest behind the tasks waiting now; here when the loop is stopping.
    if (!more || executor_.Post([this] { FlushWrites(); })) return;
  }
}

void ControlLoop::RunBatch(const std::vector<std::function<void()>>& batch) {
  // Off the loop (a write at shutdown) the writes run one by one: a batch
  // there would make a task the loop is still draining wait for it.
  if (store_ == nullptr || batch.size() <= 1 || !executor_.OnExecutorThread()) {
    for (const auto& w : batch) w();
    return;
  }
  absl::Status s = store_->RunWriteBatch([&] {
    for (const auto& w : batch) w();
  });
  if (!s.ok()) {
    LogWarning("a batch of store writes did not commit; writing them one by one",
               {{"writes", absl::StrCat(batch.size())}, {"error", s.ToString()}});
    for (const auto& w : batch) w();
  }
}

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
