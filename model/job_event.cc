#include "model/job_event.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"

namespace rocetune {
namespace {

constexpr size_t kJobMax = 64;
constexpr size_t kOpMax = 32;
constexpr double kMaxMicros = 3.6e9;   // an hour
constexpr int64_t kMaxRank = 1 << 24;  // exclusive
constexpr uint64_t kMaxBytes = 1ULL << 50;

bool JobChar(char c) {
  return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == ':' ||
         c == '@' || c == '/' || c == '-';
}

bool OpChar(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_'; }

ParsedJobEvent Refuse(JobEventError e, std::string reason) {
  ParsedJobEvent p;
  p.error = e;
  p.reason = std::move(reason);
  return p;
}

}  // namespace

namespace {

// 1 to `max` characters, each one `ok` for.
absl::Status CheckToken(absl::string_view value, const char* key, size_t max, bool (*ok)(char),
                        const char* allowed) {
  if (value.empty() || value.size() > max) {
    return absl::InvalidArgumentError(absl::StrCat(key, ": 1-", max, " characters"));
  }
  if (!std::all_of(value.begin(), value.end(), ok)) {
    return absl::InvalidArgumentError(absl::StrCat(key, ": only ", allowed, " are allowed"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckJobName(absl::string_view job) {
  return CheckToken(job, "job", kJobMax, JobChar, "letters, digits and . _ : @ / -");
}

absl::Status CheckJobOp(absl::string_view op) {
  return CheckToken(op, "op", kOpMax, OpChar, "a-z, 0-9 and _");
}

ParsedJobEvent ParseJobEvent(absl::string_view d) {
  if (d.size() > kJobEventMaxBytes) {
    return Refuse(JobEventError::kOversized,
                  absl::StrCat(d.size(), " bytes, more than ", kJobEventMaxBytes));
  }
  if (!d.empty() && d.back() == '\n') d.remove_suffix(1);
  const size_t space = d.find(' ');
  const absl::string_view version = d.substr(0, space);
  if (version != kJobEventVersion) {
    return Refuse(JobEventError::kVersion,
                  absl::StrCat("version token \"", absl::CHexEscape(version.substr(0, 16)),
                               "\", want ", kJobEventVersion));
  }
  if (space == absl::string_view::npos) return Refuse(JobEventError::kMalformed, "no fields");
  ParsedJobEvent out;
  std::set<std::string> seen;
  for (absl::string_view field : absl::StrSplit(d.substr(space + 1), ' ')) {
    const size_t eq = field.find('=');
    if (eq == absl::string_view::npos || eq == 0) {
      return Refuse(
          JobEventError::kMalformed,
          absl::StrCat("field \"", absl::CHexEscape(field.substr(0, 32)), "\": want key=value"));
    }
    const std::string key(field.substr(0, eq));
    const absl::string_view value = field.substr(eq + 1);
    // absl's number parsers skip surrounding whitespace; the format has none.
    const bool has_space = std::any_of(value.begin(), value.end(), [](char c) {
      return absl::ascii_isspace(static_cast<unsigned char>(c)) ||
             absl::ascii_iscntrl(static_cast<unsigned char>(c));
    });
    if (!seen.insert(key).second) {
      return Refuse(JobEventError::kMalformed, absl::StrCat(key, ": given twice"));
    }
    if (key == "job" || key == "op") {
      absl::Status valid = key == "job" ? CheckJobName(value) : CheckJobOp(value);
      if (!valid.ok()) return Refuse(JobEventError::kMalformed, std::string(valid.message()));
      (key == "job" ? out.event.job : out.event.op) = std::string(value);
    } else if (key == "us") {
      double us = 0;
      if (has_space || !absl::SimpleAtod(value, &us) || !std::isfinite(us)) {
        return Refuse(JobEventError::kMalformed, "us: not a number");
      }
      if (us < 0 || us > kMaxMicros) {
        return Refuse(JobEventError::kMalformed,
                      absl::StrFormat("us: %g outside [0, %g]", us, kMaxMicros));
      }
      out.event.seconds = us * 1e-6;
    } else if (key == "rank") {
      int64_t rank = 0;
      if (has_space || !absl::SimpleAtoi(value, &rank) || rank < 0 || rank >= kMaxRank) {
        return Refuse(JobEventError::kMalformed,
                      absl::StrCat("rank: want an integer in [0, ", kMaxRank, ")"));
      }
      out.event.rank = rank;
    } else if (key == "bytes") {
      uint64_t bytes = 0;
      if (has_space || !absl::SimpleAtoi(value, &bytes) || bytes > kMaxBytes) {
        return Refuse(JobEventError::kMalformed,
                      absl::StrCat("bytes: want an integer in [0, ", kMaxBytes, "]"));
      }
      out.event.bytes = bytes;
    } else {
      return Refuse(JobEventError::kMalformed,
                    absl::StrCat("unknown key \"", absl::CHexEscape(key.substr(0, 32)), "\""));
    }
  }
  for (const char* required : {"job", "op", "us"}) {
    if (seen.count(required) == 0) {
      return Refuse(JobEventError::kMalformed, absl::StrCat(required, ": missing"));
    }
  }
  return out;
}

std::string FormatJobEvent(const JobEvent& e) {
  std::string out =
      absl::StrFormat("%s job=%s op=%s us=%.3f", kJobEventVersion, e.job, e.op, e.seconds * 1e6);
  if (e.rank >= 0) absl::StrAppend(&out, " rank=", e.rank);
  if (e.bytes > 0) absl::StrAppend(&out, " bytes=", e.bytes);
  return out;
}

const char* JobEventErrorName(JobEventError e) {
  switch (e) {
    case JobEventError::kOk:
      return "ok";
    case JobEventError::kOversized:
      return "oversized";
    case JobEventError::kVersion:
      return "version";
    case JobEventError::kMalformed:
      return "malformed";
  }
  return "malformed";
}

}  // namespace rocetune
