// CPU cost of one agent sampling round against Prometheus node_exporter's
// infiniband collector scraping the same host in the same run (only that
// collector, exporter self-metrics off).
//
// Two modes:
//  - Fixture (default): a generated 8-port mlx5 sysfs tree; node_exporter reads
//    it through --path.sysfs. The agent reads it through the sysfs counter
//    source, and each port's ethtool statistics through the ethtool source
//    with its ioctl answered from a saved `ethtool -S` dump of an mlx5 port
//    with PFC on (--ethtool_fixture; every netdev of the tree gets that set).
//    The fixture ioctl costs no kernel work: the ethtool figure is the agent's
//    user-space part (name mapping, buffers) of a real ioctl round.
//  - Real kernel (--sysfs=/sys, run by bench/vm_collect_bench.sh inside a
//    Soft-RoCE guest): the agent reads the kernel's sysfs and, when the kernel
//    has RDMA netlink, a second agent reads it through RDMA netlink statistics
//    (both with the real ethtool ioctl on each port's netdev); each
//    --node_exporter_sysfs=LABEL:PATH starts one node_exporter on PATH.
//    Ratios are given for every (agent path, node_exporter) pair.
//
// A round is what SamplingLoop::Round does each sampling interval for counters:
// Sampler::SampleOnce (CollectInto over the CounterSourceGroup of the RDMA
// source and ethtool for each port's netdev, then the delta step) and moving
// the samples into a v1::Report (the swap into the report's counters and back
// after the write, as agent.cc does), updating the agent's /metrics counters
// from the Report (AgentMetrics::ObserveReport) and encoding the Report for the
// stream as Agent::WriteBytes does (ReportWireEncoder into a kept buffer,
// copied into the grpc::Slice of the ByteBuffer the stream writes; the stream's
// own Write, framing and socket send are not part of the figure). NIC discovery
// is not part of a round: the agent runs it only when it connects (Hello); it
// is reported on its own (discovery_cpu_us) and, for comparison with the old
// figure, added to a round (agent_cpu_us_per_round_with_discovery).
//
// Agent CPU: CLOCK_PROCESS_CPUTIME_ID around the rounds. node_exporter CPU:
// utime+stime from /proc/<pid>/stat around the scrapes. Rounds and scrapes
// alternate in ten chunks so that a slow spell of the machine (this is a VM;
// the kernel's pread path alone varies by 40% between minutes) weighs on all
// sides. Also reported: the pieces of a round (collect over the group, RDMA
// source alone, ethtool alone, sampler delta + metrics + report step = round -
// collect: a difference of two separately timed figures, so on a busy machine
// it is noisy and can even come out negative), CPU per counter / per series
// (the agent reads every hw_counters and counters file, node_exporter a
// subset), and, in fixture mode, the agent restricted to node_exporter's files
// (discovery + counters/ only).
//
// Usage: agent_collect_bench [--rounds=N] [--scrapes=N] [--node_exporter=PATH]
//          [--ethtool_fixture=FILE]
//        agent_collect_bench --sysfs=/sys --name=NAME
//          [--node_exporter_sysfs=LABEL:PATH]... (real kernel; default LABEL sys, PATH /sys)
//        agent_collect_bench --profile_rounds=N  (only N rounds, for perf record)
//        --metrics_out=FILE: also writes the text of the agent's /metrics (its
//          counters) after the run, for counting series by name
#include <arpa/inet.h>
#include <linux/ethtool.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
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
#include "bench/eight_nic_host.h"
#include "bench/proc_stats.h"
#include "daemon/clock.h"
#include "daemon/logging.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/slice.h"
#include "prometheus/registry.h"
#include "prometheus/text_serializer.h"
#include "rocetune/v1/agent.pb.h"

#ifndef ROCETUNE_SOURCE_DIR
#define ROCETUNE_SOURCE_DIR "."
#endif

