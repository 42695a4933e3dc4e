#include "agent/host/dcbnl_pfc_config.h"

#include <errno.h>
#include <linux/dcbnl.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <sys/socket.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace rocetune {
namespace {

using ::testing::AnyOf;
using ::testing::HasSubstr;

// ---- an independent encoder for replies, written from the uapi layout ----

void Put16(std::vector<uint8_t>* b, size_t off, uint16_t v) { memcpy(b->data() + off, &v, 2); }
void Put32(std::vector<uint8_t>* b, size_t off, uint32_t v) { memcpy(b->data() + off, &v, 4); }

void Pad(std::vector<uint8_t>* b) {
  while (b->size() % 4 != 0) b->push_back(0);
}

// Appends an attribute; returns its offset.
size_t Attr(std::vector<uint8_t>* b, uint16_t type, const void* data, size_t len) {
  size_t off = b->size();
  b->resize(off + 4);
  Put16(b, off, static_cast<uint16_t>(4 + len));
  Put16(b, off + 2, type);
  const auto* p = static_cast<const uint8_t*>(data);
  b->insert(b->end(), p, p + len);
  Pad(b);
  return off;
}

// nlmsghdr + dcbmsg; the caller appends attributes and calls Finish.
std::vector<uint8_t> Msg(uint16_t type, uint32_t seq, uint8_t cmd) {
  std::vector<uint8_t> b(16 + 4, 0);
  Put16(&b, 4, type);
  Put32(&b, 8, seq);
  b[16] = AF_UNSPEC;
  b[17] = cmd;
  return b;
}
void Finish(std::vector<uint8_t>* b) { Put32(b, 0, static_cast<uint32_t>(b->size())); }

std::vector<uint8_t> ErrMsg(uint32_t seq, int32_t error) {
  std::vector<uint8_t> b(16 + 4 + 16, 0);
  Put16(&b, 4, NLMSG_ERROR);
  Put32(&b, 8, seq);
  memcpy(b.data() + 16, &error, 4);
  Finish(&b);
  return b;
}

std::vector<uint8_t> GetReply(uint32_t seq, uint8_t cap, uint8_t en, uint16_t delay,
                              size_t pfc_len = 136) {
  std::vector<uint8_t> pfc(136, 0);
  pfc[0] = cap;
  pfc[1] = en;
  memcpy(pfc.data() + 4, &delay, 2);
  for (int i = 0; i < 8; ++i) {
    uint64_t req = 100 + i, ind = 200 + i;
    memcpy(pfc.data() + 8 + 8 * i, &req, 8);
    memcpy(pfc.data() + 72 + 8 * i, &ind, 8);
  }
  std::vector<uint8_t> b = Msg(RTM_GETDCB, seq, DCB_CMD_IEEE_GET);
  Attr(&b, DCB_ATTR_IFNAME, "eth0", 5);
  size_t nest = Attr(&b, DCB_ATTR_IEEE, nullptr, 0);
  Attr(&b, DCB_ATTR_IEEE_PFC, pfc.data(), pfc_len);
  Put16(&b, nest, static_cast<uint16_t>(b.size() - nest));
  Finish(&b);
  return b;
}

std::vector<uint8_t> Concat(std::vector<uint8_t> a, const std::vector<uint8_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

uint16_t Get16(const std::vector<uint8_t>& b, size_t off) {
  uint16_t v;
  memcpy(&v, b.data() + off, 2);
  return v;
}
uint32_t Get32(const std::vector<uint8_t>& b, size_t off) {
  uint32_t v;
  memcpy(&v, b.data() + off, 4);
  return v;
}

TEST(DcbnlEncodeTest, IeeeGetRequest) {
  std::vector<uint8_t> m = BuildDcbIeeeGetRequest("ens1f0np0", 42);
  ASSERT_EQ(m.size(), 16u + 4u + 4u + 12u);  // hdr, dcbmsg, attr hdr, "ens1f0np0\0" padded
  EXPECT_EQ(Get32(m, 0), m.size());
  EXPECT_EQ(Get16(m, 4), 78);  // RTM_GETDCB
  EXPECT_EQ(Get16(m, 6), NLM_F_REQUEST | NLM_F_ACK);
  EXPECT_EQ(Get32(m, 8), 42u);
  EXPECT_EQ(m[16], AF_UNSPEC);
  EXPECT_EQ(m[17], 21);  // DCB_CMD_IEEE_GET
  EXPECT_EQ(Get16(m, 20), 4 + 10);
  EXPECT_EQ(Get16(m, 22), 1);  // DCB_ATTR_IFNAME
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(m.data() + 24)), "ens1f0np0");
}

