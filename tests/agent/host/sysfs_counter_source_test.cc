#include "agent/host/sysfs_counter_source.h"

#include <sys/stat.h>

#include <filesystem>
#include <map>
#include <string>

#include "daemon/logging.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/test_support.h"

namespace rocetune {
namespace {

using ::rocetune::testing::FixtureTree;
using ::testing::HasSubstr;

std::string HostSys(const std::string& host) {
  return std::string(ROCETUNE_SOURCE_DIR) + "/tests/fixtures/hosts/" + host + "/sys";
}

std::map<std::string, CounterValue> ByName(const std::vector<CounterValue>& values,
                                           const std::string& device, uint32_t port = 1) {
  std::map<std::string, CounterValue> m;
  for (const CounterValue& v : values) {
    if (v.key.device == device && v.key.port == port) m[v.key.name] = v;
  }
  return m;
}

// Expects the same counters, keys and values, in the same order.
void ExpectSameCounters(const std::vector<CounterValue>& got,
                        const std::vector<CounterValue>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(got[i].key, want[i].key) << i;
    EXPECT_EQ(got[i].value, want[i].value) << i;
  }
}

uint64_t FileValue(const std::string& path) { return std::stoull(FixtureTree::ReadFile(path)); }

TEST(SysfsCounterSourceTest, Mlx5CountersAreMappedAndWordsBecomeBytes) {
  const std::string sys = HostSys("mlx5_ofed");
  SysfsCounterSource source(sys);
  EXPECT_EQ(source.name(), "sysfs");
  std::vector<CounterValue> out;
  ASSERT_TRUE(source.Collect(&out).ok());
  auto c = ByName(out, "mlx5_0");
  const std::string port = sys + "/class/infiniband/mlx5_0/ports/1/";
  EXPECT_EQ(c.at("cnp_sent").value, FileValue(port + "hw_counters/np_cnp_sent"));
  EXPECT_EQ(c.at("cnp_handled").value, FileValue(port + "hw_counters/rp_cnp_handled"));
  EXPECT_EQ(c.at("cnp_ignored").value, FileValue(port + "hw_counters/rp_cnp_ignored"));
  EXPECT_EQ(c.at("ecn_marked_packets").value,
            FileValue(port + "hw_counters/np_ecn_marked_roce_packets"));
  EXPECT_EQ(c.at("out_of_sequence").value, FileValue(port + "hw_counters/out_of_sequence"));
  EXPECT_EQ(c.at("out_of_sequence").width_bits, 32);
  EXPECT_EQ(c.at("cnp_sent").width_bits, 64);
  EXPECT_EQ(c.at("tx_bytes").value, 4 * FileValue(port + "counters/port_xmit_data"));
  EXPECT_EQ(c.at("rx_bytes").value, 4 * FileValue(port + "counters/port_rcv_data"));
  EXPECT_EQ(c.at("tx_packets").value, FileValue(port + "counters/port_xmit_packets"));
  EXPECT_EQ(c.at("rx_write_requests").value, FileValue(port + "hw_counters/rx_write_requests"));
  EXPECT_EQ(c.count("lifespan"), 0u);
  EXPECT_EQ(c.count("np_cnp_sent"), 0u);
  EXPECT_EQ(c.count("port_xmit_data"), 0u);
  EXPECT_FALSE(ByName(out, "mlx5_1").empty());
  EXPECT_EQ(source.skipped_files(), 0u);
}

TEST(SysfsCounterSourceTest, BnxtReCounters) {
  const std::string sys = HostSys("bnxt_re");
  SysfsCounterSource source(sys);
  std::vector<CounterValue> out;
  ASSERT_TRUE(source.Collect(&out).ok());
  auto c = ByName(out, "bnxt_re0");
  const std::string hw = sys + "/class/infiniband/bnxt_re0/ports/1/hw_counters/";
  EXPECT_EQ(c.at("cnp_sent").value, FileValue(hw + "tx_cnp_pkts"));
  EXPECT_EQ(c.at("cnp_handled").value, FileValue(hw + "rx_cnp_pkts"));
  EXPECT_EQ(c.at("ecn_marked_packets").value, FileValue(hw + "rx_ecn_marked_pkts"));
  EXPECT_EQ(c.at("packet_seq_err").value, FileValue(hw + "seq_err_naks_rcvd"));
  EXPECT_EQ(c.at("local_ack_timeout_err").value, FileValue(hw + "to_retransmits"));
  EXPECT_EQ(c.at("out_of_sequence").value, FileValue(hw + "rx_out_of_sequence"));
  // bnxt_re's own rx_bytes hw counter is not the canonical PMA rx_bytes, but it
  // has no counters/ directory, so the name is free and passes through.
  EXPECT_EQ(c.at("rx_bytes").value, FileValue(hw + "rx_bytes"));
  EXPECT_EQ(c.count("tx_cnp_pkts"), 0u);
}

TEST(SysfsCounterSourceTest, IrdmaCountersAre32BitWhereTheHardwareIs) {
  const std::string sys = HostSys("irdma");
  SysfsCounterSource source(sys);
  std::vector<CounterValue> out;
  ASSERT_TRUE(source.Collect(&out).ok());
  auto c = ByName(out, "irdma0");
  const std::string hw = sys + "/class/infiniband/irdma0/ports/1/hw_counters/";
  EXPECT_EQ(c.at("cnp_sent").value, FileValue(hw + "cnpSent"));
  EXPECT_EQ(c.at("cnp_sent").width_bits, 32);
  EXPECT_EQ(c.at("cnp_handled").value, FileValue(hw + "cnpHandled"));
  EXPECT_EQ(c.at("cnp_ignored").value, FileValue(hw + "cnpIgnored"));
  EXPECT_EQ(c.at("ecn_marked_packets").value, FileValue(hw + "RxECNMrkd"));
  EXPECT_EQ(c.at("ip4InOctets").width_bits, 64);
}

TEST(SysfsCounterSourceTest, RxeCountersMapWithoutPortCounters) {
  SysfsCounterSource source(HostSys("rxe"));
  std::vector<CounterValue> out;
  ASSERT_TRUE(source.Collect(&out).ok());
  auto c = ByName(out, "rxe0");
  EXPECT_EQ(c.size(), 15u);  // the 15 rxe hw_counters (lifespan excluded)
  // rxe's own names map to canonical ones (model/counter_names.cc).
  ASSERT_EQ(c.count("rx_packets"), 1u);
  EXPECT_EQ(c.at("rx_packets").value, 20017u);
  EXPECT_EQ(c.count("rcvd_pkts"), 0u);
  EXPECT_EQ(c.count("tx_bytes"), 0u);
}

TEST(SysfsCounterSourceTest, DeviceFilterAndOptions) {
  SysfsCounterOptions options;
  options.devices = {"mlx5_1"};
  options.hw_counters = false;
  SysfsCounterSource source(HostSys("mlx5_ofed"), options);
  std::vector<CounterValue> out;
  ASSERT_TRUE(source.Collect(&out).ok());
  ASSERT_FALSE(out.empty());
  for (const CounterValue& v : out) {
    EXPECT_EQ(v.key.device, "mlx5_1");
    EXPECT_NE(v.key.name, "cnp_sent");
  }
}

TEST(SysfsCounterSourceTest, ValuesFollowTheFiles) {
  FixtureTree tree("mlx5_ofed");
  const std::string hw = tree.sys() + "/class/infiniband/mlx5_0/ports/1/hw_counters/";
  SysfsCounterSource source(tree.sys());
  std::vector<CounterValue> out;
  ASSERT_TRUE(source.Collect(&out).ok());
  FixtureTree::WriteFile(hw + "np_cnp_sent", "99999999999\n");
  out.clear();
  ASSERT_TRUE(source.Collect(&out).ok());
  EXPECT_EQ(ByName(out, "mlx5_0").at("cnp_sent").value, 99999999999u);
}

// The text of a counter file: "%llu\n" up to 2^64 - 1; anything else skips it.
TEST(SysfsCounterSourceTest, CounterTextIsParsedExactlyUpTo64Bits) {
  FixtureTree tree("rxe");
  const std::string file = tree.sys() + "/class/infiniband/rxe0/ports/1/hw_counters/send_err";
  SysfsCounterSource source(tree.sys());
  struct Case {
    const char* text;
    bool ok;
    uint64_t value;
  };
  const Case cases[] = {
      {"0\n", true, 0},
      {"42", true, 42},
      {"12 \n", true, 12},
      {"1234567890123456789\n", true, 1234567890123456789u},    // 19 digits
      {"9999999999999999999\n", true, 9999999999999999999u},    // 19 nines
      {"18446744073709551615\n", true, 18446744073709551615u},  // 2^64 - 1
      {"18446744073709551616\n", false, 0},                     // 2^64
      {"99999999999999999999\n", false, 0},
      {"000000000000000000000000017\n", true, 17},  // leading zeros, 27 digits
      {"100000000000000000000\n", false, 0},        // 21 digits
      {"", false, 0},
      {"\n", false, 0},
      {"-1\n", false, 0},
      {"12x\n", false, 0},
      {"0x10\n", false, 0},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.text);
    FixtureTree::WriteFile(file, c.text);
    std::vector<CounterValue> out;
    const uint64_t skipped = source.skipped_files();
    ASSERT_TRUE(source.Collect(&out).ok());
    auto m = ByName(out, "rxe0");
    if (c.ok) {
      ASSERT_EQ(m.count("send_err"), 1u);
      EXPECT_EQ(m.at("send_err").value, c.value);
      EXPECT_EQ(source.skipped_files(), skipped);
    } else {
      EXPECT_EQ(m.count("send_err"), 0u);
      EXPECT_EQ(source.skipped_files(), skipped + 1);
    }
  }
}

