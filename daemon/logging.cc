#include "daemon/logging.h"

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/ascii.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "daemon/json.h"

namespace rocetune {
namespace {

std::atomic<int> g_level{static_cast<int>(LogLevel::kInfo)};

struct LogState {
  absl::Mutex mu;
  std::string component ABSL_GUARDED_BY(mu) = "rocetune";
  std::string* sink ABSL_GUARDED_BY(mu) = nullptr;
  absl::flat_hash_set<std::string> once ABSL_GUARDED_BY(mu);
};

LogState& State() {
  static LogState* s = new LogState();
  return *s;
}

const char* LevelName(LogLevel l) {
  switch (l) {
    case LogLevel::kDebug:
      return "debug";
    case LogLevel::kInfo:
      return "info";
    case LogLevel::kWarning:
      return "warning";
    case LogLevel::kError:
      return "error";
  }
  return "info";
}

int SyslogPriority(LogLevel l) {
  switch (l) {
    case LogLevel::kDebug:
      return 7;
    case LogLevel::kInfo:
      return 6;
    case LogLevel::kWarning:
      return 4;
    case LogLevel::kError:
      return 3;
  }
  return 6;
}

// Quotes a logfmt value when it contains spaces, quotes or '=' or is empty.
void AppendValue(std::string& out, absl::string_view v) {
  bool quote = v.empty();
  for (char c : v) {
    if (c == ' ' || c == '"' || c == '=' || c == '\n' || c == '\t') {
      quote = true;
      break;
    }
  }
  if (!quote) {
    out.append(v.data(), v.size());
    return;
  }
  // logfmt quoted values use the same escapes as JSON strings.
  out.append(JsonQuote(v));
}

}  // namespace

absl::Status SetLogLevel(absl::string_view level) {
  std::string l = absl::AsciiStrToLower(level);
  LogLevel v;
  if (l == "debug") {
    v = LogLevel::kDebug;
  } else if (l == "info") {
    v = LogLevel::kInfo;
  } else if (l == "warning" || l == "warn") {
    v = LogLevel::kWarning;
  } else if (l == "error") {
    v = LogLevel::kError;
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown log level \"", level, "\" (want debug, info, warning or error)"));
  }
  g_level.store(static_cast<int>(v));
  return absl::OkStatus();
}

LogLevel GetLogLevel() { return static_cast<LogLevel>(g_level.load()); }

void SetLogComponent(absl::string_view component) {
  LogState& s = State();
  absl::MutexLock lock(&s.mu);
  s.component = std::string(component);
}

void SetLogSinkForTest(std::string* sink) {
  LogState& s = State();
  absl::MutexLock lock(&s.mu);
  s.sink = sink;
}

void Log(LogLevel level, absl::string_view msg, std::initializer_list<LogField> fields) {
  if (static_cast<int>(level) < g_level.load()) return;
  static const bool journald = std::getenv("JOURNAL_STREAM") != nullptr;
  LogState& s = State();
  std::string line;
  line.reserve(128);
  if (journald) {
    absl::StrAppend(&line, "<", SyslogPriority(level), ">");
  } else {
    absl::StrAppend(
        &line, "ts=", absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", absl::Now(), absl::UTCTimeZone()),
        " ");
  }
  absl::StrAppend(&line, "level=", LevelName(level), " component=");
  absl::MutexLock lock(&s.mu);
  AppendValue(line, s.component);
  line.append(" msg=");
  AppendValue(line, msg);
  for (const auto& [k, v] : fields) {
    line.push_back(' ');
    line.append(k.data(), k.size());
    line.push_back('=');
    AppendValue(line, v);
  }
  line.push_back('\n');
  if (s.sink != nullptr) {
    s.sink->append(line);
    return;
  }
  // One write(2) per line so concurrent writers do not interleave.
  ssize_t unused = ::write(STDERR_FILENO, line.data(), line.size());
  (void)unused;
}

bool LogOnce(absl::string_view key, LogLevel level, absl::string_view msg,
             std::initializer_list<LogField> fields) {
  {
    LogState& s = State();
    absl::MutexLock lock(&s.mu);
    // Looked up first: a key seen before (the usual case: callers log a
    // recurring condition every round) costs no string copy.
    if (s.once.contains(key)) return false;
    s.once.insert(std::string(key));
  }
  Log(level, msg, fields);
  return true;
}

}  // namespace rocetune