namespace rocetune {
namespace {

namespace fs = std::filesystem;

double ProcessCpuMicros() {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e6 + static_cast<double>(ts.tv_nsec) / 1e3;
}

// A TCP port on 127.0.0.1 that was free a moment ago; -1 if none.
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

using bench::FixtureEthtool;

// One agent counter path: an RDMA source plus ethtool (may be null: RDMA
// only) in a group, its sampler, /metrics and stream encoder, as
// SamplingLoop::Round holds them.
class AgentPath {
 public:
  AgentPath(std::string label, std::unique_ptr<CounterSource> rdma,
            std::unique_ptr<CounterSource> ethtool)
      : label_(std::move(label)),
        rdma_(rdma.get()),
        ethtool_(ethtool.get()),
        registry_(std::make_shared<prometheus::Registry>()),
        metrics_(registry_, "bench-host") {
    std::vector<std::unique_ptr<CounterSource>> members;
    members.push_back(std::move(rdma));
    if (ethtool != nullptr) members.push_back(std::move(ethtool));
    group_ = std::make_unique<CounterSourceGroup>("bench", std::move(members));
    sampler_ = *Sampler::Create(group_.get(), Clock::Real());
  }

  const std::string& label() const { return label_; }
  CounterSource* group() { return group_.get(); }
  CounterSource* rdma() { return rdma_; }
  CounterSource* ethtool() { return ethtool_; }
  Sampler* sampler() { return sampler_.get(); }
  SampleBatch* batch() { return &batch_; }
  AgentMetrics* metrics() { return &metrics_; }
  size_t samples() const { return samples_; }
  size_t wire_bytes() const { return wire_bytes_; }
  // What a scrape of this agent's /metrics returns for its counters.
  std::string Exposition() const {
    return prometheus::TextSerializer().Serialize(registry_->Collect());
  }
  // The samples one scrape of this agent's /metrics returns (lines of the
  // text exposition that are not comments): every series, a histogram's
  // buckets, _sum and _count each counted.
  size_t ScrapeSamples() const {
    const std::string text = Exposition();
    size_t n = 0;
    for (absl::string_view line : absl::StrSplit(text, '\n')) {
      n += !line.empty() && line[0] != '#' ? 1 : 0;
    }
    return n;
  }

  // The headline round, as in SamplingLoop::Round: SampleOnce into a batch kept
  // across rounds, then the samples lent to a fresh Report and taken back.
  void Round() {
    v1::Report report;
    if (!sampler_->SampleOnce(&batch_).ok()) return;
    report.set_start_unix_nanos(absl::ToUnixNanos(batch_.start));
    report.set_end_unix_nanos(absl::ToUnixNanos(batch_.end));
    report.mutable_counters()->Swap(&batch_.samples);
    samples_ = static_cast<size_t>(report.counters_size());
    metrics_.ObserveReport(report);
    Send(report);
    batch_.samples.Swap(report.mutable_counters());
  }

  // The Report goes out as Agent::WriteBytes sends it: encoded by the stream's
  // ReportWireEncoder, then copied into the grpc::Slice of the ByteBuffer
  // handed to the stream's Write.
  void Send(const v1::Report& report) {
    const absl::string_view bytes = encoder_.Encode(report);
    grpc::Slice slice(bytes.data(), bytes.size());
    grpc::ByteBuffer buffer(&slice, 1);
    wire_bytes_ = buffer.Length();
  }

  double cpu_us = 0;
  double wall_us = 0;
  double user_us = 0;            // getrusage split of cpu_us: user space
  double sys_us = 0;             // and kernel
  std::vector<double> chunk_us;  // CPU per round in each chunk

 private:
  std::string label_;
  CounterSource* rdma_;
  CounterSource* ethtool_;
  std::unique_ptr<CounterSourceGroup> group_;
  std::unique_ptr<Sampler> sampler_;
  SampleBatch batch_;
  std::shared_ptr<prometheus::Registry> registry_;
  AgentMetrics metrics_;
  ReportWireEncoder encoder_;
  size_t samples_ = 0;
  size_t wire_bytes_ = 0;
};

// One node_exporter process serving only the infiniband collector over `sysfs`.
struct Exporter {
  std::string label;
  std::string sysfs;
  pid_t pid = -1;
  int port = -1;
  int series = 0;  // node_infiniband_* series in a scrape
  double cpu_us = 0;
  int scraped = 0;
  std::vector<double> chunk_us;  // CPU per scrape in each chunk

