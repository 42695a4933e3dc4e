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

void FakeClock::Advance(absl::Duration d) {
  absl::MutexLock lock(&mu_);
  if (d < absl::ZeroDuration()) return;
  now_ += d;
  mono_ += d;
}

}  // namespace rocetune
