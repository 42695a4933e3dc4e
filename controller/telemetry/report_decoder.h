#ifndef ROCETUNE_CONTROLLER_TELEMETRY_REPORT_DECODER_H_
#define ROCETUNE_CONTROLLER_TELEMETRY_REPORT_DECODER_H_

#include <vector>

#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "controller/telemetry/telemetry_store.h"
#include "rocetune/v1/agent.pb.h"

namespace rocetune::controller {

// The controller's fast path for the message it receives most: an
// AgentMessage carrying a Report. Protobuf's parser allocates and frees every
// CounterSample and its two strings (about 130 objects per Report) and was
// the largest share of the controller's own CPU per Report at 10k agents.
// This decoder reads the counters in place, as views into the message bytes,
// and hands the rest of the Report (seq, timestamps, latency windows, guard
// events, job timings) to protobuf, into a message it reuses.
//
// It decodes only what it can decode exactly as protobuf would: an
// AgentMessage whose only field is one `report`, with the fields this
// version knows, ASCII strings in the counters and well-formed wire format.
// Anything else (another message, unknown or repeated top-level fields, a
// wire-type mismatch, non-ASCII text, truncation) returns false and the
// caller parses the bytes with protobuf, whose verdict, message or error,
// stands. So the decoder never refuses anything itself.
class ReportDecoder {
 public:
  // True when `bytes` was decoded; head() and counters() are then valid until
  // the next call, counters() pointing into `bytes`.
  bool Decode(absl::string_view bytes);

  // The Report without its counters.
  const v1::Report& head() const { return head_; }
  absl::Span<const CounterInput> counters() const { return counters_; }

 private:
  bool DecodeReport(const char* p, const char* end);

  v1::Report head_;
  std::vector<CounterInput> counters_;
};

}  // namespace rocetune::controller

#endif  // ROCETUNE_CONTROLLER_TELEMETRY_REPORT_DECODER_H_
