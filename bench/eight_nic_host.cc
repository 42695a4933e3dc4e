#include "bench/eight_nic_host.h"

#include <linux/ethtool.h>
#include <stdlib.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <memory>
#include <random>
#include <system_error>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "agent/host/counter_source_group.h"
#include "agent/host/counter_source_selector.h"
#include "agent/host/ethtool_stats.h"
#include "agent/host/sysfs_nic_discovery.h"
#include "agent/sampler.h"
#include "daemon/clock.h"
#include "model/quantile_sketch.h"

namespace rocetune::bench {

namespace fs = std::filesystem;

namespace {

void WriteFile(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p) << text;
}

void Symlink(const std::string& target, const fs::path& p) {
  fs::create_directories(p.parent_path());
  fs::create_symlink(target, p);
}

// mlx5 hw_counters and PMA counters/ names, as on a ConnectX-6 Dx host.
const char* const kHw[] = {
    "rx_write_requests",
    "rx_read_requests",
    "rx_atomic_requests",
    "rx_dct_connect",
    "out_of_buffer",
    "out_of_sequence",
    "duplicate_request",
    "rnr_nak_retry_err",
    "packet_seq_err",
    "implied_nak_seq_err",
    "local_ack_timeout_err",
    "resp_local_length_error",
    "resp_cqe_error",
    "req_cqe_error",
    "req_remote_invalid_request",
    "req_remote_access_errors",
    "resp_remote_access_errors",
    "resp_cqe_flush_error",
    "req_cqe_flush_error",
    "req_transport_retries_exceeded",
    "req_rnr_retries_exceeded",
    "roce_adp_retrans",
    "roce_adp_retrans_to",
    "roce_slow_restart",
    "roce_slow_restart_cnps",
    "roce_slow_restart_trans",
    "rp_cnp_ignored",
    "rp_cnp_handled",
    "np_ecn_marked_roce_packets",
    "np_cnp_sent",
    "rx_icrc_encapsulated",
};
const char* const kPma[] = {
    "port_xmit_data",
    "port_rcv_data",
    "port_xmit_packets",
    "port_rcv_packets",
    "unicast_xmit_packets",
    "unicast_rcv_packets",
    "multicast_xmit_packets",
    "multicast_rcv_packets",
    "symbol_error",
    "link_error_recovery",
    "link_downed",
    "port_rcv_errors",
    "port_rcv_remote_physical_errors",
    "port_rcv_switch_relay_errors",
    "port_xmit_discards",
    "port_xmit_constraint_errors",
    "port_rcv_constraint_errors",
    "local_link_integrity_errors",
    "excessive_buffer_overrun_errors",
    "VL15_dropped",
    "port_xmit_wait",
};

}  // namespace

void WriteMlx5Tree(const fs::path& sys, int ports) {
  for (int i = 0; i < ports; ++i) {
    const std::string bdf = absl::StrCat("0000:", 0x3b + i / 2, ":00.", i % 2);
    const std::string dev = absl::StrCat("mlx5_", i);
    const std::string netdev = absl::StrCat("ens", 1 + i / 2, "f", i % 2, "np", i % 2);
    const fs::path pci = sys / "devices/pci0000:3a/0000:3a:00.0" / bdf;
    WriteFile(pci / "vendor", "0x15b3\n");
    WriteFile(pci / "device", "0x101d\n");
    WriteFile(sys / "bus/pci/drivers/mlx5_core/uevent", "DRIVER=mlx5_core\n");
    if (!fs::is_symlink(pci / "driver"))
      Symlink("../../../../bus/pci/drivers/mlx5_core", pci / "driver");
    const fs::path ib = pci / "infiniband" / dev;
    WriteFile(ib / "fw_ver", "22.39.1002\n");
    WriteFile(ib / "node_guid", absl::StrCat("b8ce:f603:00a1:b2", 10 + i, "\n"));
    WriteFile(ib / "hca_type", "MT4125\n");
    WriteFile(ib / "board_id", "MT_0000000359\n");
    WriteFile(ib / "node_type", "1: CA\n");
    Symlink("../../../" + bdf, ib / "device");
    const fs::path port = ib / "ports/1";
    WriteFile(port / "state", "4: ACTIVE\n");
    WriteFile(port / "phys_state", "5: LinkUp\n");
    WriteFile(port / "rate", "100 Gb/sec (4X EDR)\n");
    WriteFile(port / "link_layer", "Ethernet\n");
    WriteFile(port / "lid", "0x0\n");
    WriteFile(port / "sm_lid", "0x0\n");
    WriteFile(port / "lid_mask_count", "0\n");
    WriteFile(port / "sm_sl", "0\n");
    WriteFile(port / "cap_mask", "0x00010000\n");
    for (int g = 0; g < 4; ++g) {
      WriteFile(port / "gids" / absl::StrCat(g), g < 2
                                                     ? "fe80:0000:0000:0000:bace:f6ff:fea1:b2c0\n"
                                                     : "0000:0000:0000:0000:0000:ffff:c0a8:0a0b\n");
      WriteFile(port / "gid_attrs/ndevs" / absl::StrCat(g), netdev + "\n");
      WriteFile(port / "gid_attrs/types" / absl::StrCat(g), g % 2 ? "RoCE v2\n" : "IB/RoCE v1\n");
    }
    WriteFile(port / "hw_counters/lifespan", "10\n");
    uint64_t v = 1000 + static_cast<uint64_t>(i) * 7919;
    for (const char* n : kHw) WriteFile(port / "hw_counters" / n, absl::StrCat(v += 104729, "\n"));
    for (const char* n : kPma) WriteFile(port / "counters" / n, absl::StrCat(v += 15485863, "\n"));
    Symlink("../../" +
                (fs::path("devices/pci0000:3a/0000:3a:00.0") / bdf / "infiniband" / dev).string(),
            sys / "class/infiniband" / dev);
    WriteFile(sys / "class/net" / netdev / "address", "b8:ce:f6:a1:b2:c0\n");
    Symlink("../../../../../class/net/" + netdev, pci / "net" / netdev);
  }
}