TEST(DcbnlEncodeTest, IeeeSetPfcRequestCarriesWholeStruct) {
  PfcState s;
  s.pfc_cap = 8;
  s.enable_mask = 0x08;
  s.delay = 7;
  s.requests[3] = 999;  // counters are never sent back
  std::vector<uint8_t> m = BuildDcbIeeeSetPfcRequest("eth1", s, 7);
  EXPECT_EQ(Get32(m, 0), m.size());
  EXPECT_EQ(Get16(m, 4), 79);  // RTM_SETDCB
  EXPECT_EQ(m[17], 20);        // DCB_CMD_IEEE_SET
  size_t off = 20;
  EXPECT_EQ(Get16(m, off + 2), 1);  // IFNAME "eth1\0" -> 4 + 5, padded to 12
  off += 12;
  EXPECT_EQ(Get16(m, off + 2) & 0x7fff, 13);  // DCB_ATTR_IEEE nest
  EXPECT_EQ(Get16(m, off), 4 + 4 + 136);
  EXPECT_EQ(Get16(m, off + 4), 4 + 136);
  EXPECT_EQ(Get16(m, off + 6), 2);  // DCB_ATTR_IEEE_PFC
  const size_t pfc = off + 8;
  EXPECT_EQ(m[pfc + 0], 8);
  EXPECT_EQ(m[pfc + 1], 0x08);
  EXPECT_EQ(m[pfc + 2], 0);
  EXPECT_EQ(Get16(m, pfc + 4), 7);
  for (size_t i = pfc + 8; i < pfc + 136; ++i) EXPECT_EQ(m[i], 0) << i;
  EXPECT_EQ(m.size(), pfc + 136);
}

TEST(DcbnlDecodeTest, GetReplyAndAckInOneDatagram) {
  DcbReply r;
  ASSERT_TRUE(ParseDcbReplyDatagram(Concat(GetReply(5, 8, 0x18, 7), ErrMsg(5, 0)), 5, &r).ok());
  EXPECT_TRUE(r.done);
  EXPECT_EQ(r.error, 0);
  ASSERT_TRUE(r.pfc.has_value());
  EXPECT_EQ(r.pfc->pfc_cap, 8);
  EXPECT_EQ(r.pfc->enable_mask, 0x18);
  EXPECT_EQ(r.pfc->delay, 7);
  EXPECT_EQ(r.pfc->requests[3], 103u);
  EXPECT_EQ(r.pfc->indications[7], 207u);
}

TEST(DcbnlDecodeTest, RepliesAcrossDatagramsAndForeignSequenceNumbers) {
  DcbReply r;
  ASSERT_TRUE(ParseDcbReplyDatagram(GetReply(4, 8, 0xff, 1), 5, &r).ok());
  EXPECT_FALSE(r.pfc.has_value());  // someone else's reply
  ASSERT_TRUE(ParseDcbReplyDatagram(GetReply(5, 4, 0x08, 30), 5, &r).ok());
  EXPECT_FALSE(r.done);
  ASSERT_TRUE(ParseDcbReplyDatagram(ErrMsg(5, 0), 5, &r).ok());
  EXPECT_TRUE(r.done);
  EXPECT_EQ(r.pfc->enable_mask, 0x08);
  EXPECT_EQ(r.pfc->delay, 30);
}

TEST(DcbnlDecodeTest, ErrorsFromNlmsgErrAndFromSetReply) {
  DcbReply a;
  ASSERT_TRUE(ParseDcbReplyDatagram(ErrMsg(9, -EOPNOTSUPP), 9, &a).ok());
  EXPECT_TRUE(a.done);
  EXPECT_EQ(a.error, -EOPNOTSUPP);

  std::vector<uint8_t> set = Msg(RTM_SETDCB, 9, DCB_CMD_IEEE_SET);
  uint8_t status = static_cast<uint8_t>(static_cast<int8_t>(-EINVAL));
  Attr(&set, DCB_ATTR_IEEE, &status, 1);
  Finish(&set);
  DcbReply b;
  ASSERT_TRUE(ParseDcbReplyDatagram(Concat(set, ErrMsg(9, 0)), 9, &b).ok());
  EXPECT_TRUE(b.done);
  EXPECT_EQ(b.error, -EINVAL);
}

