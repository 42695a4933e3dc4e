// CPU cost of one agent sampling round on a generated 8-port mlx5 sysfs tree,
// against Prometheus node_exporter's infiniband collector scraping the same
// tree in the same run (--path.sysfs, only that collector, exporter
// self-metrics off).
//
// A round is what Agent::RunStream does each sampling interval for counters:
// Sampler::SampleOnce (CollectInto over the CounterSourceGroup of the RDMA
// source -- the selector falls back to sysfs here -- and ethtool for each
// port's netdev, then the delta step) and moving the samples into a v1::Report
// (the swap into the report's counters and back after the write, as
// agent.cc does), updating the agent's /metrics counters from the Report
// (AgentMetrics::ObserveReport) and encoding the Report for the stream as
// Agent::WriteBytes does (ReportWireEncoder into a kept buffer, copied into
// the grpc::Slice of the ByteBuffer the stream writes; the stream's own
// Write, framing and socket send are not part of the figure). NIC discovery is not part of a round:
// the agent runs it only when it connects (Hello); it is reported on its own (discovery_cpu_us)
// and, for comparison with the old figure, added to a round
// (agent_cpu_us_per_round_with_discovery).
//
// Agent CPU: CLOCK_PROCESS_CPUTIME_ID around the rounds. node_exporter CPU:
// utime+stime from /proc/<pid>/stat around the scrapes. Rounds and scrapes
// alternate in ten chunks so that a slow spell of the machine (this is a VM;
// the kernel's pread path alone varies by 40% between minutes) weighs on both. Also reported: the
// pieces of a round (collect over the group, RDMA source alone, ethtool
// alone, sampler delta + metrics + report step = round - collect: a difference of two
// separately timed figures, so on a busy machine it is noisy and can even come
// out negative), CPU per counter / per
// series (the agent reads every hw_counters and counters file, node_exporter
// a subset), and the agent restricted to node_exporter's files (discovery +
// counters/ only).
//
// Usage: agent_collect_bench [--rounds=N] [--scrapes=N] [--node_exporter=PATH]
//        agent_collect_bench --profile_rounds=N  (only N rounds, for perf record)
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "agent/agent_metrics.h"
#include "agent/host/counter_source_group.h"
#include "agent/host/counter_source_selector.h"
#include "agent/host/ethtool_stats.h"
#include "agent/host/sysfs_counter_source.h"
#include "agent/host/sysfs_nic_discovery.h"
#include "agent/report_wire.h"
#include "agent/sampler.h"
#include "bench/proc_stats.h"
#include "daemon/clock.h"
#include "daemon/logging.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/slice.h"
#include "prometheus/registry.h"
#include "rocetune/v1/agent.pb.h"

namespace rocetune {
namespace {

namespace fs = std::filesystem;

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

// Writes an 8-port mlx5 host (mlx5_0..7, one port each, four dual-port cards).
void GenerateTree(const fs::path& sys, int ports) {
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

double ProcessCpuMicros() {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e6 + static_cast<double>(ts.tv_nsec) / 1e3;
}

// utime+stime of a process, in microseconds (clock-tick resolution).
int FreeLoopbackPort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  socklen_t len = sizeof(a);
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    close(fd);
    return -1;
  }
  close(fd);
  return ntohs(a.sin_port);
}

// One HTTP GET of /metrics; returns the body ("" on failure).
std::string Scrape(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<uint16_t>(port));
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    close(fd);
    return "";
  }
  const std::string req = absl::StrCat("GET /metrics HTTP/1.1\r\nHost: 127.0.0.1:", port,
                                       "\r\nConnection: close\r\n\r\n");
  if (write(fd, req.data(), req.size()) != static_cast<ssize_t>(req.size())) {
    close(fd);
    return "";
  }
  std::string resp;
  char buf[65536];
  ssize_t n;
  while ((n = read(fd, buf, sizeof(buf))) > 0) resp.append(buf, static_cast<size_t>(n));
  close(fd);
  const size_t body = resp.find("\r\n\r\n");
  if (!absl::StartsWith(resp, "HTTP/1.1 200") || body == std::string::npos) return "";
  return resp.substr(body + 4);
}

