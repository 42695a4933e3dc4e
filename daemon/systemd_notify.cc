#include "daemon/systemd_notify.h"

#include <systemd/sd-daemon.h>

#include <cstdlib>
#include <string>

#include "absl/strings/str_cat.h"

namespace rocetune {

SystemdNotifier::~SystemdNotifier() {
  if (!stop_.HasBeenNotified()) stop_.Notify();
  if (watchdog_.joinable()) watchdog_.join();
}

bool SystemdNotifier::UnderSystemd() { return std::getenv("NOTIFY_SOCKET") != nullptr; }

void SystemdNotifier::Ready(absl::string_view status) {
  if (!UnderSystemd()) return;
  std::string msg = "READY=1";
  if (!status.empty()) absl::StrAppend(&msg, "\nSTATUS=", status);
  sd_notify(0, msg.c_str());
}

void SystemdNotifier::Stopping() {
  if (!UnderSystemd()) return;
  sd_notify(0, "STOPPING=1");
}

void SystemdNotifier::Status(absl::string_view status) {
  if (!UnderSystemd()) return;
  sd_notify(0, absl::StrCat("STATUS=", status).c_str());
}

absl::Duration SystemdNotifier::WatchdogInterval() {
  uint64_t usec = 0;
  if (sd_watchdog_enabled(0, &usec) <= 0) return absl::ZeroDuration();
  return absl::Microseconds(usec);
}

void SystemdNotifier::StartWatchdog(bool (*healthy)()) {
  absl::Duration interval = WatchdogInterval();
  if (interval == absl::ZeroDuration() || watchdog_.joinable()) return;
  watchdog_ = std::thread([this, interval, healthy]() {
    while (!stop_.WaitForNotificationWithTimeout(interval / 2)) {
      if (healthy == nullptr || healthy()) sd_notify(0, "WATCHDOG=1");
    }
  });
}

}  // namespace rocetune
