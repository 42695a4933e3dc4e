#include "daemon/progress.h"

#include <memory>

#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "daemon/logging.h"

namespace rocetune {
namespace {

struct Registry {
  absl::Mutex mu;
  std::vector<std::unique_ptr<ProgressLoop>> loops ABSL_GUARDED_BY(mu);
  std::string last_stalled ABSL_GUARDED_BY(mu);
};

Registry& TheRegistry() {
  static Registry* r = new Registry();
  return *r;
}

}  // namespace

ProgressLoop::ProgressLoop(std::string name, absl::Duration deadline)
    : name_(std::move(name)),
      last_mark_nanos_(absl::ToUnixNanos(absl::Now())),
      deadline_nanos_(absl::ToInt64Nanoseconds(deadline)) {}

void ProgressLoop::Mark() { last_mark_nanos_.store(absl::ToUnixNanos(absl::Now())); }

void ProgressLoop::SetDeadline(absl::Duration deadline) {
  deadline_nanos_.store(absl::ToInt64Nanoseconds(deadline));
}

bool ProgressLoop::StalledAt(absl::Time now) const {
  return absl::ToUnixNanos(now) - last_mark_nanos_.load() > deadline_nanos_.load();
}

ProgressLoop* Progress::Register(const std::string& name, absl::Duration deadline) {
  Registry& r = TheRegistry();
  absl::MutexLock lock(&r.mu);
  for (const auto& loop : r.loops) {
    if (loop->name() == name) {
      loop->SetDeadline(deadline);
      loop->Mark();
      return loop.get();
    }
  }
  r.loops.push_back(std::unique_ptr<ProgressLoop>(new ProgressLoop(name, deadline)));
  return r.loops.back().get();
}

std::vector<std::string> Progress::Stalled(absl::Time now) {
  Registry& r = TheRegistry();
  absl::MutexLock lock(&r.mu);
  std::vector<std::string> out;
  for (const auto& loop : r.loops) {
    if (loop->StalledAt(now)) out.push_back(loop->name());
  }
  return out;
}

bool Progress::Healthy() {
  const std::vector<std::string> stalled = Stalled();
  const std::string names = absl::StrJoin(stalled, ",");
  Registry& r = TheRegistry();
  bool changed = false;
  {
    absl::MutexLock lock(&r.mu);
    changed = names != r.last_stalled;
    r.last_stalled = names;
  }
  if (changed && !stalled.empty()) {
    LogWarning("main loop made no progress within its deadline; watchdog not petted",
               {{"loops", names}});
  } else if (changed) {
    LogInfo("every main loop is making progress again; watchdog petted");
  }
  return stalled.empty();
}

}  // namespace rocetune
