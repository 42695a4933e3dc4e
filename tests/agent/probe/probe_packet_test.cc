#include "agent/probe/probe_packet.h"

#include "gtest/gtest.h"

namespace rocetune {
namespace {

TEST(ProbePacketTest, RoundTripsEveryField) {
  ProbePacket p;
  p.type = ProbeType::kDelay;
  p.session = 0x0123456789abcdefULL;
  p.seq = 42;
  p.host_delay_ns = 987654321;
  std::string wire = p.Encode(100);
  ASSERT_EQ(wire.size(), 100u);
  absl::StatusOr<ProbePacket> d =
      ProbePacket::Decode(reinterpret_cast<const uint8_t*>(wire.data()), wire.size());
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->type, ProbeType::kDelay);
  EXPECT_EQ(d->session, p.session);
  EXPECT_EQ(d->seq, 42u);
  EXPECT_EQ(d->host_delay_ns, 987654321u);
  for (size_t i = ProbePacket::kHeaderBytes; i < wire.size(); ++i) EXPECT_EQ(wire[i], 0);
}

TEST(ProbePacketTest, RejectsShortForeignAndUnknownPackets) {
  ProbePacket p;
  std::string wire = p.Encode(ProbePacket::kHeaderBytes);
  auto decode = [](const std::string& w) {
    return ProbePacket::Decode(reinterpret_cast<const uint8_t*>(w.data()), w.size());
  };
  EXPECT_TRUE(decode(wire).ok());
  EXPECT_EQ(decode(wire.substr(0, 31)).status().code(), absl::StatusCode::kInvalidArgument);
  std::string foreign = wire;
  foreign[0] = 'X';
  EXPECT_EQ(decode(foreign).status().code(), absl::StatusCode::kInvalidArgument);
  std::string version = wire;
  version[4] = 9;
  EXPECT_EQ(decode(version).status().code(), absl::StatusCode::kInvalidArgument);
  std::string type = wire;
  type[5] = 0;
  EXPECT_FALSE(decode(type).ok());
  type[5] = 5;
  EXPECT_FALSE(decode(type).ok());
  std::string reserved = wire;
  reserved[7] = 1;
  EXPECT_FALSE(decode(reserved).ok());
  EXPECT_FALSE(ProbePacket::Decode(nullptr, 0).ok());
}

}  // namespace
}  // namespace rocetune
