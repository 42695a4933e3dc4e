// ThreadSanitizer annotations for the distribution's Abseil synchronization
// library, linked into the concurrency tests of the TSan build only.
//
// Debian's libabsl_synchronization is not built with -fsanitize=thread, so
// TSan cannot see that absl::Mutex, absl::CondVar and absl::Notification order
// memory accesses (they lock with their own atomics and futexes, which TSan
// does not intercept); every access guarded by an absl::Mutex would be
// reported as a race. This file defines the same (non-inline) members; a
// definition in the executable takes precedence over the shared library's,
// also for the library's own callers (gRPC included). Each one calls the
// library's definition (dlsym RTLD_NEXT) and tells TSan about the
// happens-before edge: acquire after taking a lock, release before giving it
// up. Reader locks are treated like writer locks (a release by one reader
// orders it before the next locker), which can only hide races between two
// readers, never invent one.
#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/base/config.h"
#include "absl/base/options.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"

extern "C" {
void __tsan_acquire(void* addr);
void __tsan_release(void* addr);
}

namespace {

// The library's definition of the member whose mangled name, after
// "_ZN4absl<inline namespace>", is `suffix` ("K" prefix: const member).
void* Real(const char* suffix, bool is_const = false) {
  const std::string ns = ABSL_INTERNAL_TOKEN_STR(ABSL_OPTION_INLINE_NAMESPACE_NAME);
  const std::string name =
      std::string(is_const ? "_ZNK4absl" : "_ZN4absl") + std::to_string(ns.size()) + ns + suffix;
  void* fn = dlsym(RTLD_NEXT, name.c_str());
  if (fn == nullptr) {
    std::fprintf(stderr, "tsan annotations: %s not found\n", name.c_str());
    std::abort();
  }
  return fn;
}

template <typename Fn>
Fn RealAs(const char* suffix, bool is_const = false) {
  return reinterpret_cast<Fn>(Real(suffix, is_const));
}

void* Addr(const void* p) { return const_cast<void*>(p); }

}  // namespace

