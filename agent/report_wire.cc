#include "agent/report_wire.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "absl/base/casts.h"

namespace rocetune {
namespace {

// Wire-format tags: (field number << 3) | wire type (0 varint, 1 fixed64,
// 2 length-delimited).
constexpr char kAgentMessageReport = (2 << 3) | 2;
constexpr char kReportSeq = (1 << 3) | 0;
constexpr char kReportStart = (2 << 3) | 0;
constexpr char kReportEnd = (3 << 3) | 0;
constexpr char kReportCounters = (4 << 3) | 2;
constexpr char kReportLatency = (5 << 3) | 2;
constexpr char kReportGuardEvents = (6 << 3) | 2;
constexpr char kReportLevels = (7 << 3) | 2;
constexpr char kReportHeld = (8 << 3) | 0;
constexpr char kReportJobs = (9 << 3) | 2;
constexpr char kSampleDevice = (1 << 3) | 2;
constexpr char kSamplePort = (2 << 3) | 0;
constexpr char kSamplePriority = (3 << 3) | 0;
constexpr char kSampleName = (4 << 3) | 2;
constexpr char kSampleDelta = (5 << 3) | 0;
constexpr char kSampleRate = (6 << 3) | 1;
// LevelSample shares CounterSample's fields 1-4.
constexpr char kLevelValue = (5 << 3) | 0;

// Room kept in front of the Report's body for AgentMessage's tag and the
// body's length (a varint of at most 5 bytes: protobuf messages stay < 2 GiB).
constexpr size_t kHeaderRoom = 1 + 5;
// Most bytes a tag plus a varint length takes in front of an element.
constexpr size_t kMaxElementHeader = 1 + 10;

inline size_t VarintSize(uint64_t v) {
  // 1 + floor(bit length / 7), with v | 1 so that 0 takes one byte.
  const int bits = 64 - __builtin_clzll(v | 1);
  return static_cast<size_t>((bits * 9 + 64) / 64);
}

inline char* PutVarint(uint64_t v, char* p) {
  while (v >= 0x80) {
    *p++ = static_cast<char>(v | 0x80);
    v >>= 7;
  }
  *p++ = static_cast<char>(v);
  return p;
}

// int32 and int64 fields are varints of the value sign-extended to 64 bits.
inline uint64_t SignExtended(int64_t v) { return static_cast<uint64_t>(v); }

inline char* PutString(char tag, const std::string& s, char* p) {
  *p++ = tag;
  p = PutVarint(s.size(), p);
  std::memcpy(p, s.data(), s.size());
  return p + s.size();
}

// Size of a CounterSample's encoding (without its own tag and length).
inline size_t SampleSize(const v1::CounterSample& c) {
  size_t n = 0;
  if (!c.device().empty()) n += 1 + VarintSize(c.device().size()) + c.device().size();
  if (c.port() != 0) n += 1 + VarintSize(c.port());
  if (c.priority() != 0) n += 1 + VarintSize(SignExtended(c.priority()));
  if (!c.name().empty()) n += 1 + VarintSize(c.name().size()) + c.name().size();
  if (c.delta() != 0) n += 1 + VarintSize(c.delta());
  if (absl::bit_cast<uint64_t>(c.rate_per_second()) != 0) n += 1 + 8;
  return n;
}

inline char* PutSample(const v1::CounterSample& c, size_t size, char* p) {
  *p++ = kReportCounters;
  p = PutVarint(size, p);
  if (!c.device().empty()) p = PutString(kSampleDevice, c.device(), p);
  if (c.port() != 0) {
    *p++ = kSamplePort;
    p = PutVarint(c.port(), p);
  }
  if (c.priority() != 0) {
    *p++ = kSamplePriority;
    p = PutVarint(SignExtended(c.priority()), p);
  }
  if (!c.name().empty()) p = PutString(kSampleName, c.name(), p);
  if (c.delta() != 0) {
    *p++ = kSampleDelta;
    p = PutVarint(c.delta(), p);
  }
  const uint64_t rate = absl::bit_cast<uint64_t>(c.rate_per_second());
  if (rate != 0) {
    *p++ = kSampleRate;
    for (int i = 0; i < 8; ++i) *p++ = static_cast<char>(rate >> (8 * i));  // little endian
  }
  return p;
}

inline size_t LevelSize(const v1::LevelSample& l) {
  size_t n = 0;
  if (!l.device().empty()) n += 1 + VarintSize(l.device().size()) + l.device().size();
  if (l.port() != 0) n += 1 + VarintSize(l.port());
  if (l.priority() != 0) n += 1 + VarintSize(SignExtended(l.priority()));
  if (!l.name().empty()) n += 1 + VarintSize(l.name().size()) + l.name().size();
  if (l.value() != 0) n += 1 + VarintSize(l.value());
  return n;
}

inline char* PutLevel(const v1::LevelSample& l, size_t size, char* p) {
  *p++ = kReportLevels;
  p = PutVarint(size, p);
  if (!l.device().empty()) p = PutString(kSampleDevice, l.device(), p);
  if (l.port() != 0) {
    *p++ = kSamplePort;
    p = PutVarint(l.port(), p);
  }
  if (l.priority() != 0) {
    *p++ = kSamplePriority;
    p = PutVarint(SignExtended(l.priority()), p);
  }
  if (!l.name().empty()) p = PutString(kSampleName, l.name(), p);
  if (l.value() != 0) {
    *p++ = kLevelValue;
    p = PutVarint(l.value(), p);
  }
  return p;
}

}  // namespace

absl::string_view ReportWireEncoder::Encode(const v1::Report& report) {
  // The body is written from kHeaderRoom on into storage that only grows
  // (resize never shrinks it: the bytes past the end of a round's encoding
  // are scratch); the header is written right before the body at the end.
  size_t at = kHeaderRoom;
  auto room = [&](size_t need) -> char* {
    if (buf_.size() < at + need) buf_.resize(std::max(at + need, 2 * buf_.size()));
    return buf_.data() + at;
  };
  char* p = room(3 * kMaxElementHeader);
  if (report.seq() != 0) {
    *p++ = kReportSeq;
    p = PutVarint(report.seq(), p);
  }
  if (report.start_unix_nanos() != 0) {
    *p++ = kReportStart;
    p = PutVarint(SignExtended(report.start_unix_nanos()), p);
  }
  if (report.end_unix_nanos() != 0) {
    *p++ = kReportEnd;
    p = PutVarint(SignExtended(report.end_unix_nanos()), p);
  }
  at = static_cast<size_t>(p - buf_.data());
  for (const v1::CounterSample& c : report.counters()) {
    const size_t size = SampleSize(c);
    p = PutSample(c, size, room(kMaxElementHeader + size));
    at = static_cast<size_t>(p - buf_.data());
  }
  auto put_message = [&](char tag, const google::protobuf::MessageLite& m) {
    const size_t size = m.ByteSizeLong();
    char* q = room(kMaxElementHeader + size);
    *q++ = tag;
    q = PutVarint(size, q);
    q = reinterpret_cast<char*>(m.SerializeWithCachedSizesToArray(reinterpret_cast<uint8_t*>(q)));
    at = static_cast<size_t>(q - buf_.data());
  };
  for (const v1::LatencyWindow& w : report.latency()) put_message(kReportLatency, w);
  for (const v1::GuardEvent& g : report.guard_events()) put_message(kReportGuardEvents, g);
  for (const v1::LevelSample& l : report.levels()) {
    const size_t size = LevelSize(l);
    p = PutLevel(l, size, room(kMaxElementHeader + size));
    at = static_cast<size_t>(p - buf_.data());
  }
  if (report.held_nanos() != 0) {
    p = room(1 + 10);
    *p++ = kReportHeld;
    p = PutVarint(SignExtended(report.held_nanos()), p);
    at = static_cast<size_t>(p - buf_.data());
  }
  for (const v1::JobTiming& j : report.jobs()) put_message(kReportJobs, j);

  const size_t body = at - kHeaderRoom;
  const size_t header = 1 + VarintSize(body);
  char* h = buf_.data() + kHeaderRoom - header;
  *h = kAgentMessageReport;
  PutVarint(body, h + 1);
  return absl::string_view(h, header + body);
}

bool ReportWireEncoder::WithHeld(absl::string_view message, int64_t held_nanos, std::string* out) {
  // message = tag, varint length, body (a Report without held_nanos).
  if (message.size() < 2 || message[0] != kAgentMessageReport) return false;
  uint64_t body = 0;
  size_t i = 1;
  for (int shift = 0; i < message.size() && shift < 35; shift += 7) {
    const uint8_t b = static_cast<uint8_t>(message[i++]);
    body |= static_cast<uint64_t>(b & 0x7f) << shift;
    if ((b & 0x80) == 0) break;
  }
  if (body != message.size() - i) return false;
  const size_t extra = held_nanos == 0 ? 0 : 1 + VarintSize(SignExtended(held_nanos));
  out->resize(1 + VarintSize(body + extra) + body + extra);
  char* p = out->data();
  *p++ = kAgentMessageReport;
  p = PutVarint(body + extra, p);
  std::memcpy(p, message.data() + i, body);
  p += body;
  if (held_nanos != 0) {
    *p++ = kReportHeld;
    p = PutVarint(SignExtended(held_nanos), p);
  }
  return static_cast<size_t>(p - out->data()) == out->size();
}

}  // namespace rocetune