TEST(SysfsCounterSourceTest, MissingAndUnreadableFilesAreSkippedCountedAndLoggedOnce) {
  FixtureTree tree("mlx5_ofed");
  const std::string hw = tree.sys() + "/class/infiniband/mlx5_0/ports/1/hw_counters/";
  size_t full = 0;
  {
    SysfsCounterSource intact(tree.sys());
    std::vector<CounterValue> out;
    ASSERT_TRUE(intact.Collect(&out).ok());
    full = out.size();
  }
  // Four broken entries: a directory, a FIFO, a dangling symlink, junk text.
  std::filesystem::remove(hw + "np_cnp_sent");
  std::filesystem::create_directory(hw + "np_cnp_sent");
  std::filesystem::remove(hw + "rp_cnp_handled");
  ASSERT_EQ(mkfifo((hw + "rp_cnp_handled").c_str(), 0644), 0);
  std::filesystem::remove(hw + "rp_cnp_ignored");
  std::filesystem::create_symlink(hw + "does_not_exist", hw + "rp_cnp_ignored");
  FixtureTree::WriteFile(hw + "out_of_sequence", "lots\n");
  SysfsCounterOptions options;
  options.relist_every_rounds = 2;
  SysfsCounterSource source(tree.sys(), options);
  std::string log;
  SetLogSinkForTest(&log);
  std::vector<CounterValue> out;
  for (int i = 0; i < 4; ++i) {
    out.clear();
    ASSERT_TRUE(source.Collect(&out).ok());
    EXPECT_EQ(out.size(), full - 4);
  }
  SetLogSinkForTest(nullptr);
  // Rounds 1 and 3 list the directories (3 entries cannot be opened); every
  // round fails to parse out_of_sequence.
  EXPECT_EQ(source.skipped_files(), 2u * 3u + 4u);
  auto c = ByName(out, "mlx5_0");
  EXPECT_EQ(c.count("cnp_sent"), 0u);
  EXPECT_EQ(c.count("cnp_handled"), 0u);
  EXPECT_EQ(c.count("cnp_ignored"), 0u);
  EXPECT_EQ(c.count("out_of_sequence"), 0u);
  EXPECT_EQ(c.count("ecn_marked_packets"), 1u);
  for (const char* name : {"np_cnp_sent", "rp_cnp_handled", "rp_cnp_ignored", "out_of_sequence"}) {
    const std::string needle = hw + name;
    EXPECT_THAT(log, HasSubstr(needle));
    EXPECT_EQ(log.find(needle), log.rfind(needle)) << name << " logged more than once";
  }
}