namespace absl {
ABSL_NAMESPACE_BEGIN

void Mutex::Lock() {
  static auto real = RealAs<void (*)(Mutex*)>("5Mutex4LockEv");
  real(this);
  __tsan_acquire(this);
}

void Mutex::Unlock() {
  static auto real = RealAs<void (*)(Mutex*)>("5Mutex6UnlockEv");
  __tsan_release(this);
  real(this);
}

void Mutex::ReaderLock() {
  static auto real = RealAs<void (*)(Mutex*)>("5Mutex10ReaderLockEv");
  real(this);
  __tsan_acquire(this);
}

void Mutex::ReaderUnlock() {
  static auto real = RealAs<void (*)(Mutex*)>("5Mutex12ReaderUnlockEv");
  __tsan_release(this);
  real(this);
}

bool Mutex::TryLock() {
  static auto real = RealAs<bool (*)(Mutex*)>("5Mutex7TryLockEv");
  const bool ok = real(this);
  if (ok) __tsan_acquire(this);
  return ok;
}

bool Mutex::ReaderTryLock() {
  static auto real = RealAs<bool (*)(Mutex*)>("5Mutex13ReaderTryLockEv");
  const bool ok = real(this);
  if (ok) __tsan_acquire(this);
  return ok;
}

void Mutex::LockWhen(const Condition& cond) {
  static auto real =
      RealAs<void (*)(Mutex*, const Condition&)>("5Mutex8LockWhenERKNS0_9ConditionE");
  real(this, cond);
  __tsan_acquire(this);
}

void Mutex::ReaderLockWhen(const Condition& cond) {
  static auto real =
      RealAs<void (*)(Mutex*, const Condition&)>("5Mutex14ReaderLockWhenERKNS0_9ConditionE");
  real(this, cond);
  __tsan_acquire(this);
}

bool Mutex::LockWhenWithTimeout(const Condition& cond, absl::Duration timeout) {
  static auto real = RealAs<bool (*)(Mutex*, const Condition&, absl::Duration)>(
      "5Mutex19LockWhenWithTimeoutERKNS0_9ConditionENS0_8DurationE");
  const bool r = real(this, cond, timeout);
  __tsan_acquire(this);  // held on return either way
  return r;
}

bool Mutex::LockWhenWithDeadline(const Condition& cond, absl::Time deadline) {
  static auto real = RealAs<bool (*)(Mutex*, const Condition&, absl::Time)>(
      "5Mutex20LockWhenWithDeadlineERKNS0_9ConditionENS0_4TimeE");
  const bool r = real(this, cond, deadline);
  __tsan_acquire(this);
  return r;
}

void Mutex::Await(const Condition& cond) {
  static auto real = RealAs<void (*)(Mutex*, const Condition&)>("5Mutex5AwaitERKNS0_9ConditionE");
  __tsan_release(this);
  real(this, cond);
  __tsan_acquire(this);
}

bool Mutex::AwaitWithTimeout(const Condition& cond, absl::Duration timeout) {
  static auto real = RealAs<bool (*)(Mutex*, const Condition&, absl::Duration)>(
      "5Mutex16AwaitWithTimeoutERKNS0_9ConditionENS0_8DurationE");
  __tsan_release(this);
  const bool r = real(this, cond, timeout);
  __tsan_acquire(this);
  return r;
}

bool Mutex::AwaitWithDeadline(const Condition& cond, absl::Time deadline) {
  static auto real = RealAs<bool (*)(Mutex*, const Condition&, absl::Time)>(
      "5Mutex17AwaitWithDeadlineERKNS0_9ConditionENS0_4TimeE");
  __tsan_release(this);
  const bool r = real(this, cond, deadline);
  __tsan_acquire(this);
  return r;
}

void CondVar::Wait(Mutex* mu) {
  static auto real = RealAs<void (*)(CondVar*, Mutex*)>("7CondVar4WaitEPNS0_5MutexE");
  __tsan_release(mu);
  real(this, mu);
  __tsan_acquire(mu);
}

bool CondVar::WaitWithTimeout(Mutex* mu, absl::Duration timeout) {
  static auto real = RealAs<bool (*)(CondVar*, Mutex*, absl::Duration)>(
      "7CondVar15WaitWithTimeoutEPNS0_5MutexENS0_8DurationE");
  __tsan_release(mu);
  const bool r = real(this, mu, timeout);
  __tsan_acquire(mu);
  return r;
}

bool CondVar::WaitWithDeadline(Mutex* mu, absl::Time deadline) {
  static auto real = RealAs<bool (*)(CondVar*, Mutex*, absl::Time)>(
      "7CondVar16WaitWithDeadlineEPNS0_5MutexENS0_4TimeE");
  __tsan_release(mu);
  const bool r = real(this, mu, deadline);
  __tsan_acquire(mu);
  return r;
}

// HasBeenNotified() is inline (compiled with TSan): it acquire-loads the
// flag that follows the Notification's mutex, so Notify releases on that
// address too.
void Notification::Notify() {
  static auto real = RealAs<void (*)(Notification*)>("12Notification6NotifyEv");
  __tsan_release(this);
  __tsan_release(reinterpret_cast<char*>(this) + sizeof(Mutex));
  real(this);
}

void Notification::WaitForNotification() const {
  static auto real =
      RealAs<void (*)(const Notification*)>("12Notification19WaitForNotificationEv", true);
  real(this);
  __tsan_acquire(Addr(this));
}

bool Notification::WaitForNotificationWithTimeout(absl::Duration timeout) const {
  static auto real = RealAs<bool (*)(const Notification*, absl::Duration)>(
      "12Notification30WaitForNotificationWithTimeoutENS0_8DurationE", true);
  const bool r = real(this, timeout);
  if (r) __tsan_acquire(Addr(this));
  return r;
}

ABSL_NAMESPACE_END
}  // namespace absl
