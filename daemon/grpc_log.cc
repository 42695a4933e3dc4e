#include "daemon/grpc_log.h"

#include <grpc/support/log.h>

#include <string>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "daemon/logging.h"

namespace rocetune {
namespace {

constexpr size_t kMaxMessageBytes = 300;

struct GrpcLogState {
  absl::Mutex mu;
  int burst ABSL_GUARDED_BY(mu) = 20;
  absl::Duration period ABSL_GUARDED_BY(mu) = absl::Seconds(10);
  absl::Time window_start ABSL_GUARDED_BY(mu) = absl::InfinitePast();
  int in_window ABSL_GUARDED_BY(mu) = 0;
  uint64_t held_back ABSL_GUARDED_BY(mu) = 0;  // in the current window
  uint64_t suppressed_total ABSL_GUARDED_BY(mu) = 0;
};

GrpcLogState& State() {
  static auto* state = new GrpcLogState();
  return *state;
}

// Printable ASCII as is, everything else escaped: a client controls these bytes.
std::string Sanitize(const char* message) {
  std::string raw = message == nullptr ? "" : message;
  const bool cut = raw.size() > kMaxMessageBytes;
  if (cut) raw.resize(kMaxMessageBytes);
  std::string out = absl::CHexEscape(raw);
  if (cut) absl::StrAppend(&out, "...");
  return out;
}

void OnGrpcLog(gpr_log_func_args* args) {
  GrpcLogState& s = State();
  const absl::Time now = absl::Now();
  uint64_t report_suppressed = 0;
  {
    absl::MutexLock lock(&s.mu);
    if (now - s.window_start >= s.period) {
      report_suppressed = s.held_back;
      s.held_back = 0;
      s.in_window = 0;
      s.window_start = now;
    }
    if (s.in_window >= s.burst) {
      ++s.held_back;
      ++s.suppressed_total;
      return;
    }
    ++s.in_window;
  }
  if (report_suppressed > 0) {
    LogWarning("gRPC log lines suppressed", {{"count", absl::StrCat(report_suppressed)}});
  }
  LogLevel level = LogLevel::kDebug;
  if (args->severity == GPR_LOG_SEVERITY_INFO) level = LogLevel::kInfo;
  if (args->severity == GPR_LOG_SEVERITY_ERROR) level = LogLevel::kWarning;
  Log(level, "grpc",
      {{"source", absl::StrCat(args->file == nullptr ? "?" : args->file, ":", args->line)},
       {"detail", Sanitize(args->message)}});
}

}  // namespace

void RouteGrpcLogs(int burst, absl::Duration period) {
  GrpcLogState& s = State();
  {
    absl::MutexLock lock(&s.mu);
    s.burst = burst < 1 ? 1 : burst;
    s.period = period;
    // A new window starts with the next line (what was held back is still
    // reported then).
    s.window_start = absl::InfinitePast();
    s.in_window = 0;
  }
  gpr_set_log_function(&OnGrpcLog);
}

uint64_t GrpcLogLinesSuppressed() {
  GrpcLogState& s = State();
  absl::MutexLock lock(&s.mu);
  return s.suppressed_total;
}

}  // namespace rocetune