absl::StatusOr<FixtureEthtool> FixtureEthtool::Load(const std::string& path,
                                                    std::set<std::string> ifnames) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ethtool fixture ", path));
  FixtureEthtool f;
  f.ifnames_ = std::move(ifnames);
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    ++n;
    absl::string_view l = absl::StripAsciiWhitespace(line);
    if (l.empty() || absl::EndsWith(l, "statistics:")) continue;
    const size_t colon = l.rfind(':');
    uint64_t v = 0;
    if (colon == absl::string_view::npos ||
        !absl::SimpleAtoi(absl::StripAsciiWhitespace(l.substr(colon + 1)), &v)) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ":", n, ": not \"name: value\": ", line));
    }
    f.names_.emplace_back(absl::StripAsciiWhitespace(l.substr(0, colon)));
    f.values_.push_back(v);
  }
  if (f.names_.empty()) return absl::InvalidArgumentError(path + ": no statistics");
  return f;
}

int FixtureEthtool::Ioctl(const std::string& ifname, void* cmd) const {
  if (ifnames_.count(ifname) == 0) return -ENODEV;
  uint32_t c;
  std::memcpy(&c, cmd, sizeof(c));
  const uint32_t n = static_cast<uint32_t>(names_.size());
  if (c == ETHTOOL_GSSET_INFO) {
    auto* info = static_cast<struct ethtool_sset_info*>(cmd);
    if (info->sset_mask != (uint64_t{1} << ETH_SS_STATS)) return -EOPNOTSUPP;
    info->data[0] = n;
    return 0;
  }
  if (c == ETHTOOL_GSTRINGS) {
    auto* gs = static_cast<struct ethtool_gstrings*>(cmd);
    if (gs->string_set != ETH_SS_STATS || gs->len != n) {
      gs->len = 0;
      return 0;
    }
    for (uint32_t i = 0; i < n; ++i) {
      char* dst = reinterpret_cast<char*>(gs->data) + i * ETH_GSTRING_LEN;
      std::memset(dst, 0, ETH_GSTRING_LEN);
      std::memcpy(dst, names_[i].data(), std::min<size_t>(names_[i].size(), ETH_GSTRING_LEN));
    }
    return 0;
  }
  if (c == ETHTOOL_GSTATS) {
    auto* st = static_cast<struct ethtool_stats*>(cmd);
    if (st->n_stats != n) {
      st->n_stats = 0;
      return 0;
    }
    for (uint32_t i = 0; i < n; ++i) st->data[i] = values_[i];
    return 0;
  }
  return -EOPNOTSUPP;
}

namespace {

// A counter's increase over one second on a port carrying RoCE at half of
// 100 Gb/s on priority 3, with some ECN marking and PFC: bytes and packets
// where the name says so (other priorities idle), pause frames and their
// duration, CNPs and ECN marks, a few retransmissions; error counters 0.
uint64_t TypicalDelta(const std::string& name) {
  const bool other_priority = absl::StrContains(name, "prio") && !absl::StrContains(name, "prio3");
  if (other_priority) return 0;
  if (absl::StrContains(name, "pause_duration")) return 3000;  // µs
  if (absl::StrContains(name, "pause")) return 300;
  if (absl::StrContains(name, "bytes")) return 6'250'000'000;
  if (absl::EndsWith(name, "_data")) return 1'562'500'000;   // PMA data: 4-byte words
  if (absl::StrContains(name, "packets")) return 1'525'000;  // 4 KiB MTU
  if (absl::StrContains(name, "cnp") || absl::StrContains(name, "ecn")) return 20'000;
  if (absl::StrContains(name, "retrans") || absl::StrContains(name, "slow_restart")) return 3;
  return 0;
}

void Fill(QuantileSketch* sk, std::mt19937* rng, int n, double median, double sigma,
          double tail_share, double tail_factor) {
  std::lognormal_distribution<double> body(std::log(median), sigma);
  std::uniform_real_distribution<double> u(0, 1);
  for (int i = 0; i < n; ++i) sk->Insert(body(*rng) * (u(*rng) < tail_share ? tail_factor : 1.0));
}

}  // namespace

