#ifndef ROCETUNE_DAEMON_PROGRESS_H_
#define ROCETUNE_DAEMON_PROGRESS_H_

#include <atomic>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace rocetune {

// One main loop of a daemon whose progress the systemd watchdog depends on.
// Thread-safe.
class ProgressLoop {
 public:
  // The loop made progress now.
  void Mark();
  // How long the loop may go without a Mark before it counts as stalled.
  void SetDeadline(absl::Duration deadline);
  const std::string& name() const { return name_; }
  // Whether the last Mark (or the registration) is older than the deadline.
  bool StalledAt(absl::Time now) const;

 private:
  friend class Progress;
  ProgressLoop(std::string name, absl::Duration deadline);
  const std::string name_;
  std::atomic<int64_t> last_mark_nanos_;
  std::atomic<int64_t> deadline_nanos_;
};

// The process's registry of main loops: the watchdog is petted only while
// every registered loop has marked progress within its deadline, so a hung
// loop makes systemd restart the daemon.
class Progress {
 public:
  // Registers a loop (its clock starts now). The loop lives as long as the
  // process; registering a name again returns the same loop with the new deadline.
  static ProgressLoop* Register(const std::string& name, absl::Duration deadline);
  // Names of the loops stalled at `now`.
  static std::vector<std::string> Stalled(absl::Time now = absl::Now());
  // For SystemdNotifier::StartWatchdog: true when no loop is stalled; logs a
  // warning naming the stalled loops when that changes.
  static bool Healthy();
};

}  // namespace rocetune

#endif  // ROCETUNE_DAEMON_PROGRESS_H_
