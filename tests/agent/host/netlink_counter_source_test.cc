#include "agent/host/netlink_counter_source.h"

#include <linux/netlink.h>
#include <rdma/rdma_netlink.h>

#include <cerrno>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "agent/host/counter_source_selector.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace rocetune {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Pair;

// Builds netlink messages byte by byte, the way the kernel lays them out.
class MsgBuilder {
 public:
  // Appends an attribute; returns its offset for nesting.
  size_t Attr(uint16_t type, const void* data, size_t len) {
    const size_t at = buf_.size();
    const uint16_t alen = static_cast<uint16_t>(4 + len);
    Put(&alen, 2);
    Put(&type, 2);
    Put(data, len);
    Pad();
    return at;
  }
  void U32(uint16_t type, uint32_t v) { Attr(type, &v, 4); }
  void U64(uint16_t type, uint64_t v) { Attr(type, &v, 8); }
  void Str(uint16_t type, const std::string& s) { Attr(type, s.c_str(), s.size() + 1); }
  size_t BeginNest(uint16_t type) { return Attr(type, nullptr, 0); }
  void EndNest(size_t at) {
    const uint16_t len = static_cast<uint16_t>(buf_.size() - at);
    std::memcpy(&buf_[at], &len, 2);
  }
  void Entry(const std::string& name, uint64_t value) {
    size_t e = BeginNest(RDMA_NLDEV_ATTR_STAT_HWCOUNTER_ENTRY);
    Str(RDMA_NLDEV_ATTR_STAT_HWCOUNTER_ENTRY_NAME, name);
    U64(RDMA_NLDEV_ATTR_STAT_HWCOUNTER_ENTRY_VALUE, value);
    EndNest(e);
  }
  // Wraps the attributes built so far in an nlmsghdr of `type`, appended to `out`.
  void Finish(uint16_t type, std::vector<uint8_t>* out) {
    struct nlmsghdr h = {};
    h.nlmsg_len = static_cast<uint32_t>(NLMSG_HDRLEN + buf_.size());
    h.nlmsg_type = type;
    const size_t at = out->size();
    out->resize(at + NLMSG_HDRLEN);
    std::memcpy(out->data() + at, &h, sizeof(h));
    out->insert(out->end(), buf_.begin(), buf_.end());
    buf_.clear();
  }

 private:
  void Put(const void* p, size_t n) {
    const uint8_t* b = static_cast<const uint8_t*>(p);
    buf_.insert(buf_.end(), b, b + n);
  }
  void Pad() {
    while (buf_.size() % 4) buf_.push_back(0);
  }
  std::vector<uint8_t> buf_;
};

constexpr uint16_t kStat = RDMA_NL_GET_TYPE(RDMA_NL_NLDEV, RDMA_NLDEV_CMD_STAT_GET);
constexpr uint16_t kDev = RDMA_NL_GET_TYPE(RDMA_NL_NLDEV, RDMA_NLDEV_CMD_GET);

std::vector<uint8_t> StatReply(uint32_t port,
                               const std::vector<std::pair<std::string, uint64_t>>& counters) {
  MsgBuilder b;
  b.U32(RDMA_NLDEV_ATTR_DEV_INDEX, 3);
  b.Str(RDMA_NLDEV_ATTR_DEV_NAME, "mlx5_0");
  b.U32(RDMA_NLDEV_ATTR_PORT_INDEX, port);
  size_t nest = b.BeginNest(RDMA_NLDEV_ATTR_STAT_HWCOUNTERS);
  for (const auto& [n, v] : counters) b.Entry(n, v);
  b.EndNest(nest);
  std::vector<uint8_t> out;
  b.Finish(kStat, &out);
  return out;
}

TEST(NetlinkParseTest, StatReplyWithNestedCounters) {
  std::vector<uint8_t> buf =
      StatReply(1, {{"np_cnp_sent", 50871}, {"cc_rx_ce_pkts", 12}, {"big", ~uint64_t{0}}});
  std::vector<RdmaNlPortStats> out;
  ASSERT_TRUE(ParseRdmaStatReply(buf.data(), buf.size(), &out).ok());
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].dev_index, 3u);
  EXPECT_EQ(out[0].dev_name, "mlx5_0");
  EXPECT_EQ(out[0].port, 1u);
  EXPECT_THAT(out[0].counters, ElementsAre(Pair("np_cnp_sent", 50871u), Pair("cc_rx_ce_pkts", 12u),
                                           Pair("big", ~uint64_t{0})));
}