TEST(SysfsCounterSourceTest, FilesBeyondTheDescriptorBudgetAreReadByPath) {
  const std::string sys = HostSys("mlx5_ofed");
  SysfsCounterSource cached(sys);
  SysfsCounterOptions options;
  options.max_open_files = 3;
  SysfsCounterSource budget(sys, options);
  std::vector<CounterValue> a, b;
  ASSERT_TRUE(cached.Collect(&a).ok());
  ASSERT_TRUE(budget.Collect(&b).ok());
  ExpectSameCounters(b, a);
}

TEST(SysfsCounterSourceTest, VanishedDeviceIsUnavailable) {
  FixtureTree tree("irdma");
  SysfsCounterSource source(tree.sys());
  std::vector<CounterValue> out;
  ASSERT_TRUE(source.Collect(&out).ok());
  std::filesystem::remove(tree.sys() + "/class/infiniband/irdma0");
  std::filesystem::remove_all(tree.sys() + "/devices");
  out.clear();
  absl::Status s = source.Collect(&out);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(s.message(), HasSubstr("irdma0"));
  EXPECT_TRUE(out.empty());
  s = source.Collect(&out);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
}

TEST(SysfsCounterSourceTest, OneVanishedDeviceOfTwoStillReadsTheOther) {
  FixtureTree tree("mlx5_ofed");
  SysfsCounterSource source(tree.sys());
  std::vector<CounterValue> out;
  ASSERT_TRUE(source.Collect(&out).ok());
  // The device's sysfs nodes go away (driver unbind of one function).
  std::filesystem::remove(tree.sys() + "/class/infiniband/mlx5_1");
  std::filesystem::remove_all(tree.sys() + "/devices/pci0000:3a/0000:3a:00.0/0000:3b:00.1");
  out.clear();
  ASSERT_TRUE(source.Collect(&out).ok());
  EXPECT_TRUE(ByName(out, "mlx5_1").empty());
  EXPECT_FALSE(ByName(out, "mlx5_0").empty());
}

