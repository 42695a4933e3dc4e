#ifndef ROCETUNE_MODEL_JOB_EVENT_H_
#define ROCETUNE_MODEL_JOB_EVENT_H_

// The job signal's wire format, version 1 (docs/job-signal.md): one line per
// event, ASCII, at most kJobEventMaxBytes with its newline, on a stream
// connection to the agent's Unix socket:
//
//   RTJ1 job=<job> op=<op> us=<microseconds> [rank=<rank>] [bytes=<bytes>]\n
//
// Fields are separated by single spaces, each key at most once, in any order
// after the version token; ParseJobEvent takes one line, its newline optional. job: 1-64 of
// [A-Za-z0-9._:@/-]; op: 1-32 of [a-z0-9_] (allreduce, alltoall, barrier,
// step, ...); us: a decimal number of microseconds in [0, 3.6e9]; rank: an
// integer in [0, 2^24); bytes: an integer in [0, 2^50]. Anything else is
// refused with the reason, so the agent can count it.

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace rocetune {

inline constexpr size_t kJobEventMaxBytes = 512;
inline constexpr char kJobEventVersion[] = "RTJ1";

struct JobEvent {
  std::string job;
  std::string op;
  double seconds = 0;
  int64_t rank = -1;  // -1: not given
  uint64_t bytes = 0;
};

// Why a line was refused; kOk when it parsed.
enum class JobEventError {
  kOk,
  kOversized,  // longer than kJobEventMaxBytes
  kVersion,    // does not start with a version token this agent reads
  kMalformed,  // the version is RTJ1, the rest is not
};

struct ParsedJobEvent {
  JobEventError error = JobEventError::kOk;
  std::string reason;  // when error != kOk: what and where, e.g. "us: not a number"
  JobEvent event;
};

ParsedJobEvent ParseJobEvent(absl::string_view line);

// The rules for a job's name and an op's, as the parser applies them (the
// controller checks the names in a report against the same rules);
// kInvalidArgument says which was broken, e.g. "job: 1-64 characters".
absl::Status CheckJobName(absl::string_view job);
absl::Status CheckJobOp(absl::string_view op);

// The line for `e`, without its newline (what the C client sends).
std::string FormatJobEvent(const JobEvent& e);

// "ok", "oversized", "version", "malformed": the label the agent counts under.
const char* JobEventErrorName(JobEventError e);

}  // namespace rocetune

#endif  // ROCETUNE_MODEL_JOB_EVENT_H_
