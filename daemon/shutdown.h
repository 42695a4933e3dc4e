#ifndef ROCETUNE_DAEMON_SHUTDOWN_H_
#define ROCETUNE_DAEMON_SHUTDOWN_H_

#include <functional>

#include "absl/synchronization/notification.h"
#include "absl/time/time.h"

namespace rocetune {

// Graceful shutdown on SIGTERM / SIGINT. Install() blocks both signals (and
// SIGHUP, which runs the OnHangup callback, or is logged when there is none;
// it never ends the process) in the calling thread (call it in main() before
// starting any thread, so all threads inherit the mask) and starts a thread
// that waits for them with sigwait.
class Shutdown {
 public:
  // REQUIRES: called once, before other threads are created.
  static void Install();
  // True once a signal arrived or Request() was called.
  static bool Requested();
  // Blocks until shutdown is requested or `timeout` passes; returns Requested().
  static bool WaitFor(absl::Duration timeout);
  static void Wait();
  // Requests shutdown from inside the process.
  static void Request();
  // The signal that triggered shutdown, or 0.
  static int Signal();
  // Runs `fn` on the signal thread at each SIGHUP (replacing any earlier
  // callback; nullptr removes it). `fn` must outlive its registration.
  static void OnHangup(std::function<void()> fn);
};

}  // namespace rocetune

#endif  // ROCETUNE_DAEMON_SHUTDOWN_H_
