#include "controller/telemetry/report_decoder.h"

#include <cstdint>

#include "absl/base/casts.h"

namespace rocetune::controller {
namespace {

enum WireType : uint32_t { kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kFixed32 = 5 };

// Reads a varint of at most 10 bytes (protobuf's limit); false on truncation
// or an over-long encoding.
bool ReadVarint(const char*& p, const char* end, uint64_t* out) {
  uint64_t v = 0;
  for (int shift = 0; shift < 70 && p < end; shift += 7) {
    const uint8_t b = static_cast<uint8_t>(*p++);
    v |= static_cast<uint64_t>(b & 0x7f) << shift;
    if ((b & 0x80) == 0) {
      // The tenth byte may carry only the top bit.
      if (shift == 63 && b > 1) return false;
      *out = v;
      return true;
    }
  }
  return false;
}

// A tag: field number and wire type. Field 0 is invalid.
bool ReadTag(const char*& p, const char* end, uint32_t* field, uint32_t* type) {
  uint64_t tag = 0;
  if (!ReadVarint(p, end, &tag) || tag > UINT32_MAX) return false;
  *field = static_cast<uint32_t>(tag >> 3);
  *type = static_cast<uint32_t>(tag & 7);
  return *field != 0;
}

// A length-delimited payload inside [p, end).
bool ReadBytes(const char*& p, const char* end, absl::string_view* out) {
  uint64_t len = 0;
  if (!ReadVarint(p, end, &len) || len > static_cast<uint64_t>(end - p)) return false;
  *out = absl::string_view(p, static_cast<size_t>(len));
  p += len;
  return true;
}

// ASCII is valid UTF-8, which protobuf checks proto3 strings for; other text
// goes to protobuf.
bool IsAscii(absl::string_view s) {
  for (char c : s) {
    if (static_cast<uint8_t>(c) >= 0x80) return false;
  }
  return true;
}

bool DecodeCounter(const char* p, const char* end, CounterInput* out) {
  *out = CounterInput();
  out->priority = 0;  // proto3: an absent priority is 0
  while (p < end) {
    uint32_t field = 0, type = 0;
    if (!ReadTag(p, end, &field, &type)) return false;
    uint64_t v = 0;
    absl::string_view s;
    switch (field) {
      case 1:  // device
      case 4:  // name
        if (type != kLengthDelimited || !ReadBytes(p, end, &s) || !IsAscii(s)) return false;
        if (field == 4) out->name = s;
        break;
      case 2:  // port
      case 3:  // priority
      case 5:  // delta
        if (type != kVarint || !ReadVarint(p, end, &v)) return false;
        if (field == 5) out->delta = v;
        // int32 on the wire: a negative value is sign-extended to 64 bits.
        if (field == 3) out->priority = static_cast<int32_t>(static_cast<uint32_t>(v));
        break;
      case 6:  // rate_per_second
        if (type != kFixed64 || end - p < 8) return false;
        for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<uint8_t>(p[i]);
        p += 8;
        out->rate_per_second = absl::bit_cast<double>(v);
        break;
      default:  // a field this version does not know: protobuf keeps it
        return false;
    }
  }
  return true;
}

}  // namespace

bool ReportDecoder::Decode(absl::string_view bytes) {
  const char* p = bytes.data();
  const char* end = p + bytes.size();
  uint32_t field = 0, type = 0;
  absl::string_view report;
  if (!ReadTag(p, end, &field, &type) || field != v1::AgentMessage::kReportFieldNumber ||
      type != kLengthDelimited || !ReadBytes(p, end, &report) || p != end) {
    return false;
  }
  return DecodeReport(report.data(), report.data() + report.size());
}

bool ReportDecoder::DecodeReport(const char* p, const char* end) {
  head_.Clear();  // keeps its latency windows' memory for the next Report
  counters_.clear();
  while (p < end) {
    uint32_t field = 0, type = 0;
    if (!ReadTag(p, end, &field, &type)) return false;
    uint64_t v = 0;
    absl::string_view sub;
    switch (field) {
      case v1::Report::kSeqFieldNumber:
      case v1::Report::kStartUnixNanosFieldNumber:
      case v1::Report::kEndUnixNanosFieldNumber:
        if (type != kVarint || !ReadVarint(p, end, &v)) return false;
        if (field == v1::Report::kSeqFieldNumber) {
          head_.set_seq(v);
        } else if (field == v1::Report::kStartUnixNanosFieldNumber) {
          head_.set_start_unix_nanos(static_cast<int64_t>(v));
        } else {
          head_.set_end_unix_nanos(static_cast<int64_t>(v));
        }
        break;
      case v1::Report::kCountersFieldNumber:
        if (type != kLengthDelimited || !ReadBytes(p, end, &sub)) return false;
        counters_.emplace_back();
        if (!DecodeCounter(sub.data(), sub.data() + sub.size(), &counters_.back())) return false;
        break;
      case v1::Report::kLatencyFieldNumber:
        if (type != kLengthDelimited || !ReadBytes(p, end, &sub) ||
            !head_.add_latency()->ParseFromArray(sub.data(), static_cast<int>(sub.size()))) {
          return false;
        }
        break;
      case v1::Report::kHeldNanosFieldNumber:
        if (type != kVarint || !ReadVarint(p, end, &v)) return false;
        head_.set_held_nanos(static_cast<int64_t>(v));
        break;
      case v1::Report::kGuardEventsFieldNumber:
        if (type != kLengthDelimited || !ReadBytes(p, end, &sub) ||
            !head_.add_guard_events()->ParseFromArray(sub.data(), static_cast<int>(sub.size()))) {
          return false;
        }
        break;
      case v1::Report::kJobsFieldNumber:
        if (type != kLengthDelimited || !ReadBytes(p, end, &sub) ||
            !head_.add_jobs()->ParseFromArray(sub.data(), static_cast<int>(sub.size()))) {
          return false;
        }
        break;
      default:
        return false;
    }
  }
  return true;
}

}  // namespace rocetune::controller
