#include "sim/sim_clock.h"

namespace rocetune::sim {

SimClock::SimClock(const Fabric* fabric, double pace)
    : fabric_(fabric),
      pace_(pace),
      start_ns_(fabric->synced_ns()),
      mono_start_(Clock::Real()->Monotonic()),
      wall_start_(Clock::Real()->Now()) {}

absl::Duration SimClock::Elapsed() const {
  return absl::Nanoseconds(static_cast<double>(fabric_->synced_ns() - start_ns_) / pace_);
}

absl::Duration SimClock::Monotonic() { return mono_start_ + Elapsed(); }

absl::Time SimClock::Now() { return wall_start_ + Elapsed(); }

void SimClock::SleepFor(absl::Duration d) { Clock::Real()->SleepFor(d); }

}  // namespace rocetune::sim