  // Starts it and waits for its first scrape; false (with the reason on
  // stderr) when it does not serve.
  bool Start(const std::string& binary) {
    port = FreeLoopbackPort();
    const std::string listen = absl::StrCat("--web.listen-address=127.0.0.1:", port);
    const std::string path_sysfs = "--path.sysfs=" + sysfs;
    pid = fork();
    if (pid == 0) {
      if (freopen("/dev/null", "w", stdout) == nullptr ||
          freopen("/dev/null", "w", stderr) == nullptr) {
        _exit(126);
      }
      execl(binary.c_str(), binary.c_str(), path_sysfs.c_str(), "--collector.disable-defaults",
            "--collector.infiniband", "--web.disable-exporter-metrics", listen.c_str(),
            static_cast<char*>(nullptr));
      _exit(127);
    }
    std::string body;
    for (int i = 0; i < 400 && body.empty(); ++i) {
      absl::SleepFor(absl::Milliseconds(50));
      body = Scrape(port);
    }
    if (body.empty()) {
      std::fprintf(stderr, "node_exporter %s (%s on %s) did not serve /metrics\n", label.c_str(),
                   binary.c_str(), sysfs.c_str());
      return false;
    }
    for (absl::string_view line : absl::StrSplit(body, '\n')) {
      if (absl::StartsWith(line, "node_infiniband_")) ++series;
    }
    return true;
  }