TEST(SysfsCounterSourceTest, NewFilesAppearAfterARelist) {
  FixtureTree tree("rxe");
  SysfsCounterOptions options;
  options.relist_every_rounds = 2;
  SysfsCounterSource source(tree.sys(), options);
  std::vector<CounterValue> out;
  ASSERT_TRUE(source.Collect(&out).ok());  // lists
  const size_t before = out.size();
  const std::string hw = tree.sys() + "/class/infiniband/rxe0/ports/1/hw_counters/";
  std::filesystem::remove(hw + "send_err");
  FixtureTree::WriteFile(hw + "new_counter", "5\n");
  out.clear();
  ASSERT_TRUE(source.Collect(&out).ok());  // still the old listing
  EXPECT_EQ(ByName(out, "rxe0").count("new_counter"), 0u);
  out.clear();
  ASSERT_TRUE(source.Collect(&out).ok());  // relisted
  EXPECT_EQ(out.size(), before);
  EXPECT_EQ(ByName(out, "rxe0").at("new_counter").value, 5u);
  EXPECT_EQ(ByName(out, "rxe0").count("send_err"), 0u);
}

// CollectInto (the sampler's path, into a buffer kept across rounds) reads the
// same values as Collect, also when the listing changes under it.
TEST(SysfsCounterSourceTest, CollectIntoMatchesCollectAcrossRelists) {
  FixtureTree tree("rxe");
  SysfsCounterOptions options;
  options.relist_every_rounds = 2;
  SysfsCounterSource into(tree.sys(), options);
  SysfsCounterSource plain(tree.sys(), options);
  const std::string hw = tree.sys() + "/class/infiniband/rxe0/ports/1/hw_counters/";
  CounterBuffer buf;
  for (int round = 0; round < 6; ++round) {
    SCOPED_TRACE(round);
    if (round == 1) {
      std::filesystem::remove(hw + "send_err");
      FixtureTree::WriteFile(hw + "a_new_counter_with_a_rather_long_name", "5\n");
    }
    if (round == 3) FixtureTree::WriteFile(hw + "a_new_counter_with_a_rather_long_name", "9\n");
    buf.Clear();
    std::vector<CounterValue> want;
    ASSERT_TRUE(into.CollectInto(&buf).ok());
    ASSERT_TRUE(plain.Collect(&want).ok());
    ASSERT_EQ(buf.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) {
      EXPECT_EQ(buf[i].key, want[i].key);
      EXPECT_EQ(buf[i].value, want[i].value);
      EXPECT_EQ(buf[i].width_bits, want[i].width_bits);
    }
  }
  std::vector<CounterValue> last(buf.begin(), buf.end());
  EXPECT_EQ(ByName(last, "rxe0").at("a_new_counter_with_a_rather_long_name").value, 9u);
  EXPECT_EQ(ByName(last, "rxe0").count("send_err"), 0u);
}