int Main(int argc, char** argv) {
  int rounds = 1000;
  int scrapes = 300;
  int profile_rounds = 0;
  std::string exporter = "/usr/bin/prometheus-node-exporter";
  for (int i = 1; i < argc; ++i) {
    absl::string_view a = argv[i];
    if (absl::ConsumePrefix(&a, "--rounds=")) {
      if (!absl::SimpleAtoi(a, &rounds) || rounds < 1) return 2;
    } else if (absl::ConsumePrefix(&a, "--scrapes=")) {
      if (!absl::SimpleAtoi(a, &scrapes) || scrapes < 1) return 2;
    } else if (absl::ConsumePrefix(&a, "--profile_rounds=")) {
      if (!absl::SimpleAtoi(a, &profile_rounds) || profile_rounds < 1) return 2;
    } else if (absl::ConsumePrefix(&a, "--node_exporter=")) {
      exporter = std::string(a);
    } else {
      std::fprintf(stderr,
                   "usage: %s [--rounds=N] [--scrapes=N] [--node_exporter=PATH] "
                   "[--profile_rounds=N]\n",
                   argv[0]);
      return 2;
    }
  }
  SetLogLevel("error").IgnoreError();

  char tmpl[] = "/tmp/agent_collect_bench_XXXXXX";
  if (mkdtemp(tmpl) == nullptr) return 1;
  const fs::path sys = fs::path(tmpl) / "sys";
  constexpr int kPorts = 8;
  GenerateTree(sys, kPorts);

  // ---- agent ----
  SysfsNicDiscovery discovery(sys.string());
  std::vector<v1::NicDevice> inventory = *discovery.Discover();
  std::unique_ptr<CounterSource> rdma = MakeCounterSource(sys.string());
  discovery.set_counter_source(rdma->name());
  CounterSource* rdma_source = rdma.get();
  std::vector<std::unique_ptr<CounterSource>> members;
  members.push_back(std::move(rdma));
  // The tree's netdevs do not exist on this host: each ioctl fails fast with
  // ENODEV; still, it is work a real round does.
  members.push_back(std::make_unique<EthtoolCounterSource>(EthtoolTargetsFromInventory(inventory)));
  CounterSource* ethtool_source = members.back().get();
  CounterSourceGroup all("bench", std::move(members));
  const size_t devices = inventory.size();

  auto cpu_per = [&](auto&& fn) {
    for (int i = 0; i < 20; ++i) fn();  // warm-up (first listing, buffers)
    const double t0 = ProcessCpuMicros();
    for (int i = 0; i < rounds; ++i) fn();
    return (ProcessCpuMicros() - t0) / rounds;
  };

  // The headline round, as in Agent::RunStream: SampleOnce into a batch kept
  // across rounds, then the samples lent to a fresh Report and taken back.
  std::unique_ptr<Sampler> sampler = *Sampler::Create(&all, Clock::Real());
  SampleBatch batch;
  size_t samples = 0;
  // The agent's own /metrics series are updated each round too, and the
  // Report is encoded for the stream.
  auto registry = std::make_shared<prometheus::Registry>();
  AgentMetrics metrics(registry, "bench-host");
  // The Report goes out as Agent::WriteBytes sends it: encoded by the
  // stream's ReportWireEncoder, then copied into the grpc::Slice of the
  // ByteBuffer handed to the stream's Write.
  ReportWireEncoder encoder;
  size_t wire_bytes = 0;
  auto send = [&](const v1::Report& report) {
    const absl::string_view bytes = encoder.Encode(report);
    grpc::Slice slice(bytes.data(), bytes.size());
    grpc::ByteBuffer buffer(&slice, 1);
    wire_bytes = buffer.Length();
  };
  auto round = [&] {
    v1::Report report;
    if (!sampler->SampleOnce(&batch).ok()) return;
    report.set_start_unix_nanos(absl::ToUnixNanos(batch.start));
    report.set_end_unix_nanos(absl::ToUnixNanos(batch.end));
    report.mutable_counters()->Swap(&batch.samples);
    samples = static_cast<size_t>(report.counters_size());
    metrics.ObserveReport(report);
    send(report);
    batch.samples.Swap(report.mutable_counters());
  };
  if (profile_rounds > 0) {
    // Only rounds, for a profiler (perf record): no node_exporter, no pieces.
    for (int i = 0; i < profile_rounds; ++i) round();
    std::error_code ec;
    fs::remove_all(tmpl, ec);
    return samples == 0 ? 1 : 0;
  }
  // ---- node_exporter ----
  const int port = FreeLoopbackPort();
  const std::string listen = absl::StrCat("--web.listen-address=127.0.0.1:", port);
  const std::string path_sysfs = "--path.sysfs=" + sys.string();
  const pid_t pid = fork();
  if (pid == 0) {
    freopen("/dev/null", "w", stdout);
    freopen("/dev/null", "w", stderr);
    execl(exporter.c_str(), exporter.c_str(), path_sysfs.c_str(), "--collector.disable-defaults",
          "--collector.infiniband", "--web.disable-exporter-metrics", listen.c_str(),
          static_cast<char*>(nullptr));
    _exit(127);
  }
  std::string body;
  for (int i = 0; i < 200 && body.empty(); ++i) {
    absl::SleepFor(absl::Milliseconds(50));
    body = Scrape(port);
  }
  int ib_series = 0;
  for (absl::string_view line : absl::StrSplit(body, '\n')) {
    if (absl::StartsWith(line, "node_infiniband_")) ++ib_series;
  }
  if (body.empty() || ib_series == 0) {
    std::fprintf(stderr, "node_exporter did not serve infiniband metrics (%d series)\n", ib_series);
    kill(pid, SIGTERM);
    waitpid(pid, nullptr, 0);
    return 1;
  }
  // Agent rounds and node_exporter scrapes alternate in chunks, so that a
  // noisy moment on the machine weighs on both sides alike.
  for (int i = 0; i < 20; ++i) round();
  for (int i = 0; i < 5; ++i) Scrape(port);
  constexpr int kChunks = 10;
  double agent_cpu = 0, agent_wall = 0, ne_cpu = 0;
  int scraped = 0;
  for (int c = 0; c < kChunks; ++c) {
    const double a0 = ProcessCpuMicros();
    const absl::Time w0 = absl::Now();
    for (int i = c * rounds / kChunks; i < (c + 1) * rounds / kChunks; ++i) round();
    agent_cpu += ProcessCpuMicros() - a0;
    agent_wall += absl::ToDoubleMicroseconds(absl::Now() - w0);
    const double c0 = 1e6 * bench::ProcessCpuSeconds(pid);
    for (int i = c * scrapes / kChunks; i < (c + 1) * scrapes / kChunks; ++i) {
      if (Scrape(port).empty()) {
        std::fprintf(stderr, "scrape %d failed\n", i);
        kill(pid, SIGTERM);
        waitpid(pid, nullptr, 0);
        return 1;
      }
      ++scraped;
    }
    ne_cpu += 1e6 * bench::ProcessCpuSeconds(pid) - c0;
  }
  const double agent_us = agent_cpu / rounds;
  const double agent_wall_us = agent_wall / rounds;
  const double ne_us = ne_cpu / scraped;
  const double rss_mb = static_cast<double>(bench::ProcessRssKb(getpid())) / 1024.0;

  // Discovery runs once per connection (BuildHello), not per round.
  size_t discovered = 0;
  const double discovery_us = cpu_per([&] {
    absl::StatusOr<std::vector<v1::NicDevice>> d = discovery.Discover();
    discovered = d.ok() ? d->size() : 0;
  });
  // The pieces of a round, each into a buffer kept across rounds as the
  // sampler's are.
  CounterBuffer scratch;
  size_t counters = 0;
  const double collect_us = cpu_per([&] {
    scratch.Clear();
    (void)all.CollectInto(&scratch);
    counters = scratch.size();
  });
  const double rdma_us = cpu_per([&] {
    scratch.Clear();
    (void)rdma_source->CollectInto(&scratch);
  });
  const double ethtool_us = cpu_per([&] {
    scratch.Clear();
    (void)ethtool_source->CollectInto(&scratch);
  });
  // The /metrics update and the encoding of a full Report, on their own.
  v1::Report full;
  (void)sampler->SampleOnce(&batch);
  full.mutable_counters()->CopyFrom(batch.samples);
  const double metrics_us = cpu_per([&] { metrics.ObserveReport(full); });
  const double serialize_us = cpu_per([&] { send(full); });
  // Equal work: node_exporter 1.5's infiniband collector reads ports/<p>/counters/
  // and a few attributes but no hw_counters/; the agent restricted to the same
  // files (discovery + counters/ only).
  SysfsCounterOptions pma_only;
  pma_only.hw_counters = false;
  SysfsCounterSource same_files(sys.string(), pma_only);
  const double same_files_us = cpu_per([&] {
    (void)discovery.Discover();
    scratch.Clear();
    (void)same_files.CollectInto(&scratch);
  });
  if (devices != kPorts || discovered != kPorts || counters == 0 || samples != counters) {
    std::fprintf(stderr,
                 "agent saw %zu devices, %zu counters and %zu samples; expected %d devices\n",
                 discovered, counters, samples, kPorts);
    return 1;
  }

  kill(pid, SIGTERM);
  int status = 0;
  waitpid(pid, &status, 0);
  std::error_code ec;
  fs::remove_all(tmpl, ec);

  auto ratio = [&](double agent) { return ne_us > 0 && agent > 0 ? ne_us / agent : 0.0; };
  const double per_counter_us = agent_us / static_cast<double>(counters);
  const double per_series_us = ib_series > 0 ? ne_us / ib_series : 0.0;
  std::printf(
      "BENCH agent_collect_bench agent_cpu_us_per_round=%.1f node_exporter_cpu_us_per_scrape=%.1f "
      "ratio=%.1f agent_rss_mb=%.1f agent_cpu_us_per_round_with_discovery=%.1f "
      "ratio_with_discovery=%.1f agent_cpu_us_per_counter=%.2f "
      "node_exporter_cpu_us_per_series=%.2f ratio_per_counter=%.1f agent_same_files_cpu_us=%.1f "
      "ratio_same_files=%.1f agent_wall_us_per_round=%.1f ports=%d counters=%zu "
      "node_exporter_ib_series=%d rounds=%d scrapes=%d discovery_cpu_us=%.1f "
      "collect_cpu_us=%.1f rdma_counters_cpu_us=%.1f ethtool_cpu_us=%.1f "
      "sampler_metrics_report_cpu_us=%.1f metrics_update_cpu_us=%.1f serialize_cpu_us=%.1f "
      "report_bytes=%zu\n",
      agent_us, ne_us, ratio(agent_us), rss_mb, agent_us + discovery_us,
      ratio(agent_us + discovery_us), per_counter_us, per_series_us,
      ne_us > 0 ? per_series_us / per_counter_us : 0.0, same_files_us, ratio(same_files_us),
      agent_wall_us, kPorts, counters, ib_series, rounds, scrapes, discovery_us, collect_us,
      rdma_us, ethtool_us, agent_us - collect_us, metrics_us, serialize_us, wire_bytes);
  return ne_us > 0 ? 0 : 1;
}

}  // namespace
}  // namespace rocetune

int main(int argc, char** argv) { return rocetune::Main(argc, argv); }