  void Stop() {
    if (pid <= 0) return;
    kill(pid, SIGTERM);
    waitpid(pid, nullptr, 0);
    pid = -1;
  }
};

struct UserSys {
  double user_us = 0;
  double sys_us = 0;
};

// This process's user and system CPU so far (getrusage).
UserSys SelfUserSys() {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  auto us = [](const struct timeval& tv) {
    return static_cast<double>(tv.tv_sec) * 1e6 + static_cast<double>(tv.tv_usec);
  };
  return {us(ru.ru_utime), us(ru.ru_stime)};
}

// The median over the chunks of node_exporter's CPU per scrape over the
// agent's CPU per round in the same chunk: a burst of load on the machine
// moves one chunk, not the median.
double MedianChunkRatio(const std::vector<double>& agent, const std::vector<double>& ne) {
  std::vector<double> r;
  for (size_t i = 0; i < agent.size() && i < ne.size(); ++i) {
    if (agent[i] > 0 && ne[i] > 0) r.push_back(ne[i] / agent[i]);
  }
  if (r.empty()) return 0;
  std::sort(r.begin(), r.end());
  return r.size() % 2 == 1 ? r[r.size() / 2] : (r[r.size() / 2 - 1] + r[r.size() / 2]) / 2;
}

std::string KernelRelease() {
  struct utsname u;
  return uname(&u) == 0 ? std::string(u.release) : "unknown";
}

int Main(int argc, char** argv) {
  int rounds = 1000;
  int scrapes = 300;
  int profile_rounds = 0;
  std::string metrics_out;  // where to write the first path's /metrics text
  std::string exporter_binary = "/usr/bin/prometheus-node-exporter";
  std::string real_sysfs;  // empty: generate the fixture tree
  std::string bench_name = "agent_collect_bench";
  std::string ethtool_fixture =
      std::string(ROCETUNE_SOURCE_DIR) + "/tests/fixtures/ethtool/mlx5_pfc_enabled.txt";
  std::vector<Exporter> exporters;
  for (int i = 1; i < argc; ++i) {
    absl::string_view a = argv[i];
    if (absl::ConsumePrefix(&a, "--rounds=")) {
      if (!absl::SimpleAtoi(a, &rounds) || rounds < 10) {
        std::fprintf(stderr, "--rounds wants a whole number >= 10, got \"%s\"\n", argv[i]);
        return 2;
      }
    } else if (absl::ConsumePrefix(&a, "--scrapes=")) {
      if (!absl::SimpleAtoi(a, &scrapes) || scrapes < 10) {
        std::fprintf(stderr, "--scrapes wants a whole number >= 10, got \"%s\"\n", argv[i]);
        return 2;
      }
    } else if (absl::ConsumePrefix(&a, "--profile_rounds=")) {
      if (!absl::SimpleAtoi(a, &profile_rounds) || profile_rounds < 1) {
        std::fprintf(stderr, "--profile_rounds wants a whole number >= 1, got \"%s\"\n", argv[i]);
        return 2;
      }
    } else if (absl::ConsumePrefix(&a, "--metrics_out=")) {
      metrics_out = std::string(a);
    } else if (absl::ConsumePrefix(&a, "--node_exporter=")) {
      exporter_binary = std::string(a);
    } else if (absl::ConsumePrefix(&a, "--sysfs=")) {
      real_sysfs = std::string(a);
    } else if (absl::ConsumePrefix(&a, "--name=")) {
      bench_name = std::string(a);
    } else if (absl::ConsumePrefix(&a, "--ethtool_fixture=")) {
      ethtool_fixture = std::string(a);
    } else if (absl::ConsumePrefix(&a, "--node_exporter_sysfs=")) {
      const size_t colon = a.find(':');
      if (colon == absl::string_view::npos || colon == 0 || colon + 1 == a.size()) {
        std::fprintf(stderr, "--node_exporter_sysfs wants LABEL:PATH, got \"%s\"\n", argv[i]);
        return 2;
      }
      Exporter e;
      e.label = std::string(a.substr(0, colon));
      e.sysfs = std::string(a.substr(colon + 1));
      exporters.push_back(std::move(e));
    } else {
      std::fprintf(stderr,
                   "usage: %s [--rounds=N] [--scrapes=N] [--node_exporter=PATH] "
                   "[--ethtool_fixture=FILE] [--sysfs=ROOT --name=NAME "
                   "[--node_exporter_sysfs=LABEL:PATH]...] [--profile_rounds=N] "
                   "[--metrics_out=FILE]\n",
                   argv[0]);
      return 2;
    }
  }
  SetLogLevel("error").IgnoreError();
  const bool fixture = real_sysfs.empty();

  char tmpl[] = "/tmp/agent_collect_bench_XXXXXX";
  std::string sys = real_sysfs;
  constexpr int kPorts = 8;
  if (fixture) {
    if (mkdtemp(tmpl) == nullptr) return 1;
    sys = (fs::path(tmpl) / "sys").string();
    bench::WriteMlx5Tree(sys, kPorts);
    if (!exporters.empty()) {
      std::fprintf(stderr, "--node_exporter_sysfs needs --sysfs\n");
      return 2;
    }
  }
  if (exporters.empty()) {
    Exporter e;
    e.label = fixture ? "tree" : "sys";
    e.sysfs = sys;
    exporters.push_back(std::move(e));
  }
  auto cleanup = [&] {
    for (Exporter& e : exporters) e.Stop();
    if (fixture) {
      std::error_code ec;
      fs::remove_all(tmpl, ec);
    }
  };

  // ---- agent ----
  SysfsNicDiscovery discovery(sys);
  absl::StatusOr<std::vector<v1::NicDevice>> discovered_inventory = discovery.Discover();
  if (!discovered_inventory.ok() || discovered_inventory->empty()) {
    std::fprintf(stderr, "no RDMA device under %s: %s\n", sys.c_str(),
                 discovered_inventory.status().ToString().c_str());
    cleanup();
    return 1;
  }
  const std::vector<v1::NicDevice> inventory = *std::move(discovered_inventory);
  const std::vector<EthtoolTarget> targets = EthtoolTargetsFromInventory(inventory);
  // Fixture mode: the tree's netdevs do not exist on this host, so ethtool is
  // answered from the saved dump instead of failing with ENODEV.
  std::unique_ptr<FixtureEthtool> fixture_ethtool;
  auto make_ethtool = [&]() -> std::unique_ptr<CounterSource> {
    if (fixture_ethtool == nullptr) return std::make_unique<EthtoolCounterSource>(targets);
    const FixtureEthtool* f = fixture_ethtool.get();
    return std::make_unique<EthtoolCounterSource>(
        targets, [f](const std::string& ifname, void* cmd) { return f->Ioctl(ifname, cmd); });
  };
  if (fixture) {
    std::set<std::string> ifnames;
    for (const EthtoolTarget& t : targets) ifnames.insert(t.ifname);
    absl::StatusOr<FixtureEthtool> f = FixtureEthtool::Load(ethtool_fixture, ifnames);
    if (!f.ok()) {
      std::fprintf(stderr, "%s\n", f.status().ToString().c_str());
      cleanup();
      return 1;
    }
    fixture_ethtool = std::make_unique<FixtureEthtool>(*std::move(f));
  }

  std::vector<std::unique_ptr<AgentPath>> paths;
  paths.push_back(std::make_unique<AgentPath>(
      "sysfs", MakeCounterSource(sys, CounterSourcePreference::kSysfs), make_ethtool()));
  // RDMA netlink reads the running kernel, so it only means something on the
  // real tree.
  std::string netlink_status = "not_tried_on_fixture";
  if (!fixture) {
    std::unique_ptr<CounterSource> nl = MakeCounterSource(sys, CounterSourcePreference::kNetlink);
    if (nl->name() == "netlink") {
      paths.push_back(std::make_unique<AgentPath>("netlink", std::move(nl), make_ethtool()));
      netlink_status = "ok";
    } else {
      netlink_status = "unavailable";
    }
  }
  if (fixture) {
    // The figure before ethtool had a fixture (every ioctl failed with ENODEV):
    // the same round without the ethtool member.
    paths.push_back(std::make_unique<AgentPath>(
        "no_ethtool", MakeCounterSource(sys, CounterSourcePreference::kSysfs), nullptr));
  }
  discovery.set_counter_source(paths[0]->rdma()->name());

  auto cpu_per = [&](auto&& fn) {
    for (int i = 0; i < 20; ++i) fn();  // warm-up (first listing, buffers)
    const double t0 = ProcessCpuMicros();
    for (int i = 0; i < rounds; ++i) fn();
    return (ProcessCpuMicros() - t0) / rounds;
  };

  if (profile_rounds > 0) {
    // Only rounds, for a profiler (perf record): no node_exporter, no pieces.
    for (int i = 0; i < profile_rounds; ++i) paths[0]->Round();
    const bool ok = paths[0]->samples() > 0;
    cleanup();
    return ok ? 0 : 1;
  }

  // ---- node_exporter ----
  for (Exporter& e : exporters) {
    if (!e.Start(exporter_binary)) {
      cleanup();
      return 1;
    }
  }
  if (fixture && exporters[0].series == 0) {
    std::fprintf(stderr, "node_exporter served no infiniband series on the fixture tree\n");
    cleanup();
    return 1;
  }
  // Agent rounds and node_exporter scrapes alternate in chunks, so that a
  // noisy moment on the machine weighs on every side alike.
  for (auto& p : paths) {
    for (int i = 0; i < 20; ++i) p->Round();
  }
  for (Exporter& e : exporters) {
    for (int i = 0; i < 5; ++i) Scrape(e.port);
  }
  constexpr int kChunks = 10;
  for (int c = 0; c < kChunks; ++c) {
    // The paths take turns going first, so neither always follows the scrapes.
    for (size_t k = 0; k < paths.size(); ++k) {
      AgentPath* p = paths[(k + static_cast<size_t>(c)) % paths.size()].get();
      const double a0 = ProcessCpuMicros();
      const absl::Time w0 = absl::Now();
      const UserSys r0 = SelfUserSys();
      const int n = (c + 1) * rounds / kChunks - c * rounds / kChunks;
      for (int i = 0; i < n; ++i) p->Round();
      const double used = ProcessCpuMicros() - a0;
      const UserSys r1 = SelfUserSys();
      p->cpu_us += used;
      p->chunk_us.push_back(used / n);
      p->user_us += r1.user_us - r0.user_us;
      p->sys_us += r1.sys_us - r0.sys_us;
      p->wall_us += absl::ToDoubleMicroseconds(absl::Now() - w0);
    }
    for (Exporter& e : exporters) {
      const double c0 = 1e6 * bench::ProcessCpuSeconds(e.pid);
      const int scraped_before = e.scraped;
      for (int i = c * scrapes / kChunks; i < (c + 1) * scrapes / kChunks; ++i) {
        if (Scrape(e.port).empty()) {
          std::fprintf(stderr, "scrape %d of node_exporter %s failed\n", i, e.label.c_str());
          cleanup();
          return 1;
        }
        ++e.scraped;
      }
      const double used = 1e6 * bench::ProcessCpuSeconds(e.pid) - c0;
      e.cpu_us += used;
      e.chunk_us.push_back(used / std::max(1, e.scraped - scraped_before));
    }
  }
  for (Exporter& e : exporters) e.Stop();
  const double rss_mb = static_cast<double>(bench::ProcessRssKb(getpid())) / 1024.0;

  // Discovery runs once per connection (BuildHello), not per round.
  size_t discovered = 0;
  const double discovery_us = cpu_per([&] {
    absl::StatusOr<std::vector<v1::NicDevice>> d = discovery.Discover();
    discovered = d.ok() ? d->size() : 0;
  });

  std::ostringstream line;
  char buf[128];
  auto put = [&](const std::string& key, double v, int decimals = 1) {
    std::snprintf(buf, sizeof(buf), " %s=%.*f", key.c_str(), decimals, v);
    line << buf;
  };
  auto ratio = [](double ne, double agent) { return ne > 0 && agent > 0 ? ne / agent : 0.0; };
  const Exporter& ne0 = exporters[0];
  const double ne_us = ne0.scraped > 0 ? ne0.cpu_us / ne0.scraped : 0.0;
  bool ok = ne_us > 0;
  line << "BENCH " << bench_name;
  // Per path: the pieces of a round, each into a buffer kept across rounds as
  // the sampler's are.
  for (size_t pi = 0; pi < paths.size(); ++pi) {
    AgentPath& p = *paths[pi];
    CounterBuffer scratch;
    size_t counters = 0, ethtool_counters = 0;
    // The round again with no node_exporter running (idle exporters still
    // take the CPU now and then, which the headline charges to the rounds).
    const double quiet_us = cpu_per([&] { p.Round(); });
    const double collect_us = cpu_per([&] {
      scratch.Clear();
      (void)p.group()->CollectInto(&scratch);
      counters = scratch.size();
    });
    const double rdma_us = cpu_per([&] {
      scratch.Clear();
      (void)p.rdma()->CollectInto(&scratch);
    });
    const double ethtool_us = p.ethtool() == nullptr ? 0.0 : cpu_per([&] {
      scratch.Clear();
      (void)p.ethtool()->CollectInto(&scratch);
      ethtool_counters = scratch.size();
    });
    // The /metrics update and the encoding of a full Report, on their own.
    v1::Report full;
    (void)p.sampler()->SampleOnce(p.batch());
    full.mutable_counters()->CopyFrom(p.batch()->samples);
    const double metrics_us = cpu_per([&] { p.metrics()->ObserveReport(full); });
    const double serialize_us = cpu_per([&] { p.Send(full); });
    const double agent_us = p.cpu_us / rounds;
    if (counters == 0 || p.samples() != counters ||
        (p.ethtool() != nullptr && ethtool_counters == 0)) {
      std::fprintf(stderr, "agent %s path saw %zu counters (%zu from ethtool) and %zu samples\n",
                   p.label().c_str(), counters, ethtool_counters, p.samples());
      ok = false;
    }
    // Fixture mode keeps the historical key names for its headline path.
    const bool plain = fixture && pi == 0;
    const std::string pre = plain ? "agent_" : "agent_" + p.label() + "_";
    const std::string rsuf = plain ? "" : "_" + p.label();
    const std::string ppre = plain ? "" : p.label() + "_";
    put(pre + "cpu_us_per_round", agent_us);
    for (const Exporter& e : exporters) {
      const double e_us = e.scraped > 0 ? e.cpu_us / e.scraped : 0.0;
      put(&e == &ne0 ? "ratio" + rsuf : "ratio" + rsuf + "_vs_" + e.label, ratio(e_us, agent_us));
    }
    put("ratio" + rsuf + "_median_chunk", MedianChunkRatio(p.chunk_us, ne0.chunk_us));
    line << " " << ppre << "counters=" << counters;
    if (p.ethtool() == nullptr) continue;  // the short form for the RDMA-only path
    put(pre + "cpu_us_per_round_with_discovery", agent_us + discovery_us);
    put("ratio" + rsuf + "_with_discovery", ratio(ne_us, agent_us + discovery_us));
    put(pre + "cpu_us_per_counter", agent_us / static_cast<double>(std::max<size_t>(counters, 1)),
        2);
    put(pre + "wall_us_per_round", p.wall_us / rounds);
    put(pre + "quiet_cpu_us_per_round", quiet_us);
    put(pre + "user_us_per_round", p.user_us / rounds);
    put(pre + "sys_us_per_round", p.sys_us / rounds);
    line << " " << ppre << "ethtool_counters=" << ethtool_counters;
    put(ppre + "collect_cpu_us", collect_us);
    put(ppre + (plain ? "rdma_counters_cpu_us" : "rdma_cpu_us"), rdma_us);
    put(ppre + "ethtool_cpu_us", ethtool_us);
    put(ppre + "sampler_metrics_report_cpu_us", agent_us - collect_us);
    put(ppre + "metrics_update_cpu_us", metrics_us);
    put(ppre + "serialize_cpu_us", serialize_us);
    line << " " << ppre << "report_bytes=" << p.wire_bytes();
    line << " " << ppre << "metrics_samples_per_scrape=" << p.ScrapeSamples();
    if (plain && !metrics_out.empty()) std::ofstream(metrics_out) << p.Exposition();
    if (plain) {
      const double per_series_us = ne0.series > 0 ? ne_us / ne0.series : 0.0;
      put("node_exporter_cpu_us_per_series", per_series_us, 2);
      put("ratio_per_counter",
          ne_us > 0
              ? per_series_us / (agent_us / static_cast<double>(std::max<size_t>(counters, 1)))
              : 0.0);
      // Equal work: node_exporter 1.5's infiniband collector reads
      // ports/<p>/counters/ and a few attributes but no hw_counters/; the
      // agent restricted to the same files (discovery + counters/ only).
      SysfsCounterOptions pma_only;
      pma_only.hw_counters = false;
      SysfsCounterSource same_files(sys, pma_only);
      const double same_files_us = cpu_per([&] {
        (void)discovery.Discover();
        scratch.Clear();
        (void)same_files.CollectInto(&scratch);
      });
      put("agent_same_files_cpu_us", same_files_us);
      put("ratio_same_files", ratio(ne_us, same_files_us));
    }
  }
  if (paths.size() == 2 && paths[1]->label() == "netlink") {
    // The two paths should name the same RDMA counters (netlink may add the
    // optional ones sysfs does not show); the names only one path has.
    auto keys = [](CounterSource* src) {
      CounterBuffer b;
      (void)src->CollectInto(&b);
      std::set<std::string> k;
      for (const CounterValue& v : b) {
        k.insert(absl::StrCat(v.key.device, "/", v.key.port, "/", v.key.priority, "/", v.key.name));
      }
      return k;
    };
    const std::set<std::string> sysfs_keys = keys(paths[0]->rdma());
    const std::set<std::string> netlink_keys = keys(paths[1]->rdma());
    int only_sysfs = 0, only_netlink = 0;
    for (const std::string& k : sysfs_keys) {
      if (netlink_keys.count(k) == 0) {
        ++only_sysfs;
        std::fprintf(stderr, "only sysfs has %s\n", k.c_str());
      }
    }
    for (const std::string& k : netlink_keys) {
      if (sysfs_keys.count(k) == 0) {
        ++only_netlink;
        std::fprintf(stderr, "only netlink has %s\n", k.c_str());
      }
    }
    line << " keys_only_sysfs=" << only_sysfs << " keys_only_netlink=" << only_netlink;
  }
  for (const Exporter& e : exporters) {
    const std::string pre =
        (fixture || &e == &ne0) ? "node_exporter_" : "node_exporter_" + e.label + "_";
    put(pre + "cpu_us_per_scrape", e.scraped > 0 ? e.cpu_us / e.scraped : 0.0);
    line << " " << pre << (fixture ? "ib_series=" : "series=") << e.series;
    if (!fixture && &e == &ne0) line << " node_exporter_tree=" << e.label;
  }
  put("agent_rss_mb", rss_mb);
  line << " ports=" << (fixture ? kPorts : static_cast<int>(discovered)) << " rounds=" << rounds
       << " scrapes=" << scrapes;
  put("discovery_cpu_us", discovery_us);
  line << " ethtool_source=" << (fixture ? "fixture" : "ioctl");
  if (!fixture) line << " netlink=" << netlink_status << " kernel=" << KernelRelease();
  if (fixture && discovered != kPorts) {
    std::fprintf(stderr, "agent discovered %zu devices; expected %d\n", discovered, kPorts);
    ok = false;
  }
  cleanup();
  std::printf("%s\n", line.str().c_str());
  return ok ? 0 : 1;
}

}  // namespace
}  // namespace rocetune

int main(int argc, char** argv) { return rocetune::Main(argc, argv); }
