#ifndef ROCETUNE_DAEMON_LOGGING_H_
#define ROCETUNE_DAEMON_LOGGING_H_

#include <initializer_list>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace rocetune {

// Structured logging to stderr in logfmt, one line per event:
//   ts=2026-11-30T05:20:00.123Z level=info component=agent msg="registered" host=h1
// journald captures stderr when running under systemd. Under systemd (JOURNAL_STREAM
// set) the timestamp is left out and a syslog priority prefix ("<6>") is added.
enum class LogLevel { kDebug = 0, kInfo = 1, kWarning = 2, kError = 3 };

using LogField = std::pair<absl::string_view, std::string>;

// Parses "debug", "info", "warning"/"warn", "error".
absl::Status SetLogLevel(absl::string_view level);
LogLevel GetLogLevel();
// Sets the component field printed on every line (e.g. "agent").
void SetLogComponent(absl::string_view component);

void Log(LogLevel level, absl::string_view msg, std::initializer_list<LogField> fields = {});

// Logs only the first time `key` is seen in this process; returns true if it logged.
// Degraded modes (a missing counter, a peer down) use this so logs stay readable.
bool LogOnce(absl::string_view key, LogLevel level, absl::string_view msg,
             std::initializer_list<LogField> fields = {});

// Redirects log output (tests). nullptr restores stderr.
void SetLogSinkForTest(std::string* sink);

inline void LogDebug(absl::string_view msg, std::initializer_list<LogField> f = {}) {
  Log(LogLevel::kDebug, msg, f);
}
inline void LogInfo(absl::string_view msg, std::initializer_list<LogField> f = {}) {
  Log(LogLevel::kInfo, msg, f);
}
inline void LogWarning(absl::string_view msg, std::initializer_list<LogField> f = {}) {
  Log(LogLevel::kWarning, msg, f);
}
inline void LogError(absl::string_view msg, std::initializer_list<LogField> f = {}) {
  Log(LogLevel::kError, msg, f);
}

}  // namespace rocetune

#endif  // ROCETUNE_DAEMON_LOGGING_H_
