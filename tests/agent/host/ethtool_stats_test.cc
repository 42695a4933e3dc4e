#include "agent/host/ethtool_stats.h"

#include <linux/ethtool.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "daemon/logging.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace rocetune {
namespace {

using ::testing::HasSubstr;

// Plays a driver's ETH_SS_STATS set behind the ioctl seam. `new_kernel`
// selects the post-7b07be1ff1cb behaviour (a count mismatch answers 0 and
// copies nothing); otherwise the old one (overwrite the count, copy it all).
class FakeDriver {
 public:
  std::vector<std::string> names;
  std::vector<uint64_t> values;
  bool new_kernel = true;
  int fail_errno = 0;
  std::map<uint32_t, int> calls;
  // Called after each GSSET_INFO; lets a test change the set mid-sequence.
  std::function<void(FakeDriver*)> after_sset_info;

  EthtoolIoctl Ioctl() {
    return [this](const std::string& ifname, void* cmd) { return Handle(ifname, cmd); };
  }

  void SetPfcPriorities(const std::vector<int>& prios) {
    names = {"rx_packets", "tx_packets", "rx_discards_phy"};
    for (int p : prios) {
      names.push_back("rx_prio" + std::to_string(p) + "_pause");
      names.push_back("tx_prio" + std::to_string(p) + "_pause");
      names.push_back("rx_prio" + std::to_string(p) + "_pause_duration");
    }
    values.clear();
    for (size_t i = 0; i < names.size(); ++i) values.push_back(1000 + i);
  }

