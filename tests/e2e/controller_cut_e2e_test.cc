// Fault injection: the controller cut off by the network. The test moves
// itself into a network namespace of its own (so the controller,
// rocetune-fabricsim --agents and rocetunectl it starts share a private
// loopback), then drops every TCP packet to and from the controller's port
// with nftables for longer than the agents' --stream_stall_timeout: no FIN,
// no reset, as a cut link or a firewall would. Checked: the cut is silent
// (the kernel sends no reset on that port); the agents notice the stalled
// stream, keep their parameters, hold their reports and, once the path is
// back, reconnect within seconds and deliver every held report; a set
// causing a PFC pause storm pushed just before the cut is rolled back by the
// agents' local guard during it and recorded as rejected afterwards.
// Needs root (CAP_SYS_ADMIN for the namespace); skipped otherwise.
#include <algorithm>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/e2e/e2e_env.h"
#include "tests/e2e/fault_checks.h"

namespace rocetune::e2e {
namespace {

using ::rocetune::testing::MetricSum;

constexpr char kTable[] = "rocetune_cut";

// Packets counted by the named nft counter of the cut table (-1 unreadable).
int64_t NftCounter(const std::string& nft, const std::string& counter) {
  std::string out;
  if (testing::RunCommand(nft, {"list", "counter", "inet", kTable, counter}, &out) != 0) return -1;
  const size_t at = out.find("packets ");
  int64_t v = -1;
  if (at == std::string::npos) return -1;
  const size_t end = out.find(' ', at + 8);
  if (!absl::SimpleAtoi(out.substr(at + 8, end - at - 8), &v)) return -1;
  return v;
}

// The kernel's count of TCP resets sent in this thread's namespace, on any
// port (printed, not held).
int64_t TcpOutRsts() {
  std::ifstream in("/proc/thread-self/net/snmp");
  std::vector<std::string> header, values;
  for (std::string line; std::getline(in, line);) {
    if (!absl::StartsWith(line, "Tcp: ")) continue;
    (header.empty() ? header : values) = absl::StrSplit(line, ' ');
  }
  for (size_t i = 0; i < header.size() && i < values.size(); ++i) {
    int64_t v = 0;
    if (header[i] == "OutRsts" && absl::SimpleAtoi(values[i], &v)) return v;
  }
  return -1;
}

// The nft table that drops the controller's port; deleted on destruction (and
// gone with the namespace once the test's processes exit).
class Cut {
 public:
  explicit Cut(std::string nft) : table_(std::move(nft), kTable) {}
  // Drops TCP to and from `port` (loopback packets pass the output hook once);
  // resets are counted apart.
  absl::Status Install(Env& env, int port) {
    return table_.Install(
        env.dir(),
        absl::StrCat("  counter resets {}\n"
                     "  counter dropped {}\n"
                     "  chain output {\n"
                     "    type filter hook output priority 0; policy accept;\n"
                     "    tcp dport ",
                     port, " tcp flags & rst == rst counter name resets drop\n    tcp sport ", port,
                     " tcp flags & rst == rst counter name resets drop\n    tcp dport ", port,
                     " counter name dropped drop\n    tcp sport ", port,
                     " counter name dropped drop\n"
                     "  }\n"));
  }
  absl::Status Heal() { return table_.Delete(); }