void FillProbesAndJobs(const HostReportShape& shape, uint32_t seed, v1::Report* report) {
  std::mt19937 rng(seed);
  report->clear_latency();
  for (const char* peers : {"intra_tor", "inter_tor"}) {
    const bool near = absl::StartsWith(peers, "intra");
    v1::LatencyWindow* w = report->add_latency();
    w->set_peer_class(peers);
    QuantileSketch rtt, host;
    Fill(&rtt, &rng, shape.probes_per_class, near ? 8e-6 : 14e-6, 0.35, 0.03, 6);
    Fill(&host, &rng, shape.probes_per_class, 1.5e-6, 0.3, 0.01, 4);
    rtt.ToProto(w->mutable_network_rtt_seconds());
    host.ToProto(w->mutable_host_delay_seconds());
    w->set_probes_sent(static_cast<uint64_t>(shape.probes_per_class));
    w->set_clock("nic_completion");
  }
  report->clear_jobs();
  struct Op {
    const char* name;
    int events;
    double median_s;
    uint64_t bytes_each;
  };
  // In (job, op) order, as the agent sends them.
  const Op ops[] = {{"allgather", shape.allgathers, 2.1e-3, 64u << 20},
                    {"allreduce", shape.allreduces, 6.5e-3, 256u << 20},
                    {"reducescatter", shape.reducescatters, 2.3e-3, 64u << 20},
                    {"step", shape.steps, 0.95, 0}};
  for (const Op& op : ops) {
    if (op.events <= 0) continue;
    v1::JobTiming* j = report->add_jobs();
    j->set_job("llama-70b/run3");
    j->set_op(op.name);
    QuantileSketch sk;
    Fill(&sk, &rng, op.events, op.median_s, 0.15, 0.03, 3);
    sk.ToProto(j->mutable_seconds());
    j->set_bytes(op.bytes_each * static_cast<uint64_t>(op.events));
  }
}

absl::StatusOr<HostReport> EightNicHostReport(const std::string& ethtool_fixture,
                                              const HostReportShape& shape, uint32_t seed) {
  char tmpl[] = "/tmp/rocetune-host-XXXXXX";
  if (mkdtemp(tmpl) == nullptr) {
    return absl::InternalError(absl::StrCat("mkdtemp ", tmpl, ": ", std::strerror(errno)));
  }
  struct Cleanup {
    std::string dir;
    ~Cleanup() {
      std::error_code ec;
      fs::remove_all(dir, ec);
    }
  } cleanup{tmpl};
  const std::string sys = (fs::path(tmpl) / "sys").string();
  WriteMlx5Tree(sys, shape.ports);

  HostReport out;
  SysfsNicDiscovery discovery(sys, "sysfs");
  absl::StatusOr<std::vector<v1::NicDevice>> devices = discovery.Discover();
  if (!devices.ok()) return devices.status();
  if (devices->empty()) return absl::NotFoundError(absl::StrCat("no RDMA device under ", sys));
  out.devices = *std::move(devices);
  const std::vector<EthtoolTarget> targets = EthtoolTargetsFromInventory(out.devices);
  std::set<std::string> ifnames;
  for (const EthtoolTarget& t : targets) ifnames.insert(t.ifname);
  absl::StatusOr<FixtureEthtool> eth = FixtureEthtool::Load(ethtool_fixture, ifnames);
  if (!eth.ok()) return eth.status();
  const FixtureEthtool fixture = *std::move(eth);
  std::vector<std::unique_ptr<CounterSource>> members;
  members.push_back(MakeCounterSource(sys, CounterSourcePreference::kSysfs));
  members.push_back(std::make_unique<EthtoolCounterSource>(
      targets,
      [&fixture](const std::string& ifname, void* cmd) { return fixture.Ioctl(ifname, cmd); }));
  CounterSourceGroup group("host", std::move(members));
  absl::StatusOr<std::unique_ptr<Sampler>> sampler = Sampler::Create(&group, Clock::Real());
  if (!sampler.ok()) return sampler.status();
  // The first snapshot only sets the baseline; the second gives the samples.
  for (int round = 0; round < 2; ++round) {
    absl::StatusOr<SampleBatch> batch = (*sampler)->SampleOnce();
    if (!batch.ok()) return batch.status();
    if (round == 0) continue;
    if (batch->samples.empty()) {
      return absl::InternalError(absl::StrCat("the sampler read no counter under ", sys));
    }
    out.report.mutable_counters()->Swap(&batch->samples);
    out.report.mutable_levels()->Swap(&batch->levels);
  }
  for (v1::CounterSample& c : *out.report.mutable_counters()) {
    c.set_delta(TypicalDelta(c.name()));
    c.set_rate_per_second(static_cast<double>(c.delta()));
  }
  FillProbesAndJobs(shape, seed, &out.report);
  return out;
}

}  // namespace rocetune::bench
