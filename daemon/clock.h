#ifndef ROCETUNE_DAEMON_CLOCK_H_
#define ROCETUNE_DAEMON_CLOCK_H_

#include <set>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"

namespace rocetune {

// Monotonic and wall time. The only way rocetune code reads time, so tests can
// substitute FakeClock.
class Clock {
 public:
  virtual ~Clock() = default;
  // Monotonic time since an arbitrary epoch; never goes backwards.
  virtual absl::Duration Monotonic() = 0;
  // Wall-clock time.
  virtual absl::Time Now() = 0;
  // Blocks the caller for `d` of this clock's time.
  virtual void SleepFor(absl::Duration d) = 0;
  // Blocks until `n` is notified or `d` of this clock's time has passed;
  // true when notified. By default a wall-clock wait on `n`.
  virtual bool WaitForNotification(const absl::Notification& n, absl::Duration d);

  // The process-wide real clock.
  static Clock* Real();
};

class RealClock : public Clock {
 public:
  absl::Duration Monotonic() override;
  absl::Time Now() override;
  void SleepFor(absl::Duration d) override;
};

// A clock that moves only when told to. Thread-safe. SleepFor advances the
// clock by the requested amount instead of blocking.
class FakeClock : public Clock {
 public:
  explicit FakeClock(absl::Time start = absl::FromUnixSeconds(1'700'000'000));
  absl::Duration Monotonic() override;
  absl::Time Now() override;
  void SleepFor(absl::Duration d) override;
  // Returns at once: true when `n` is notified, else advances by `d`.
  bool WaitForNotification(const absl::Notification& n, absl::Duration d) override;
  void Advance(absl::Duration d);

 protected:
  absl::Mutex mu_;
  absl::Time now_ ABSL_GUARDED_BY(mu_);
  absl::Duration mono_ ABSL_GUARDED_BY(mu_);
};

// A FakeClock whose sleeps and waits block until the test has advanced it far
// enough (a wait also ends when its notification is notified). For loops that
// run on their own threads: the test decides when each of their intervals has
// passed. Thread-safe.
class ManualClock : public FakeClock {
 public:
  using FakeClock::FakeClock;
  void SleepFor(absl::Duration d) override;
  bool WaitForNotification(const absl::Notification& n, absl::Duration d) override;
  // How many threads are blocked in SleepFor or WaitForNotification now:
  // all of them, or those that asked to wait for exactly `asked` (so a test
  // can tell one loop's wait from another's).
  int waiters();
  int waiters(absl::Duration asked);

 private:
  std::multiset<absl::Duration> waiting_ ABSL_GUARDED_BY(mu_);
};

}  // namespace rocetune

#endif  // ROCETUNE_DAEMON_CLOCK_H_
