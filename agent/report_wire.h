#ifndef ROCETUNE_AGENT_REPORT_WIRE_H_
#define ROCETUNE_AGENT_REPORT_WIRE_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"
#include "rocetune/v1/agent.pb.h"

namespace rocetune {

// Encodes AgentMessage{report} into a buffer kept across rounds: the bytes are
// exactly those of protobuf's SerializeToString of an AgentMessage holding
// `report` (fields in number order, proto3 defaults omitted; the agent's
// Reports carry no unknown fields, which this encoder would drop), so the
// controller parses it as any other AgentMessage. A field added to Report,
// CounterSample or LevelSample must be added here (report_wire_test checks
// the field lists).
//
// Why not protobuf's serializer: the Report of an 8-port host carries ~440
// CounterSamples, and protobuf walks them twice (ByteSizeLong, then
// _InternalSerialize; gRPC's own serialization of a message above its inline
// slice size even computes ByteSizeLong twice) and checks every string for
// UTF-8 on the way. Here each sample's size is computed from its field sizes
// just before it is written, in one pass. Counters and the scalar fields are
// encoded here; latency windows, guard events and job timings (rare, small)
// go through protobuf, element by element. Counter strings are not checked for UTF-8
// (protobuf's serializer only logs an invalid one and sends the same bytes).
// Levels (switches only) are encoded here like counters.
//
// Not thread-safe; one encoder per stream.
class ReportWireEncoder {
 public:
  // The encoding of AgentMessage{report}, valid until the next call.
  absl::string_view Encode(const v1::Report& report);

  // Writes to `out` the encoding of AgentMessage{report} with held_nanos set,
  // given `message`, an Encode() result of a Report whose held_nanos was 0.
  // held_nanos goes last: the bytes are protobuf's when the Report has no
  // jobs (field 9), and otherwise parse to the same message (a parser takes
  // fields in any order). False when `message` is not such an encoding
  // (`out` is then unspecified).
  static bool WithHeld(absl::string_view message, int64_t held_nanos, std::string* out);

 private:
  std::string buf_;
};

}  // namespace rocetune

#endif  // ROCETUNE_AGENT_REPORT_WIRE_H_