 private:
  NftTable table_;
};

int64_t Param(const v1::HostInfo& h, const std::string& name) {
  for (const auto& d : h.current_parameters().devices()) {
    auto it = d.dcqcn().find(name);
    if (it != d.dcqcn().end()) return it->second;
  }
  return -1;
}

TEST(ControllerCutE2E, SilentCutAgentsStallHoldReportsAndReconnect) {
  const std::string nft = SystemTool("nft");
  if (absl::Status s = EnterPrivateNetns(); !s.ok()) GTEST_SKIP() << s.message();
  const std::string inner_ns = NetnsOf("thread-self");
  std::string out;

  EnvOptions opt;
  const std::string ready = absl::StrCat(testing::MakeTempDir("cut"), "/fabric.ready");
  // The guard trips on a pause storm as in controller_unreachable_e2e_test,
  // on the first judged round over its limit: this set's pause bursts on the
  // four storm hosts are sparse (one 250 ms round in several), and the test is
  // about the guard's event crossing a silent cut, not about its rounds.
  opt.fabricsim_flags = {"--guard_max_pfc_pause_ratio=0.001", "--guard_window=60s",
                         "--guard_rounds=1", "--metrics_address=127.0.0.1:0",
                         absl::StrCat("--ready_file=", ready)};
  Env env(opt);
  ASSERT_TRUE(env.Start()) << env.ControllerLog() << env.FabricLog();
  // The fabric and rocetunectl reach the controller on this namespace's
  // loopback, so they are in it too.
  EXPECT_EQ(NetnsOf(absl::StrCat(env.controller_pid())), inner_ns)
      << "the controller is not in the test's namespace";
  const int fabric_metrics =
      testing::WaitForPortInReadyFile(ready, "metrics_port", absl::Seconds(10));
  const int controller_metrics = env.controller_metrics_port();
  ASSERT_GT(fabric_metrics, 0);
  ASSERT_GT(controller_metrics, 0);
  auto fabric_page = [&] { return testing::HttpGet(fabric_metrics, "/metrics"); };
  auto controller_page = [&] { return testing::HttpGet(controller_metrics, "/metrics"); };

  // A pause-storm set on four hosts right before the cut.
  const std::vector<std::string> storm = {"h0", "h1", "h2", "h3"};
  for (const std::string& h : storm) {
    ASSERT_EQ(env.Ctl({"push", h, "mlx5_0", "rpg_min_dec_fac=100", "--wait", "--reason=storm"},
                      "alice", &out),
              0)
        << out;
  }
  std::map<std::string, std::string> before, before_version, storm_version;
  for (const v1::HostInfo& h : env.Hosts()) {
    before[h.host_id()] = ParamKey(h.current_parameters());
    before_version[h.host_id()] = h.current_version();
    if (std::find(storm.begin(), storm.end(), h.host_id()) != storm.end()) {
      storm_version[h.host_id()] = h.desired_version();
    }
  }
  ASSERT_EQ(before.size(), 32u);

  std::string page = fabric_page();
  const double held_sent0 = MetricSum(page, "rocetune_agent_held_reports_sent_total");
  const double held_dropped0 = MetricSum(page, "rocetune_agent_held_reports_dropped_total");
  const double guard0 = MetricSum(page, "rocetune_agent_guard_rollbacks_total");
  // The fleet's sampling rate while connected (the simulation shares the CPU
  // with 32 agents: below 4 rounds a second per host at 250 ms).
  const double rounds_a = MetricSum(page, "rocetune_agent_sampling_duration_seconds_count");
  const absl::Time rounds_a_at = absl::Now();
  absl::SleepFor(absl::Seconds(3));
  page = fabric_page();
  const double rounds0 = MetricSum(page, "rocetune_agent_sampling_duration_seconds_count");
  const double round_rate = (rounds0 - rounds_a) / absl::ToDoubleSeconds(absl::Now() - rounds_a_at);
  std::map<std::string, double> stalls0_by_host;
  MetricSum(page, "rocetune_agent_stream_stalls_total", "", &stalls0_by_host);
  page = controller_page();
  const double filed0 =
      MetricSum(page, "rocetune_controller_held_reports_total", "outcome=\"filed\"");
  const double discarded0 =
      MetricSum(page, "rocetune_controller_held_reports_total", "outcome=\"discarded\"");
  const int64_t rsts0 = TcpOutRsts();
  const size_t log_before = env.FabricLog().size();

  // The cut: 18 s, past the 5 s stall timeout and the controller's 10 s
  // --stale_after. No admin call crosses it (they use the same port).
  constexpr absl::Duration kCut = absl::Seconds(18);
  Cut cut(nft);
  if (absl::Status installed = cut.Install(env, env.port()); !installed.ok()) {
    FAIL() << installed;
  }
  const absl::Time cut_at = absl::Now();
  absl::Time first_stall = absl::InfinitePast(), all_stalled = absl::InfinitePast();
  double received_1s = -1, held_max = 0;
  while (absl::Now() - cut_at < kCut) {
    absl::SleepFor(absl::Milliseconds(100));
    page = fabric_page();
    std::map<std::string, double> by_host;
    MetricSum(page, "rocetune_agent_stream_stalls_total", "", &by_host);
    int stalled = 0;
    for (const auto& [host, n] : by_host) stalled += n > stalls0_by_host[host];
    if (stalled > 0 && first_stall == absl::InfinitePast()) first_stall = absl::Now();
    if (stalled >= 32 && all_stalled == absl::InfinitePast()) all_stalled = absl::Now();
    held_max = std::max(held_max, MetricSum(page, "rocetune_agent_reports_held"));
    if (received_1s < 0 && absl::Now() - cut_at > absl::Seconds(1)) {
      received_1s = MetricSum(controller_page(), "rocetune_controller_reports_received_total");
    }
  }
  page = controller_page();
  const double received_end = MetricSum(page, "rocetune_controller_reports_received_total");
  const double stale = MetricSum(page, "rocetune_controller_hosts", "state=\"stale\"") +
                       MetricSum(page, "rocetune_controller_hosts", "state=\"gone\"");
  const int64_t dropped = NftCounter(nft, "dropped");
  const int64_t resets = NftCounter(nft, "resets");
  const int64_t rsts = TcpOutRsts() - rsts0;
  page = fabric_page();
  const double guard_during = MetricSum(page, "rocetune_agent_guard_rollbacks_total") - guard0;
  const double rounds = MetricSum(page, "rocetune_agent_sampling_duration_seconds_count") - rounds0;
  if (absl::Status healed = cut.Heal(); !healed.ok()) FAIL() << healed;
  const absl::Time healed_at = absl::Now();

  // The cut was real and silent.
  EXPECT_GT(dropped, 0) << "the nft rules dropped nothing";
  EXPECT_EQ(received_end, received_1s) << "reports reached the controller through the cut";
  EXPECT_EQ(stale, 32) << "the controller still saw hosts reporting";
  EXPECT_EQ(resets, 0) << "TCP resets on the controller's port during the cut";
  // The namespace's count of resets sent (kernel_rsts in the FAULT line) also
  // counts every other connection in it, the test's own scrapes of the
  // metrics pages every 100 ms among them: a run with the e2e tests side by
  // side counted one there and none on the controller's port. The cut's
  // silence is the `resets` counter above, on that port (the kernel's resets
  // pass the output hook).
  // Every agent noticed the stalled stream.
  ASSERT_NE(all_stalled, absl::InfinitePast()) << "not every agent reported a stall";
  const double detect_first = absl::ToDoubleSeconds(first_stall - cut_at);
  const double detect_all = absl::ToDoubleSeconds(all_stalled - cut_at);
  EXPECT_LE(detect_all, 12.0) << "stall detection";

  // The agents kept sampling (and guarding) while cut off: stalled writes
  // and connect attempts run beside local rounds (95-100% measured; 71% when
  // the first stalled report write still held the sampling thread).
  const double expected_rounds = round_rate * absl::ToDoubleSeconds(healed_at - cut_at);
  EXPECT_GE(rounds, 0.8 * expected_rounds) << "sampling rounds while cut off";

  // Back: every host on a new stream within a few seconds.
  std::vector<v1::HostInfo> hosts;
  auto reconnected = [&] {
    hosts = env.Hosts();
    int n = 0;
    for (const v1::HostInfo& h : hosts) {
      n +=
          h.state() == v1::HOST_CONNECTED && absl::FromUnixNanos(h.connected_unix_nanos()) > cut_at;
    }
    return n == 32;
  };
  ASSERT_TRUE(env.WaitFor(reconnected, absl::Seconds(60), absl::Milliseconds(50)))
      << "not every host reconnected after the heal";
  const double reconnect = absl::ToDoubleSeconds(absl::Now() - healed_at);
  EXPECT_LE(reconnect, 10.0) << "every host back within a few seconds of the heal";

  // Held reports delivered, none dropped; the controller filed them all.
  double held_sent = 0, filed = 0, discarded = 0;
  EXPECT_TRUE(env.WaitFor(
      [&] {
        page = fabric_page();
        held_sent = MetricSum(page, "rocetune_agent_held_reports_sent_total") - held_sent0;
        const double waiting = MetricSum(page, "rocetune_agent_reports_held");
        const std::string cpage = controller_page();
        filed = MetricSum(cpage, "rocetune_controller_held_reports_total", "outcome=\"filed\"") -
                filed0;
        discarded =
            MetricSum(cpage, "rocetune_controller_held_reports_total", "outcome=\"discarded\"") -
            discarded0;
        // Equal, not just enough: the two pages are read one after the
        // other, and a report in flight is filed before the agent counts it
        // sent, so the counts agree only once nothing is in flight.
        return waiting == 0 && held_sent > 0 && filed + discarded == held_sent;
      },
      absl::Seconds(20)))
      << "held " << held_sent << " sent, controller filed " << filed;
  // The storm hosts' guard events (held while cut off) have arrived.
  ASSERT_TRUE(env.WaitFor(
      [&] {
        hosts = env.Hosts();
        return std::count_if(hosts.begin(), hosts.end(), [&](const v1::HostInfo& h) {
                 return storm_version.contains(h.host_id()) && !h.last_guard_event().empty();
               }) >= 1;
      },
      absl::Seconds(20)))
      << "no storm host reported a guard restore";
  const double held_dropped =
      MetricSum(fabric_page(), "rocetune_agent_held_reports_dropped_total") - held_dropped0;
  EXPECT_EQ(held_dropped, 0) << "held reports dropped with the default buffer";
  EXPECT_EQ(discarded, 0) << "held reports discarded by the controller";
  EXPECT_EQ(filed, held_sent) << "held reports sent but not filed";

  // Parameters: every host but the storm ones as before the cut.
  const int restore_logs = [&] {
    int n = 0;
    const std::string log = env.FabricLog();
    for (size_t at = log.find("local guard restored", log_before); at != std::string::npos;
         at = log.find("local guard restored", at + 1)) {
      ++n;
    }
    return n;
  }();
  int storm_restored = 0;
  for (const v1::HostInfo& h : hosts) {
    auto it = storm_version.find(h.host_id());
    if (it == storm_version.end()) {
      EXPECT_EQ(ParamKey(h.current_parameters()), before[h.host_id()])
          << h.host_id() << " changed parameters across the cut";
      EXPECT_EQ(h.current_version(), before_version[h.host_id()]) << h.host_id();
      continue;
    }
    // A storm host is on the storm set or on its previous set, not a mix.
    const int64_t dec = Param(h, "rpg_min_dec_fac");
    EXPECT_TRUE(dec == 100 || dec == 50) << h.ShortDebugString();
    if (!h.last_guard_event().empty()) {
      ++storm_restored;
      EXPECT_EQ(dec, 50) << h.host_id();
      EXPECT_THAT(h.rejected_versions(), ::testing::Contains(it->second)) << h.ShortDebugString();
    }
  }
  std::printf(
      "FAULT controller_cut cut_s=%.1f dropped_packets=%lld resets=%lld kernel_rsts=%lld "
      "stall_detect_s first=%.2f all=%.2f reconnect_after_heal_s=%.2f (32 hosts) "
      "sampling_rounds=%.0f of %.0f "
      "held_max=%.0f held_sent=%.0f filed=%.0f discarded=%.0f held_dropped=%.0f "
      "guard_restores_during_cut=%.0f (log lines %d) storm_hosts_restored=%d of %zu\n",
      absl::ToDoubleSeconds(healed_at - cut_at), static_cast<long long>(dropped),
      static_cast<long long>(resets), static_cast<long long>(rsts), detect_first, detect_all,
      reconnect, rounds, expected_rounds, held_max, held_sent, filed, discarded, held_dropped,
      guard_during, restore_logs, storm_restored, storm.size());
  // A break-glass push has no change to roll back: the desired version stays
  // the rejected one, but it is not applied again: 3 s more of reports from
  // every host.
  ASSERT_TRUE(env.WaitForTelemetry(absl::Seconds(3))) << env.ControllerLog();
  for (const v1::HostInfo& h : env.Hosts()) {
    if (!storm_version.contains(h.host_id()) || h.last_guard_event().empty()) continue;
    EXPECT_EQ(Param(h, "rpg_min_dec_fac"), 50) << h.host_id() << " went back into the storm";
  }
  ASSERT_EQ(env.Ctl({"audit", "verify"}, "carol", &out), 0) << out;
}

}  // namespace
}  // namespace rocetune::e2e
