// ParseJobEvent (the job signal's wire format, model/job_event.h) on arbitrary
// bytes. Properties: a refusal always says why; an accepted line formats back
// (FormatJobEvent) to a line that parses to the same event (the duration to
// the formatter's nanosecond), so what the agent keeps is what was sent.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>

#include "model/job_event.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string line(reinterpret_cast<const char*>(data), size);
  const rocetune::ParsedJobEvent p = rocetune::ParseJobEvent(line);
  if (p.error != rocetune::JobEventError::kOk) {
    rocetune::fuzz::Check(!p.reason.empty());
    return 0;
  }
  rocetune::fuzz::Check(!p.event.job.empty() && !p.event.op.empty());
  const std::string again = rocetune::FormatJobEvent(p.event);
  rocetune::fuzz::Check(again.size() < rocetune::kJobEventMaxBytes);
  const rocetune::ParsedJobEvent q = rocetune::ParseJobEvent(again);
  rocetune::fuzz::Check(q.error == rocetune::JobEventError::kOk);
  rocetune::fuzz::Check(q.event.job == p.event.job && q.event.op == p.event.op);
  rocetune::fuzz::Check(q.event.rank == p.event.rank && q.event.bytes == p.event.bytes);
  rocetune::fuzz::Check(std::fabs(q.event.seconds - p.event.seconds) <= 1e-9);
  return 0;
}
