#include "daemon/shutdown.h"

#include <pthread.h>
#include <signal.h>

#include <atomic>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "daemon/logging.h"

namespace rocetune {
namespace {

absl::Notification& Note() {
  static absl::Notification* n = new absl::Notification();
  return *n;
}
std::atomic<int> g_signal{0};
absl::Mutex g_hangup_mu;
std::function<void()>* g_hangup ABSL_GUARDED_BY(g_hangup_mu) = nullptr;

void Hangup() {
  absl::MutexLock lock(&g_hangup_mu);
  if (g_hangup != nullptr && *g_hangup) {
    (*g_hangup)();
    return;
  }
  LogInfo(
      "SIGHUP: nothing to reload (certificates, keys and CAs are re-read every "
      "--tls_refresh)");
}
std::atomic<bool> g_requested{false};

}  // namespace

void Shutdown::Install() {
  static std::atomic<bool> installed{false};
  if (installed.exchange(true)) return;
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  // Writes to a closed gRPC/HTTP socket must not kill the daemon.
  signal(SIGPIPE, SIG_IGN);
  std::thread([set]() {
    int sig = 0;
    while (sigwait(&set, &sig) != 0 || sig == SIGHUP) {
      if (sig == SIGHUP) {
        Hangup();
        sig = 0;
      }
    }
    g_signal.store(sig);
    Shutdown::Request();
  }).detach();
}

bool Shutdown::Requested() { return g_requested.load(); }

bool Shutdown::WaitFor(absl::Duration timeout) {
  return Note().WaitForNotificationWithTimeout(timeout);
}

void Shutdown::Wait() { Note().WaitForNotification(); }

void Shutdown::Request() {
  if (!g_requested.exchange(true)) Note().Notify();
}

int Shutdown::Signal() { return g_signal.load(); }

void Shutdown::OnHangup(std::function<void()> fn) {
  absl::MutexLock lock(&g_hangup_mu);
  delete g_hangup;
  g_hangup = fn ? new std::function<void()>(std::move(fn)) : nullptr;
}

}  // namespace rocetune