TEST(NetlinkParseTest, SkipsAcksAndOtherTypesAndStopsAtDone) {
  std::vector<uint8_t> buf = StatReply(2, {{"a", 1}});
  // An ACK (NLMSG_ERROR with error 0), then DONE, then junk that must be ignored.
  struct nlmsghdr h = {};
  h.nlmsg_len = NLMSG_HDRLEN + sizeof(struct nlmsgerr);
  h.nlmsg_type = NLMSG_ERROR;
  std::vector<uint8_t> ack(h.nlmsg_len, 0);
  std::memcpy(ack.data(), &h, sizeof(h));
  buf.insert(buf.end(), ack.begin(), ack.end());
  h.nlmsg_len = NLMSG_HDRLEN;
  h.nlmsg_type = NLMSG_DONE;
  std::vector<uint8_t> done(NLMSG_HDRLEN, 0);
  std::memcpy(done.data(), &h, sizeof(h));
  buf.insert(buf.end(), done.begin(), done.end());
  buf.insert(buf.end(), {0xff, 0xff, 0xff});
  std::vector<RdmaNlPortStats> out;
  ASSERT_TRUE(ParseRdmaStatReply(buf.data(), buf.size(), &out).ok());
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].port, 2u);
}

TEST(NetlinkParseTest, ErrorMessageBecomesStatus) {
  struct nlmsghdr h = {};
  h.nlmsg_len = NLMSG_HDRLEN + sizeof(struct nlmsgerr);
  h.nlmsg_type = NLMSG_ERROR;
  std::vector<uint8_t> buf(h.nlmsg_len, 0);
  std::memcpy(buf.data(), &h, sizeof(h));
  int err = -ENODEV;
  std::memcpy(buf.data() + NLMSG_HDRLEN, &err, sizeof(err));
  std::vector<RdmaNlPortStats> out;
  absl::Status s = ParseRdmaStatReply(buf.data(), buf.size(), &out);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  err = -EPERM;
  std::memcpy(buf.data() + NLMSG_HDRLEN, &err, sizeof(err));
  EXPECT_EQ(ParseRdmaStatReply(buf.data(), buf.size(), &out).code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_TRUE(out.empty());
}

TEST(NetlinkParseTest, MalformedBuffersAreCleanErrors) {
  const std::vector<uint8_t> good = StatReply(1, {{"np_cnp_sent", 5}, {"rp_cnp_handled", 6}});
  std::vector<RdmaNlPortStats> out;
  // Every truncation of a good message is either rejected or (at a message
  // boundary) empty; never a crash or a partial result.
  for (size_t n = 0; n < good.size(); ++n) {
    absl::Status s = ParseRdmaStatReply(good.data(), n, &out);
    if (n == 0) {
      EXPECT_TRUE(s.ok());
    } else {
      EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << n;
    }
  }
  EXPECT_TRUE(out.empty());

  // nlmsg_len claims more than the buffer holds.
  std::vector<uint8_t> bad = good;
  uint32_t len = static_cast<uint32_t>(bad.size() + 100);
  std::memcpy(bad.data(), &len, 4);
  absl::Status s = ParseRdmaStatReply(bad.data(), bad.size(), &out);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("bad length"));

  // A counter value of the wrong width.
  MsgBuilder b;
  b.U32(RDMA_NLDEV_ATTR_PORT_INDEX, 1);
  size_t nest = b.BeginNest(RDMA_NLDEV_ATTR_STAT_HWCOUNTERS);
  size_t e = b.BeginNest(RDMA_NLDEV_ATTR_STAT_HWCOUNTER_ENTRY);
  b.Str(RDMA_NLDEV_ATTR_STAT_HWCOUNTER_ENTRY_NAME, "x");
  b.U32(RDMA_NLDEV_ATTR_STAT_HWCOUNTER_ENTRY_VALUE, 7);
  b.EndNest(e);
  b.EndNest(nest);
  std::vector<uint8_t> narrow;
  b.Finish(kStat, &narrow);
  s = ParseRdmaStatReply(narrow.data(), narrow.size(), &out);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("HWCOUNTER_ENTRY_VALUE"));

  // A name without its NUL.
  MsgBuilder c;
  c.U32(RDMA_NLDEV_ATTR_PORT_INDEX, 1);
  nest = c.BeginNest(RDMA_NLDEV_ATTR_STAT_HWCOUNTERS);
  e = c.BeginNest(RDMA_NLDEV_ATTR_STAT_HWCOUNTER_ENTRY);
  c.Attr(RDMA_NLDEV_ATTR_STAT_HWCOUNTER_ENTRY_NAME, "abcd", 4);
  c.U64(RDMA_NLDEV_ATTR_STAT_HWCOUNTER_ENTRY_VALUE, 7);
  c.EndNest(e);
  c.EndNest(nest);
  std::vector<uint8_t> unterminated;
  c.Finish(kStat, &unterminated);
  EXPECT_EQ(ParseRdmaStatReply(unterminated.data(), unterminated.size(), &out).code(),
            absl::StatusCode::kInvalidArgument);

  // A reply without the counters nest.
  MsgBuilder d;
  d.U32(RDMA_NLDEV_ATTR_PORT_INDEX, 1);
  std::vector<uint8_t> bare;
  d.Finish(kStat, &bare);
  EXPECT_EQ(ParseRdmaStatReply(bare.data(), bare.size(), &out).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(out.empty());
}