// A periodic relist lists the directories again but keeps the descriptor of
// every file whose entry still names the inode it was opened on: only new and
// replaced files are opened.
TEST(SysfsCounterSourceTest, PeriodicRelistKeepsDescriptorsOfUnchangedFiles) {
  FixtureTree tree("mlx5_ofed");
  SysfsCounterOptions options;
  options.relist_every_rounds = 2;
  SysfsCounterSource source(tree.sys(), options);
  std::vector<CounterValue> out;
  ASSERT_TRUE(source.Collect(&out).ok());  // lists and opens everything
  const size_t files = out.size();
  const uint64_t opened = source.files_opened();
  EXPECT_GE(opened, files);
  out.clear();
  ASSERT_TRUE(source.Collect(&out).ok());
  out.clear();
  ASSERT_TRUE(source.Collect(&out).ok());  // relisted: nothing changed, nothing opened
  EXPECT_EQ(source.files_opened(), opened);
  EXPECT_EQ(out.size(), files);

  // rp_cnp_handled replaced by a new file (write elsewhere, rename over it: a
  // new inode under the same name); a file added; a file removed.
  const std::string hw = tree.sys() + "/class/infiniband/mlx5_0/ports/1/hw_counters/";
  FixtureTree::WriteFile(tree.root() + "/replacement", "777\n");
  std::filesystem::rename(tree.root() + "/replacement", hw + "rp_cnp_handled");
  FixtureTree::WriteFile(hw + "a_new_counter", "5\n");
  std::filesystem::remove(hw + "rx_write_requests");
  out.clear();
  ASSERT_TRUE(source.Collect(&out).ok());  // old listing
  out.clear();
  ASSERT_TRUE(source.Collect(&out).ok());  // relisted
  EXPECT_EQ(source.files_opened(), opened + 2);
  EXPECT_EQ(out.size(), files);
  auto c = ByName(out, "mlx5_0");
  EXPECT_EQ(c.at("cnp_handled").value, 777u);
  EXPECT_EQ(c.at("a_new_counter").value, 5u);
  EXPECT_EQ(c.count("rx_write_requests"), 0u);
  EXPECT_EQ(source.skipped_files(), 0u);

  // Values still follow the kept files.
  FixtureTree::WriteFile(hw + "np_cnp_sent", "123\n");
  out.clear();
  ASSERT_TRUE(source.Collect(&out).ok());
  EXPECT_EQ(ByName(out, "mlx5_0").at("cnp_sent").value, 123u);

  // Same values as a fresh source that opened everything itself.
  SysfsCounterSource fresh(tree.sys());
  std::vector<CounterValue> want;
  ASSERT_TRUE(fresh.Collect(&want).ok());
  ExpectSameCounters(out, want);
}

// A relist forced by a device that looks gone (its first file unlinked: the
// descriptor the per-round check uses has no links left) reopens every file,
// kept or not.
TEST(SysfsCounterSourceTest, RelistAfterAVanishedDeviceReopensEverything) {
  FixtureTree tree("rxe");
  SysfsCounterSource source(tree.sys());
  std::vector<CounterValue> out;
  ASSERT_TRUE(source.Collect(&out).ok());
  const size_t files = out.size();
  const uint64_t opened = source.files_opened();
  ASSERT_EQ(opened, files);
  // ack_deferred is rxe0's first counter file; re-created under the same name.
  const std::string hw = tree.sys() + "/class/infiniband/rxe0/ports/1/hw_counters/";
  std::filesystem::remove(hw + "ack_deferred");
  FixtureTree::WriteFile(hw + "ack_deferred", "8\n");
  out.clear();
  EXPECT_EQ(source.Collect(&out).code(), absl::StatusCode::kUnavailable);  // rxe0 looks gone
  out.clear();
  ASSERT_TRUE(source.Collect(&out).ok());  // relisted from scratch
  EXPECT_EQ(out.size(), files);
  EXPECT_EQ(source.files_opened(), opened + files);
  EXPECT_EQ(ByName(out, "rxe0").at("ack_deferred").value, 8u);
}

TEST(SysfsCounterSourceTest, NoDevicesIsUnavailable) {
  const ::rocetune::testing::TempDir dir("nodev-sys");
  const std::string root = dir.path() + "/sys";
  std::filesystem::create_directories(root + "/class/infiniband");
  SysfsCounterSource source(root);
  std::vector<CounterValue> out;
  EXPECT_EQ(source.Collect(&out).code(), absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace rocetune