TEST(DcbnlDecodeTest, GarbageIsDataLoss) {
  DcbReply r;
  std::vector<uint8_t> tiny = {1, 2, 3};
  EXPECT_EQ(ParseDcbReplyDatagram(tiny, 1, &r).code(), absl::StatusCode::kDataLoss);

  std::vector<uint8_t> too_long = GetReply(1, 8, 1, 1);
  Put32(&too_long, 0, static_cast<uint32_t>(too_long.size() + 64));
  absl::Status st = ParseDcbReplyDatagram(too_long, 1, &r);
  EXPECT_EQ(st.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(st.message(), HasSubstr("does not fit"));

  absl::Status short_pfc = ParseDcbReplyDatagram(GetReply(1, 8, 1, 1, 100), 1, &r);
  EXPECT_EQ(short_pfc.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(short_pfc.message(), HasSubstr("DCB_ATTR_IEEE_PFC is 100 bytes, want 136"));

  std::vector<uint8_t> bad_attr = GetReply(1, 8, 1, 1);
  Put16(&bad_attr, 20, 2000);  // first attribute claims more than the message holds
  EXPECT_EQ(ParseDcbReplyDatagram(bad_attr, 1, &r).code(), absl::StatusCode::kDataLoss);

  std::vector<uint8_t> no_ieee = Msg(RTM_GETDCB, 1, DCB_CMD_IEEE_GET);
  Finish(&no_ieee);
  EXPECT_EQ(ParseDcbReplyDatagram(no_ieee, 1, &r).code(), absl::StatusCode::kDataLoss);

  std::vector<uint8_t> trunc_err = ErrMsg(1, -1);
  trunc_err.resize(20);
  Put32(&trunc_err, 0, 20);
  EXPECT_EQ(ParseDcbReplyDatagram(trunc_err, 1, &r).code(), absl::StatusCode::kDataLoss);
}

TEST(DcbnlDecodeTest, RandomBytesNeverCrash) {
  std::mt19937 rng(1234);
  const std::vector<uint8_t> good = Concat(GetReply(3, 8, 0x08, 7), ErrMsg(3, 0));
  int rejected = 0;
  for (int i = 0; i < 2000; ++i) {
    std::vector<uint8_t> b = good;
    // Flip a few bytes and sometimes truncate.
    for (int k = 0; k < 3; ++k) b[rng() % b.size()] = static_cast<uint8_t>(rng());
    if (rng() % 4 == 0) b.resize(rng() % b.size());
    DcbReply r;
    absl::Status st = ParseDcbReplyDatagram(b, 3, &r);
    if (!st.ok()) {
      EXPECT_EQ(st.code(), absl::StatusCode::kDataLoss);
      ++rejected;
    }
  }
  EXPECT_GT(rejected, 0);
}

// No netdev on this machine supports DCB: loopback must give a clean error
// naming it, not a hang or a crash.
TEST(DcbnlPfcConfigTest, LoopbackHasNoDcb) {
  DcbnlPfcConfig pfc;
  absl::StatusOr<PfcState> s = pfc.Read("lo");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(s.status().message(), HasSubstr("netdev lo does not support DCB"));
  v1::PfcSettings settings;
  settings.set_enable_mask(0x08);
  absl::Status w = pfc.Write("lo", settings);
  EXPECT_EQ(w.code(), s.status().code());
  EXPECT_THAT(w.message(), HasSubstr("netdev lo"));

  absl::StatusOr<uint16_t> t = ReadPfcPreventionTimeout("lo");
  EXPECT_EQ(t.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(t.status().message(), HasSubstr("netdev lo"));
}

TEST(DcbnlPfcConfigTest, BadNetdevNames) {
  DcbnlPfcConfig pfc;
  EXPECT_EQ(pfc.Read("").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(pfc.Read("a-name-longer-than-ifnamsiz").status().code(),
            absl::StatusCode::kInvalidArgument);
  absl::StatusOr<PfcState> missing = pfc.Read("rtnodev0");
  ASSERT_FALSE(missing.ok());
  // ENODEV; a kernel built without CONFIG_DCB answers EOPNOTSUPP for every name.
  EXPECT_THAT(missing.status().code(),
              AnyOf(absl::StatusCode::kUnavailable, absl::StatusCode::kUnimplemented));
  EXPECT_THAT(missing.status().message(), HasSubstr("rtnodev0"));
}

}  // namespace
}  // namespace rocetune