TEST(NetlinkParseTest, RandomGarbageNeverCrashes) {
  std::mt19937 rng(7);
  const std::vector<uint8_t> good = StatReply(1, {{"np_cnp_sent", 5}, {"rp_cnp_handled", 6}});
  std::vector<RdmaNlPortStats> out;
  for (int i = 0; i < 5000; ++i) {
    std::vector<uint8_t> buf = good;
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int f = 0; f < flips; ++f) buf[rng() % buf.size()] = static_cast<uint8_t>(rng());
    out.clear();
    absl::Status s = ParseRdmaStatReply(buf.data(), buf.size(), &out);
    if (!s.ok()) {
      EXPECT_TRUE(out.empty());
    }
    std::vector<RdmaNlDevice> devs;
    (void)ParseRdmaDevReply(buf.data(), buf.size(), &devs);
  }
  std::vector<uint8_t> noise(257);
  for (uint8_t& b : noise) b = static_cast<uint8_t>(rng());
  (void)ParseRdmaStatReply(noise.data(), noise.size(), &out);
  EXPECT_EQ(ParseRdmaStatReply(nullptr, 16, &out).code(), absl::StatusCode::kInvalidArgument);
}

TEST(NetlinkParseTest, DeviceDump) {
  std::vector<uint8_t> buf;
  for (uint32_t i = 0; i < 2; ++i) {
    MsgBuilder b;
    b.U32(RDMA_NLDEV_ATTR_DEV_INDEX, i + 1);
    b.Str(RDMA_NLDEV_ATTR_DEV_NAME, "mlx5_" + std::to_string(i));
    b.U32(RDMA_NLDEV_ATTR_PORT_INDEX, 1);
    b.Finish(kDev, &buf);
  }
  std::vector<RdmaNlDevice> devs;
  ASSERT_TRUE(ParseRdmaDevReply(buf.data(), buf.size(), &devs).ok());
  ASSERT_EQ(devs.size(), 2u);
  EXPECT_EQ(devs[1].name, "mlx5_1");
  EXPECT_EQ(devs[1].index, 2u);
  EXPECT_EQ(devs[1].ports, 1u);
  MsgBuilder nameless;
  nameless.U32(RDMA_NLDEV_ATTR_DEV_INDEX, 9);
  std::vector<uint8_t> bad;
  nameless.Finish(kDev, &bad);
  devs.clear();
  EXPECT_EQ(ParseRdmaDevReply(bad.data(), bad.size(), &devs).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(devs.empty());
}

// This host's kernel has no RDMA core: the real socket path must fail cleanly
// and the selector must fall back to sysfs.
TEST(NetlinkCounterSourceTest, UnavailableKernelFallsBackToSysfs) {
  const std::string sys = std::string(ROCETUNE_SOURCE_DIR) + "/tests/fixtures/hosts/mlx5_ofed/sys";
  absl::StatusOr<std::unique_ptr<NetlinkCounterSource>> nl = NetlinkCounterSource::Create(sys);
  if (nl.ok()) {
    GTEST_SKIP() << "this kernel has RDMA netlink";
  }
  EXPECT_EQ(nl.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(nl.status().message(), HasSubstr("RDMA netlink"));
  std::unique_ptr<CounterSource> src = MakeCounterSource(sys, CounterSourcePreference::kNetlink);
  ASSERT_NE(src, nullptr);
  EXPECT_EQ(src->name(), "sysfs");
  std::vector<CounterValue> out;
  ASSERT_TRUE(src->Collect(&out).ok());
  EXPECT_FALSE(out.empty());
  EXPECT_EQ(MakeCounterSource(sys, CounterSourcePreference::kSysfs)->name(), "sysfs");
}

TEST(CounterSourceSelectorTest, ParsesPreference) {
  EXPECT_EQ(*ParseCounterSourcePreference("auto"), CounterSourcePreference::kAuto);
  EXPECT_EQ(*ParseCounterSourcePreference("netlink"), CounterSourcePreference::kNetlink);
  EXPECT_EQ(*ParseCounterSourcePreference("sysfs"), CounterSourcePreference::kSysfs);
  absl::StatusOr<CounterSourcePreference> bad = ParseCounterSourcePreference("ioctl");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("ioctl"));
}

}  // namespace
}  // namespace rocetune
