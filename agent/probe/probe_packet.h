#ifndef ROCETUNE_AGENT_PROBE_PROBE_PACKET_H_
#define ROCETUNE_AGENT_PROBE_PROBE_PACKET_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace rocetune {

// Wire format shared by the UDP and the verbs probers (all fields big-endian):
//   u32 magic "RTPB" | u8 version | u8 type | u16 reserved (0)
//   u64 session      (the prober's random id, echoed by the responder)
//   u64 seq          (per-session sequence number, echoed)
//   u64 host_delay_ns (responder processing delay; 0 in a request / ack)
// followed by zero padding up to the plan's payload size.
enum class ProbeType : uint8_t {
  kRequest = 1,  // prober -> responder
  kReply = 2,    // responder -> prober, host_delay_ns already known (UDP)
  kAck = 3,      // responder -> prober, immediate echo (verbs); delay follows
  kDelay = 4,    // responder -> prober, follow-up carrying host_delay_ns (verbs)
};

struct ProbePacket {
  static constexpr uint32_t kMagic = 0x52545042;  // "RTPB"
  static constexpr uint8_t kVersion = 1;
  static constexpr size_t kHeaderBytes = 32;
  // Largest payload a plan may ask for.
  static constexpr size_t kMaxBytes = 4096;

  ProbeType type = ProbeType::kRequest;
  uint64_t session = 0;
  uint64_t seq = 0;
  uint64_t host_delay_ns = 0;

  // Writes the packet into buf, zero-padded to `size` bytes.
  // REQUIRES: kHeaderBytes <= size <= kMaxBytes, buf holds `size` bytes.
  void Encode(uint8_t* buf, size_t size) const;
  std::string Encode(size_t size) const;

  // kInvalidArgument for a short packet, a foreign magic, an unknown version or
  // type, or a nonzero reserved field.
  static absl::StatusOr<ProbePacket> Decode(const uint8_t* buf, size_t len);
};

}  // namespace rocetune

#endif  // ROCETUNE_AGENT_PROBE_PROBE_PACKET_H_
