#ifndef ROCETUNE_SIM_SIM_CLOCK_H_
#define ROCETUNE_SIM_SIM_CLOCK_H_

#include "absl/time/time.h"
#include "daemon/clock.h"
#include "sim/fabric.h"

namespace rocetune::sim {

// The clock of the agents of a paced fabric (rocetune-fabricsim --agents):
// the fabric's simulated time as of its last synchronisation point, divided by
// the pace, from the moment the clock was made. An agent measures its rates
// (counter delta / interval) and its report intervals on this clock, so they
// are the fabric's own rates however far the fabric falls behind the wall
// clock: on a loaded machine a fabric that lags its pace no longer looks like a
// fleet whose traffic fell. The agent paces its rounds on the wall clock, so a
// lagging fabric gives it less simulated time per round. SleepFor sleeps on the
// wall clock: unlike Clock's contract it does not wait for this clock's time
// (which stops when the fabric does), so nothing may sleep until Monotonic()
// reaches a deadline on it. Thread-safe.
class SimClock : public Clock {
 public:
  // REQUIRES: `fabric` outlives this object; pace > 0.
  SimClock(const Fabric* fabric, double pace);

  absl::Duration Monotonic() override;
  absl::Time Now() override;
  void SleepFor(absl::Duration d) override;

 private:
  absl::Duration Elapsed() const;

  const Fabric* fabric_;
  const double pace_;
  const int64_t start_ns_;  // the fabric's synchronised time when made
  const absl::Duration mono_start_;
  const absl::Time wall_start_;
};

}  // namespace rocetune::sim

#endif  // ROCETUNE_SIM_SIM_CLOCK_H_