 private:
  int Handle(const std::string& ifname, void* cmd) {
    if (ifname != "ens1f0np0") return -ENODEV;
    if (fail_errno != 0) return -fail_errno;
    uint32_t c;
    std::memcpy(&c, cmd, sizeof(c));
    ++calls[c];
    const uint32_t n = static_cast<uint32_t>(names.size());
    if (c == ETHTOOL_GSSET_INFO) {
      auto* info = static_cast<struct ethtool_sset_info*>(cmd);
      EXPECT_EQ(info->sset_mask, uint64_t{1} << ETH_SS_STATS);
      info->data[0] = n;
      if (after_sset_info) after_sset_info(this);
      return 0;
    }
    if (c == ETHTOOL_GSTRINGS) {
      auto* gs = static_cast<struct ethtool_gstrings*>(cmd);
      EXPECT_EQ(gs->string_set, static_cast<uint32_t>(ETH_SS_STATS));
      if (new_kernel && gs->len != n) {
        gs->len = 0;
        return 0;
      }
      gs->len = n;
      for (uint32_t i = 0; i < n; ++i) {
        char* dst = reinterpret_cast<char*>(gs->data) + i * ETH_GSTRING_LEN;
        std::memset(dst, 0, ETH_GSTRING_LEN);
        std::memcpy(dst, names[i].data(), std::min<size_t>(names[i].size(), ETH_GSTRING_LEN));
      }
      return 0;
    }
    if (c == ETHTOOL_GSTATS) {
      auto* st = static_cast<struct ethtool_stats*>(cmd);
      if (new_kernel && st->n_stats != n) {
        st->n_stats = 0;
        return 0;
      }
      st->n_stats = n;
      for (uint32_t i = 0; i < n; ++i) st->data[i] = values[i];
      return 0;
    }
    return -EOPNOTSUPP;
  }
};

std::map<std::pair<std::string, int>, uint64_t> Index(const std::vector<CounterValue>& out) {
  std::map<std::pair<std::string, int>, uint64_t> m;
  for (const CounterValue& v : out) m[{v.key.name, v.key.priority}] = v.value;
  return m;
}

TEST(EthtoolStatsTest, MapsByNameWithPriorities) {
  FakeDriver drv;
  drv.SetPfcPriorities({3});
  EthtoolCounterSource source({{"mlx5_0", 1, "ens1f0np0"}}, drv.Ioctl());
  EXPECT_EQ(source.name(), "ethtool");
  std::vector<CounterValue> out;
  ASSERT_TRUE(source.Collect(&out).ok());
  ASSERT_EQ(out.size(), drv.names.size());
  auto m = Index(out);
  EXPECT_EQ((m[{"rx_pfc_pause_frames", 3}]), 1003u);
  EXPECT_EQ((m[{"tx_pfc_pause_frames", 3}]), 1004u);
  EXPECT_EQ((m[{"rx_pfc_pause_duration_us", 3}]), 1005u);
  EXPECT_EQ((m[{"rx_discards_phy", -1}]), 1002u);
  EXPECT_EQ((m[{"rx_packets", -1}]), 1000u);
  for (const CounterValue& v : out) {
    EXPECT_EQ(v.key.device, "mlx5_0");
    EXPECT_EQ(v.key.port, 1u);
  }
  // The second round reuses the names: no GSTRINGS.
  out.clear();
  ASSERT_TRUE(source.Collect(&out).ok());
  EXPECT_EQ(drv.calls[ETHTOOL_GSTRINGS], 1);
  EXPECT_EQ(drv.calls[ETHTOOL_GSTATS], 2);
  EXPECT_EQ(source.reenumerations(), 0u);
}

TEST(EthtoolStatsTest, CountChangeBetweenRoundsReEnumerates) {
  FakeDriver drv;
  drv.SetPfcPriorities({3});
  EthtoolCounterSource source({{"mlx5_0", 1, "ens1f0np0"}}, drv.Ioctl());
  std::vector<CounterValue> out;
  ASSERT_TRUE(source.Collect(&out).ok());
  // PFC enabled on priority 4 as well: the block grows and shifts indexes.
  drv.SetPfcPriorities({3, 4});
  drv.values[drv.names.size() - 1] = 777;  // rx_prio4_pause_duration
  out.clear();
  ASSERT_TRUE(source.Collect(&out).ok());
  EXPECT_EQ(source.reenumerations(), 1u);
  auto m = Index(out);
  EXPECT_EQ((m[{"rx_pfc_pause_duration_us", 4}]), 777u);
  EXPECT_EQ((m[{"rx_pfc_pause_frames", 3}]), 1003u);
  // PFC disabled: the block disappears.
  drv.SetPfcPriorities({});
  out.clear();
  ASSERT_TRUE(source.Collect(&out).ok());
  EXPECT_EQ(out.size(), 3u);
  EXPECT_EQ(source.reenumerations(), 2u);
}

// CollectInto refills a kept buffer; the mapping cached at enumeration follows
// a set that changes between rounds.
TEST(EthtoolStatsTest, CollectIntoMatchesCollectAcrossReEnumerations) {
  FakeDriver drv;
  EthtoolCounterSource into({{"mlx5_0", 1, "ens1f0np0"}}, drv.Ioctl());
  EthtoolCounterSource plain({{"mlx5_0", 1, "ens1f0np0"}}, drv.Ioctl());
  CounterBuffer buf;
  const std::vector<std::vector<int>> prios = {{3}, {3}, {3, 4}, {}, {0, 7}};
  for (size_t round = 0; round < prios.size(); ++round) {
    SCOPED_TRACE(round);
    drv.SetPfcPriorities(prios[round]);
    drv.values[0] = 5000 + round;
    buf.Clear();
    std::vector<CounterValue> want;
    ASSERT_TRUE(into.CollectInto(&buf).ok());
    ASSERT_TRUE(plain.Collect(&want).ok());
    ASSERT_EQ(buf.size(), want.size());
    ASSERT_EQ(buf.size(), drv.names.size());
    for (size_t i = 0; i < want.size(); ++i) {
      EXPECT_EQ(buf[i].key, want[i].key);
      EXPECT_EQ(buf[i].value, want[i].value);
      EXPECT_EQ(buf[i].width_bits, want[i].width_bits);
    }
    EXPECT_EQ((Index(std::vector<CounterValue>(buf.begin(), buf.end()))[{"rx_packets", -1}]),
              5000 + round);
  }
  EXPECT_EQ(into.reenumerations(), 3u);
  auto m = Index(std::vector<CounterValue>(buf.begin(), buf.end()));
  EXPECT_EQ((m[{"rx_pfc_pause_frames", 7}]), drv.values[drv.names.size() - 3]);
  EXPECT_EQ(m.count({"rx_pfc_pause_frames", 3}), 0u);
}

// Every value carries a key id (what lets the sampler and a kept buffer skip
// comparing names): distinct within a round, the same while the set is
// unchanged, all new once the interface is re-enumerated.
TEST(EthtoolStatsTest, KeyIdsStableUntilReEnumeration) {
  FakeDriver drv;
  drv.SetPfcPriorities({3});
  EthtoolCounterSource source({{"mlx5_0", 1, "ens1f0np0"}}, drv.Ioctl());
  auto ids = [&source]() {
    CounterBuffer buf;
    EXPECT_TRUE(source.CollectInto(&buf).ok());
    std::vector<uint64_t> out;
    for (const CounterValue& v : buf) out.push_back(v.key_id);
    return out;
  };
  const std::vector<uint64_t> first = ids();
  ASSERT_EQ(first.size(), drv.names.size());
  std::set<uint64_t> distinct(first.begin(), first.end());
  EXPECT_EQ(distinct.size(), first.size());
  EXPECT_EQ(distinct.count(0), 0u);
  EXPECT_EQ(ids(), first);
  std::vector<CounterValue> plain;
  ASSERT_TRUE(source.Collect(&plain).ok());
  ASSERT_EQ(plain.size(), first.size());
  for (size_t i = 0; i < plain.size(); ++i) EXPECT_EQ(plain[i].key_id, first[i]);

  drv.SetPfcPriorities({3, 4});
  const std::vector<uint64_t> after = ids();
  ASSERT_EQ(after.size(), drv.names.size());
  for (uint64_t id : after) EXPECT_EQ(distinct.count(id), 0u) << id;
  EXPECT_EQ(source.reenumerations(), 1u);
}

TEST(EthtoolStatsTest, SetChangingBetweenInfoAndStatsIsRetriedNewKernel) {
  FakeDriver drv;
  drv.SetPfcPriorities({3});
  EthtoolCounterSource source({{"mlx5_0", 1, "ens1f0np0"}}, drv.Ioctl());
  std::vector<CounterValue> out;
  ASSERT_TRUE(source.Collect(&out).ok());
  // Right after the next GSSET_INFO answers, the set grows once.
  int changes = 0;
  drv.after_sset_info = [&changes](FakeDriver* d) {
    if (changes++ == 0) d->SetPfcPriorities({3, 5});
  };
  out.clear();
  ASSERT_TRUE(source.Collect(&out).ok());
  EXPECT_EQ(out.size(), drv.names.size());
  EXPECT_EQ(Index(out).count({"tx_pfc_pause_frames", 5}), 1u);
  EXPECT_GE(source.reenumerations(), 1u);
}

TEST(EthtoolStatsTest, SetChangingBetweenInfoAndStatsIsRetriedOldKernel) {
  FakeDriver drv;
  drv.new_kernel = false;
  drv.SetPfcPriorities({3});
  EthtoolCounterSource source({{"mlx5_0", 1, "ens1f0np0"}}, drv.Ioctl());
  std::vector<CounterValue> out;
  ASSERT_TRUE(source.Collect(&out).ok());
  int changes = 0;
  drv.after_sset_info = [&changes](FakeDriver* d) {
    if (changes++ == 0) d->SetPfcPriorities({3, 5});
  };
  out.clear();
  ASSERT_TRUE(source.Collect(&out).ok());
  auto m = Index(out);
  EXPECT_EQ(out.size(), drv.names.size());
  EXPECT_EQ((m[{"tx_pfc_pause_frames", 5}]), 1007u);
}

TEST(EthtoolStatsTest, ASetThatNeverSettlesFailsCleanly) {
  FakeDriver drv;
  drv.SetPfcPriorities({3});
  EthtoolCounterSource source({{"mlx5_0", 1, "ens1f0np0"}}, drv.Ioctl());
  int flip = 0;
  drv.after_sset_info = [&flip](FakeDriver* d) {
    d->SetPfcPriorities((flip++ % 2) ? std::vector<int>{3} : std::vector<int>{3, 4});
  };
  std::vector<CounterValue> out;
  absl::Status s = source.Collect(&out);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(s.message(), HasSubstr("ens1f0np0"));
  EXPECT_TRUE(out.empty());
}

TEST(EthtoolStatsTest, ErrorsNameTheInterface) {
  FakeDriver drv;
  drv.SetPfcPriorities({});
  EthtoolCounterSource missing({{"mlx5_0", 1, "nosuchif0"}}, drv.Ioctl());
  std::vector<CounterValue> out;
  absl::Status s = missing.Collect(&out);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(s.message(), HasSubstr("nosuchif0"));
  drv.fail_errno = EOPNOTSUPP;
  EthtoolCounterSource unsupported({{"mlx5_0", 1, "ens1f0np0"}}, drv.Ioctl());
  EXPECT_EQ(unsupported.Collect(&out).code(), absl::StatusCode::kUnimplemented);
  EXPECT_TRUE(out.empty());
}

TEST(EthtoolStatsTest, OneFailingTargetDoesNotFailTheRound) {
  FakeDriver drv;
  drv.SetPfcPriorities({3});
  EthtoolCounterSource source({{"mlx5_1", 1, "gone0"}, {"mlx5_0", 1, "ens1f0np0"}}, drv.Ioctl());
  std::vector<CounterValue> out;
  ASSERT_TRUE(source.Collect(&out).ok());
  EXPECT_EQ(out.size(), drv.names.size());
}

// A missing interface fails every round (the round goes on with the others)
// but is logged once.
TEST(EthtoolStatsTest, ATargetFailingEveryRoundIsLoggedOnce) {
  FakeDriver drv;
  drv.SetPfcPriorities({3});
  EthtoolCounterSource source({{"mlx5_1", 1, "gone_every_round0"}, {"mlx5_0", 1, "ens1f0np0"}},
                              drv.Ioctl());
  std::string log;
  SetLogSinkForTest(&log);
  for (int round = 0; round < 4; ++round) {
    CounterBuffer buf;
    ASSERT_TRUE(source.CollectInto(&buf).ok());
    EXPECT_EQ(buf.size(), drv.names.size());
  }
  SetLogSinkForTest(nullptr);
  const std::string needle = "ifname=gone_every_round0";
  ASSERT_NE(log.find(needle), std::string::npos);
  EXPECT_EQ(log.find(needle), log.rfind(needle)) << log;
  // Alone, it fails each round with its own error.
  EthtoolCounterSource alone({{"mlx5_1", 1, "gone_every_round0"}}, drv.Ioctl());
  for (int round = 0; round < 2; ++round) {
    std::vector<CounterValue> out;
    absl::Status s = alone.Collect(&out);
    EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
    EXPECT_THAT(s.message(), HasSubstr("gone_every_round0"));
  }
}

TEST(EthtoolStatsTest, RealIoctlOnLoopbackIsCleanlyEmptyOrUnsupported) {
  EthtoolCounterSource source({{"lo", 1, "lo"}});
  std::vector<CounterValue> out;
  absl::Status s = source.Collect(&out);
  if (s.ok()) {
    EXPECT_TRUE(out.empty());
  } else {
    EXPECT_TRUE(absl::IsUnimplemented(s) || absl::IsPermissionDenied(s)) << s;
    EXPECT_THAT(s.message(), HasSubstr("lo"));
  }
  EthtoolCounterSource missing({{"x", 1, "rocetune-nope0"}});
  EXPECT_EQ(missing.Collect(&out).code(), absl::StatusCode::kUnavailable);
}

TEST(EthtoolStatsTest, TargetsFromInventory) {
  v1::NicDevice d;
  d.set_name("mlx5_0");
  d.add_ports()->set_port(1);
  d.mutable_ports(0)->set_netdev("ens1f0np0");
  d.add_ports()->set_port(2);  // no netdev: no target
  std::vector<EthtoolTarget> t = EthtoolTargetsFromInventory({d});
  ASSERT_EQ(t.size(), 1u);
  EXPECT_EQ(t[0].ifname, "ens1f0np0");
  EXPECT_EQ(t[0].device, "mlx5_0");
}

std::string ReadFixture(const std::string& name) {
  std::ifstream in(std::string(ROCETUNE_SOURCE_DIR) + "/tests/fixtures/ethtool/" + name);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(EthtoolDumpTest, ParsesMlx5PfcEnabledDump) {
  const std::string text = ReadFixture("mlx5_pfc_enabled.txt");
  ASSERT_FALSE(text.empty());
  absl::StatusOr<std::vector<CounterValue>> out = ParseEthtoolDump(text, "mlx5_0", 1);
  ASSERT_TRUE(out.ok()) << out.status();
  auto m = Index(*out);
  EXPECT_EQ((m[{"rx_pfc_pause_frames", 3}]), 18234u);
  EXPECT_EQ((m[{"rx_pfc_pause_duration_us", 3}]), 912345u);
  EXPECT_EQ((m[{"tx_pfc_pause_frames", 3}]), 7021u);
  EXPECT_EQ((m[{"tx_pfc_pause_duration_us", 3}]), 351050u);
  EXPECT_EQ((m[{"rx_pfc_pause_transitions", 3}]), 9117u);
  EXPECT_EQ((m[{"tx_pause_storm_warning_events", -1}]), 2u);
  EXPECT_EQ(m.count({"tx_pause_storm_error_events", -1}), 1u);
  EXPECT_EQ((m[{"rx_discards_phy", -1}]), 1287u);
  EXPECT_EQ((m[{"rx_prio_discards", 3}]), 211u);
  EXPECT_EQ(m.count({"rx_pfc_pause_frames", 4}), 0u);
  EXPECT_EQ(m.count({"rx_prio3_bytes", -1}), 1u);  // unmapped: passes through
  // Every non-header line became one counter.
  size_t lines = 0;
  for (char c : text) lines += c == '\n';
  EXPECT_EQ(out->size(), lines - 1);
}

TEST(EthtoolDumpTest, PfcDisabledDumpHasNoPauseCounters) {
  absl::StatusOr<std::vector<CounterValue>> out =
      ParseEthtoolDump(ReadFixture("mlx5_pfc_disabled.txt"), "mlx5_0", 1);
  ASSERT_TRUE(out.ok()) << out.status();
  for (const CounterValue& v : *out) {
    EXPECT_NE(v.key.name, "rx_pfc_pause_frames");
    EXPECT_NE(v.key.name, "tx_pause_storm_error_events");
  }
  out = ParseEthtoolDump(ReadFixture("mlx5_pfc_prio3_prio4.txt"), "mlx5_0", 1);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Index(*out).count({"tx_pfc_pause_duration_us", 4}), 1u);
}

TEST(EthtoolDumpTest, BadLinesNameTheLine) {
  absl::StatusOr<std::vector<CounterValue>> out =
      ParseEthtoolDump("NIC statistics:\n     rx_packets: 12\n     tx_packets: twelve\n", "d", 1);
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(out.status().message(), HasSubstr("line 3"));
  out = ParseEthtoolDump("rx_packets 12\n", "d", 1);
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  out = ParseEthtoolDump("rx_packets: -1\n", "d", 1);
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  out = ParseEthtoolDump("", "d", 1);
  ASSERT_TRUE(out.ok());
  EXPECT_TRUE(out->empty());
}

}  // namespace
}  // namespace rocetune
