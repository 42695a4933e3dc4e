#include "agent/probe/probe_packet.h"

#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace rocetune {
namespace {

void PutU16(uint8_t* p, uint16_t v) {
  p[0] = static_cast<uint8_t>(v >> 8);
  p[1] = static_cast<uint8_t>(v);
}
void PutU32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(v >> (24 - 8 * i));
}
void PutU64(uint8_t* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<uint8_t>(v >> (56 - 8 * i));
}
uint16_t GetU16(const uint8_t* p) { return static_cast<uint16_t>(p[0] << 8 | p[1]); }
uint32_t GetU32(const uint8_t* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v = v << 8 | p[i];
  return v;
}
uint64_t GetU64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v = v << 8 | p[i];
  return v;
}

}  // namespace

void ProbePacket::Encode(uint8_t* buf, size_t size) const {
  std::memset(buf, 0, size);
  PutU32(buf, kMagic);
  buf[4] = kVersion;
  buf[5] = static_cast<uint8_t>(type);
  PutU16(buf + 6, 0);
  PutU64(buf + 8, session);
  PutU64(buf + 16, seq);
  PutU64(buf + 24, host_delay_ns);
}

std::string ProbePacket::Encode(size_t size) const {
  std::string out(size, '\0');
  Encode(reinterpret_cast<uint8_t*>(out.data()), size);
  return out;
}

absl::StatusOr<ProbePacket> ProbePacket::Decode(const uint8_t* buf, size_t len) {
  if (len < kHeaderBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("probe packet too short: ", len, " bytes, need ", kHeaderBytes));
  }
  if (GetU32(buf) != kMagic) {
    return absl::InvalidArgumentError(
        absl::StrCat("probe packet has foreign magic 0x", absl::Hex(GetU32(buf))));
  }
  if (buf[4] != kVersion) {
    return absl::InvalidArgumentError(
        absl::StrCat("probe packet version ", buf[4], " unsupported (want ", kVersion, ")"));
  }
  if (buf[5] < static_cast<uint8_t>(ProbeType::kRequest) ||
      buf[5] > static_cast<uint8_t>(ProbeType::kDelay)) {
    return absl::InvalidArgumentError(absl::StrCat("probe packet type ", buf[5], " unknown"));
  }
  if (GetU16(buf + 6) != 0) {
    return absl::InvalidArgumentError("probe packet reserved field is nonzero");
  }
  ProbePacket p;
  p.type = static_cast<ProbeType>(buf[5]);
  p.session = GetU64(buf + 8);
  p.seq = GetU64(buf + 16);
  p.host_delay_ns = GetU64(buf + 24);
  return p;
}

}  // namespace rocetune
