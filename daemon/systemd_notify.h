#ifndef ROCETUNE_DAEMON_SYSTEMD_NOTIFY_H_
#define ROCETUNE_DAEMON_SYSTEMD_NOTIFY_H_

#include <thread>

#include "absl/strings/string_view.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"

namespace rocetune {

// sd_notify(3) for Type=notify units. Every call is a no-op when the process
// was not started by systemd (NOTIFY_SOCKET unset).
class SystemdNotifier {
 public:
  SystemdNotifier() = default;
  ~SystemdNotifier();  // stops the watchdog thread
  SystemdNotifier(const SystemdNotifier&) = delete;
  SystemdNotifier& operator=(const SystemdNotifier&) = delete;

  static bool UnderSystemd();
  void Ready(absl::string_view status = "");
  void Stopping();
  void Status(absl::string_view status);
  // Starts a thread sending WATCHDOG=1 at half the unit's WatchdogSec while
  // `healthy` returns true. No-op if the watchdog is not enabled.
  void StartWatchdog(bool (*healthy)() = nullptr);
  // The watchdog period systemd asked for, or zero.
  static absl::Duration WatchdogInterval();

 private:
  absl::Notification stop_;
  std::thread watchdog_;
};

}  // namespace rocetune

#endif  // ROCETUNE_DAEMON_SYSTEMD_NOTIFY_H_
