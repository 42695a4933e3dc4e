#include "daemon/clock.h"

#include <time.h>

namespace rocetune {

Clock* Clock::Real() {
  static RealClock* clock = new RealClock();
  return clock;
}

absl::Duration RealClock::Monotonic() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return absl::DurationFromTimespec(ts);
}

absl::Time RealClock::Now() { return absl::Now(); }

void RealClock::SleepFor(absl::Duration d) { absl::SleepFor(d); }

bool Clock::WaitForNotification(const absl::Notification& n, absl::Duration d) {
  return n.WaitForNotificationWithTimeout(d);
}

FakeClock::FakeClock(absl::Time start) : now_(start), mono_(absl::Seconds(1)) {}

absl::Duration FakeClock::Monotonic() {
  absl::MutexLock lock(&mu_);
  return mono_;
}

absl::Time FakeClock::Now() {
  absl::MutexLock lock(&mu_);
  return now_;
}

void FakeClock::SleepFor(absl::Duration d) { Advance(d); }

bool FakeClock::WaitForNotification(const absl::Notification& n, absl::Duration d) {
  if (n.HasBeenNotified()) return true;
  Advance(d);
  return n.HasBeenNotified();
}

void FakeClock::Advance(absl::Duration d) {
  absl::MutexLock lock(&mu_);
  if (d < absl::ZeroDuration()) return;
  now_ += d;
  mono_ += d;
}

void ManualClock::SleepFor(absl::Duration d) {
  absl::MutexLock lock(&mu_);
  const absl::Duration until = mono_ + d;
  auto reached = [this, until]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return mono_ >= until; };
  auto waiting = waiting_.insert(d);
  // FakeClock::Advance moves mono_ under mu_, which re-evaluates this.
  mu_.Await(absl::Condition(&reached));
  waiting_.erase(waiting);
}

bool ManualClock::WaitForNotification(const absl::Notification& n, absl::Duration d) {
  absl::MutexLock lock(&mu_);
  const absl::Duration until = mono_ + d;
  auto reached = [this, until]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return mono_ >= until; };
  auto waiting = waiting_.insert(d);
  // A notification cannot wake this mutex's waiters: it is polled.
  while (!n.HasBeenNotified() &&
         !mu_.AwaitWithTimeout(absl::Condition(&reached), absl::Milliseconds(1))) {
  }
  waiting_.erase(waiting);
  return n.HasBeenNotified();
}

int ManualClock::waiters() {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(waiting_.size());
}

int ManualClock::waiters(absl::Duration asked) {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(waiting_.count(asked));
}

}  // namespace rocetune
