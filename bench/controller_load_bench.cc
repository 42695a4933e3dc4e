// controller_load_bench: agent-stream load against rocetune-controller and,
// in the same run, against bench/grpc_sink (a bare callback-API AgentService
// that only counts), at several stream counts.
//
// Method. The orchestrator (this program) starts the server process, then a
// load generator process (this program with --generator; --generators=K splits
// the streams over K processes) that opens N Connect streams on loopback, one
// TCP connection per stream like real agents. Reports are serialized once and
// only their seq and timestamps are spliced in per send, so the generator's own
// cost per Report stays small. Two generators (--generator_impl):
//  * raw (default; bench/h2_agent_load): HTTP/2 and gRPC's message framing
//    written by the generator itself over nonblocking sockets in one epoll loop,
//    one send() per Report: the same bytes on the wire as a gRPC client, at a
//    fraction of its CPU (on 2 cores the generator's CPU is the server's loss);
//  * grpc: gRPC's callback client API with the generic stub, one channel per
//    stream (--streams_per_connection to multiplex); the cross-check.
// Every stream sends a Hello, then Reports with 64 counters and one latency
// sketch whose end_unix_nanos is the send time.
//  * flood phase: a closed loop per stream. raw: the next Report as soon as the
//    server has read the previous one (credited it back with a stream
//    WINDOW_UPDATE; --flood_inflight Reports may be uncredited); grpc: one write
//    outstanding, the next as soon as the previous write completes (is in the
//    kernel). The sustained rate is the server's own reports-received counter
//    (from /metrics) over the phase.
//  * paced phase: the generator offers a fixed total rate R (--paced_rate,
//    default 20,000/s, the target; 0 = 70% of the controller's flood rate) spread over the
//    streams, after the flood backlog has drained; both servers record, per Report, ingestion time
//    minus its send timestamp in a Prometheus histogram with identical buckets; p99 is interpolated
//    from the bucket deltas over the phase. Both processes share the clock (same host), so this is
//    the one-way delay from the generator's send call to the server having processed the Report.
//  * RSS: the server's VmRSS before the generator starts and, with every stream
//    open, after a first phase in which each host reports about once a second
//    (capped at 5,000/s) and the load has drained; per stream = difference / N
//    (extra_kb_per_stream: controller minus sink). The same at the end of the
//    paced phase (after the flood; glibc keeps the flood's transport buffers)
//    is extra_kb_per_stream_loaded; the RSS right after the flood is printed too.
//  * CPU: utime+stime of the server and of the generators over the flood and
//    the paced phase, per Report received (ctl_/sink_/gen_[paced_]cpu_us_per_report):
//    the efficiency figure that a busy machine disturbs least.
// gRPC generator streams post no read (--generator_reads to post one, as a
// real agent does; the raw generator reads and answers everything): the server
// cannot tell, and with 10k reads outstanding the generator's gRPC spends a
// large share of its CPU in completion-queue tag checks. Both servers run with the same transport
// settings (no keepalive pings, no BDP probes).
// --controller_args passes flags to the controller (e.g. --stream_threads=N);
// --with_sink=false measures the controller alone.
// The Report (--report): host8 (default), the one an agent on an 8-port mlx5
// host sends each second (bench/eight_nic_host: every counter the agent's
// sysfs and ethtool sources read, 1,768, with typical deltas; probe RTT
// and host-delay sketches for two peer classes; the job signal of one sharded
// data-parallel job), its probe and job sketches drawn per stream; or small,
// the 64-counter, one-window Report of the figures before it (kept to compare).
// Prints: BENCH controller_load_bench streams=N ... with ratios to the sink.
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "bench/eight_nic_host.h"
#include "bench/h2_agent_load.h"
#include "bench/proc_stats.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "google/protobuf/wire_format_lite.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"
#include "model/quantile_sketch.h"
#include "rocetune/v1/agent.grpc.pb.h"

ABSL_FLAG(bool, quick, false, "Smoke mode: 1k streams, short phases.");
ABSL_FLAG(std::string, streams, "1000,5000,10000", "Stream counts to measure.");
ABSL_FLAG(double, seconds, 6, "Length of each measured phase.");
ABSL_FLAG(double, paced_rate, 20000,
          "Offered load of the paced phase (reports/s), the same for controller and sink; "
          "0 = 70% of the controller's flood rate.");
ABSL_FLAG(std::string, controller_bin, "", "rocetune-controller (default: next to this build).");
ABSL_FLAG(std::string, controller_args, "",
          "Extra flags for the controller, space-separated (e.g. --stream_threads=4).");
ABSL_FLAG(bool, with_sink, true, "Also run the sink (false: the controller alone).");
ABSL_FLAG(std::string, sink_bin, "", "grpc_sink (default: next to this program).");
// Internal: generator mode.
ABSL_FLAG(bool, generator, false, "Run as the load generator (internal).");
ABSL_FLAG(int, port, 0, "Generator: server port (internal).");
ABSL_FLAG(int, n, 0, "Generator: number of streams (internal).");
ABSL_FLAG(int, first, 0, "Generator: index of its first stream (internal).");
ABSL_FLAG(int, generators, 1,
          "Generator processes sharing the streams. More than one did not help on 2 cores "
          "(10k streams: 15.3k reports/s with 1, 14.3k with 2, 10.5k with 4).");
ABSL_FLAG(bool, generator_reads, false,
          "Keep a read posted on every generator stream, as a real agent does. Off by "
          "default: the server cannot tell, its few pushes fit in the HTTP/2 window, and "
          "with reads posted the generator's own gRPC spends a large share of its CPU "
          "scanning its completion queue (tag checks of Debian's build), CPU the server "
          "under test then lacks.");
ABSL_FLAG(std::string, generator_impl, "raw",
          "Load generator: raw (bench/h2_agent_load: HTTP/2 and gRPC framing written over "
          "nonblocking sockets, one epoll loop; a few µs of CPU per Report) or grpc (gRPC's "
          "callback client API, 45-75 µs per Report; kept as a cross-check).");
ABSL_FLAG(int, flood_inflight, 2,
          "Raw generator, flood phase: Reports per stream sent but not yet credited back by "
          "the server's stream WINDOW_UPDATE (1: strict ping-pong, every server read wakes "
          "for one Report).");
ABSL_FLAG(bool, h2_trace, false,
          "Raw generator: log every frame its first connection receives to stderr (debugging).");
ABSL_FLAG(std::string, report, "host8",
          "The Report each stream sends: host8 (an 8-port mlx5 host's, as its agent sends it: "
          "1,768 counters, probe sketches of two peer classes, a job's signal) or small (64 "
          "counters and one probe window, the figures before host8).");
ABSL_FLAG(std::string, ethtool_fixture,
          std::string(ROCETUNE_SOURCE_DIR) + "/tests/fixtures/ethtool/mlx5_pfc_enabled.txt",
          "--report=host8: the saved `ethtool -S` dump every port of the host answers with.");
ABSL_FLAG(int, streams_per_connection, 1,
          "Agent streams sharing one TCP connection (HTTP/2 multiplexing). 1 = one connection "
          "per stream, as real agents connect.");

namespace {

using rocetune::v1::AgentMessage;
using rocetune::v1::ControllerMessage;
using Clock = std::chrono::steady_clock;

void RaiseFdLimit() {
  rlimit rl;
  rl.rlim_cur = rl.rlim_max = 200000;
  if (setrlimit(RLIMIT_NOFILE, &rl) != 0) {
    getrlimit(RLIMIT_NOFILE, &rl);
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
  }
}

int64_t NowNanos() { return absl::ToUnixNanos(absl::Now()); }

// ---- generator ----------------------------------------------------------------

enum Mode { kIdle = 0, kFlood = 1, kPaced = 2 };
std::atomic<int> g_mode{kIdle};
std::atomic<int> g_connected{0};
std::atomic<int> g_failed{0};
std::atomic<uint64_t> g_sent{0};

AgentMessage SmallReportTemplate(int i) {
  AgentMessage m;
  rocetune::v1::Report* r = m.mutable_report();
  for (int c = 0; c < 64; ++c) {
    rocetune::v1::CounterSample* s = r->add_counters();
    s->set_device("mlx5_0");
    s->set_port(1);
    s->set_priority(c < 16 ? c % 8 : -1);
    if (c == 0) {
      s->set_name("cnp_sent");
    } else if (c == 1) {
      s->set_name("rx_pfc_pause_frames");
    } else {
      s->set_name(absl::StrCat("counter_", c));
    }
    s->set_delta(1000 + c + i);
    s->set_rate_per_second(1000.0 + c);
  }
  rocetune::v1::LatencyWindow* w = r->add_latency();
  w->set_peer_class("intra_tor");
  rocetune::QuantileSketch sketch;
  std::mt19937 rng(i);
  std::uniform_real_distribution<double> u(std::log(5e-6), std::log(200e-6));
  for (int k = 0; k < 200; ++k) sketch.Insert(std::exp(u(rng)));
  sketch.ToProto(w->mutable_network_rtt_seconds());
  w->set_probes_sent(200);
  w->set_clock("monotonic");
  return m;
}

// The 8-port host's Report and devices, built once per process (exits with
// the reason when it cannot be).
const rocetune::bench::HostReport& EightNicHost() {
  static const rocetune::bench::HostReport* host = [] {
    absl::StatusOr<rocetune::bench::HostReport> h = rocetune::bench::EightNicHostReport(
        absl::GetFlag(FLAGS_ethtool_fixture), rocetune::bench::HostReportShape(), 0);
    if (!h.ok()) {
      std::fprintf(stderr, "cannot build the 8-port host's Report: %s\n",
                   h.status().ToString().c_str());
      std::exit(1);
    }
    return new rocetune::bench::HostReport(*std::move(h));
  }();
  return *host;
}

bool HostReports() { return absl::GetFlag(FLAGS_report) == "host8"; }

// Stream i's Report: the host's counters (deltas a little apart per stream)
// with probe and job sketches of its own.
AgentMessage MakeReportTemplate(int i) {
  if (!HostReports()) return SmallReportTemplate(i);
  AgentMessage m;
  *m.mutable_report() = EightNicHost().report;
  for (rocetune::v1::CounterSample& c : *m.mutable_report()->mutable_counters()) {
    if (c.delta() == 0) continue;
    c.set_delta(c.delta() + static_cast<uint64_t>(i % 997));
    c.set_rate_per_second(static_cast<double>(c.delta()));
  }
  rocetune::bench::FillProbesAndJobs(rocetune::bench::HostReportShape(), static_cast<uint32_t>(i),
                                     m.mutable_report());
  return m;
}

// Stream i's Report minus seq and timestamps (set per send; protobuf messages
// concatenate), and its Hello, serialized: the same bytes for both generators.
std::string ReportBodyBytes(int i) { return MakeReportTemplate(i).report().SerializeAsString(); }

std::string HelloBytes(int i) {
  AgentMessage hello;
  hello.mutable_hello()->set_host_id(absl::StrCat("bench-", i));
  hello.mutable_hello()->set_hostname(absl::StrCat("bench-", i, ".example"));
  (*hello.mutable_hello()->mutable_labels())["rack"] = absl::StrCat("r", i % 16);
  if (HostReports()) {
    for (const rocetune::v1::NicDevice& d : EightNicHost().devices) {
      *hello.mutable_hello()->add_devices() = d;
    }
  }
  return hello.SerializeAsString();
}

// One agent stream, speaking AgentService.Connect through the generic stub
// with pre-serialized bytes: the generator's per-Report work is encoding seq and
// two timestamps and a copy, so the server under test, not the generator, sets
// the pace.
class GenStream final : public grpc::ClientBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  GenStream(std::shared_ptr<grpc::Channel> channel, int i)
      : stub_(std::move(channel)), report_body_(ReportBodyBytes(i)) {
    const std::string bytes = HelloBytes(i);
    grpc::Slice slice(bytes);
    hello_ = grpc::ByteBuffer(&slice, 1);
  }
  void Begin() {
    busy_.store(true);
    stub_.PrepareBidiStreamingCall(&ctx_, "/rocetune.v1.AgentService/Connect", grpc::StubOptions(),
                                   this);
    if (absl::GetFlag(FLAGS_generator_reads)) StartRead(&in_);
    StartWrite(&hello_);
    StartCall();
  }
  // Sends a Report unless one is in flight. Returns whether it sent.
  bool TrySend() {
    if (busy_.exchange(true)) return false;
    SendNext();
    return true;
  }
  void OnWriteDone(bool ok) override {
    if (!ok) {
      if (!hello_done_) g_failed.fetch_add(1);
      return;  // stays busy: never used again
    }
    if (!hello_done_) {
      hello_done_ = true;
      g_connected.fetch_add(1);
    }
    if (g_mode.load(std::memory_order_relaxed) == kFlood) {
      SendNext();
    } else {
      busy_.store(false);
    }
  }
  void OnReadDone(bool ok) override {
    if (ok) StartRead(&in_);
  }
  void OnDone(const grpc::Status&) override {}

 private:
  void SendNext() {
    const int64_t now = NowNanos();
    rocetune::v1::Report head;  // serialized in front of the body: messages concatenate
    head.set_seq(++seq_);
    head.set_start_unix_nanos(now - 1'000'000'000);
    head.set_end_unix_nanos(now);
    const std::string head_bytes = head.SerializeAsString();
    std::string msg;
    msg.reserve(head_bytes.size() + report_body_.size() + 8);
    {
      using google::protobuf::internal::WireFormatLite;
      google::protobuf::io::StringOutputStream zero_copy(&msg);
      google::protobuf::io::CodedOutputStream out(&zero_copy);
      out.WriteTag(WireFormatLite::MakeTag(AgentMessage::kReportFieldNumber,
                                           WireFormatLite::WIRETYPE_LENGTH_DELIMITED));
      out.WriteVarint32(static_cast<uint32_t>(head_bytes.size() + report_body_.size()));
      out.WriteString(head_bytes);
      out.WriteString(report_body_);
    }
    grpc::Slice slice(std::move(msg));
    out_ = grpc::ByteBuffer(&slice, 1);
    g_sent.fetch_add(1, std::memory_order_relaxed);
    StartWrite(&out_);
  }

  grpc::GenericStub stub_;
  grpc::ClientContext ctx_;
  std::string report_body_;
  grpc::ByteBuffer hello_;
  grpc::ByteBuffer out_;
  grpc::ByteBuffer in_;
  std::atomic<bool> busy_{false};
  bool hello_done_ = false;
  uint64_t seq_ = 0;
};

// The raw generator (bench/h2_agent_load): one epoll loop, stdin as its
// command input, the same Hello and Report bytes.
int RunRawGenerator(int port, int n) {
  if (absl::GetFlag(FLAGS_streams_per_connection) != 1) {
    std::fprintf(stderr, "--generator_impl=raw opens one stream per connection\n");
    return 1;
  }
  rocetune::bench::H2AgentLoadOptions options;
  options.port = port;
  options.streams = n;
  options.first = absl::GetFlag(FLAGS_first);
  options.hello = HelloBytes;
  options.report_body = ReportBodyBytes;
  options.flood_inflight = absl::GetFlag(FLAGS_flood_inflight);
  options.trace = absl::GetFlag(FLAGS_h2_trace);
  absl::StatusOr<rocetune::bench::H2AgentLoadStats> stats =
      rocetune::bench::RunH2AgentLoad(options, STDIN_FILENO, stdout);
  std::fflush(stdout);
  if (!stats.ok()) {
    std::fprintf(stderr, "generator: %s\n", std::string(stats.status().message()).c_str());
    _exit(1);
  }
  _exit(0);  // closing 10k sockets one by one is not part of the measurement
}

int RunGenerator(int port, int n) {
  RaiseFdLimit();
  if (absl::GetFlag(FLAGS_generator_impl) == "raw") return RunRawGenerator(port, n);
  if (absl::GetFlag(FLAGS_generator_impl) != "grpc") {
    std::fprintf(stderr, "--generator_impl: raw or grpc\n");
    return 1;
  }
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);  // as the servers do
  std::vector<std::unique_ptr<GenStream>> streams;
  streams.reserve(n);
  const int per_connection = std::max(1, absl::GetFlag(FLAGS_streams_per_connection));
  std::shared_ptr<grpc::Channel> channel;
  for (int i = 0; i < n; ++i) {
    if (i % per_connection == 0) {
      grpc::ChannelArguments args;
      args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);  // a connection of its own
      channel = grpc::CreateCustomChannel(absl::StrCat("127.0.0.1:", port),
                                          grpc::InsecureChannelCredentials(), args);
    }
    streams.push_back(std::make_unique<GenStream>(channel, absl::GetFlag(FLAGS_first) + i));
    streams.back()->Begin();
    if (i % 200 == 199) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  auto deadline = Clock::now() + std::chrono::seconds(180);
  while (g_connected.load() + g_failed.load() < n && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  std::printf("CONNECTED %d %d\n", g_connected.load(), g_failed.load());
  std::fflush(stdout);

  std::atomic<double> rate{0};
  std::atomic<bool> quit{false};
  std::thread pacer([&] {
    size_t rr = 0;
    double owed = 0;
    auto last = Clock::now();
    while (!quit.load()) {
      std::this_thread::sleep_for(std::chrono::microseconds(500));
      auto now = Clock::now();
      double dt = std::chrono::duration<double>(now - last).count();
      last = now;
      if (g_mode.load() != kPaced) {
        owed = 0;
        continue;
      }
      owed += rate.load() * dt;
      // Sends due now; a stream with a write in flight is skipped (the offered
      // load then falls short, visible in the achieved rate).
      size_t tries = 0;
      while (owed >= 1 && tries < streams.size()) {
        GenStream* s = streams[rr++ % streams.size()].get();
        ++tries;
        if (s->TrySend()) owed -= 1;
      }
      if (owed > 1000) owed = 1000;
    }
  });

  std::string line;
  while (std::getline(std::cin, line)) {
    std::vector<std::string> parts = absl::StrSplit(line, ' ');
    if (parts[0] == "flood") {
      g_mode.store(kFlood);
      for (auto& s : streams) s->TrySend();
    } else if (parts[0] == "pace" && parts.size() == 2) {
      double r = 0;
      if (absl::SimpleAtod(parts[1], &r)) rate.store(r);
      g_mode.store(kPaced);
    } else if (parts[0] == "idle") {
      g_mode.store(kIdle);
    } else if (parts[0] == "sent") {
      std::printf("SENT %llu\n", static_cast<unsigned long long>(g_sent.load()));
      std::fflush(stdout);
    } else if (parts[0] == "quit") {
      break;
    }
  }
  quit.store(true);
  pacer.join();
  std::fflush(stdout);
  _exit(0);  // tearing down 10k streams one by one is not part of the measurement
}

// ---- orchestrator ----------------------------------------------------------------

struct Child {
  pid_t pid = -1;
  FILE* to = nullptr;    // child's stdin
  FILE* from = nullptr;  // child's stdout
};

Child Spawn(const std::vector<std::string>& argv, bool pipes) {
  int in[2] = {-1, -1}, out[2] = {-1, -1};
  if (pipes && (pipe(in) != 0 || pipe(out) != 0)) {
    std::perror("pipe");
    std::exit(1);
  }
  pid_t pid = fork();
  if (pid == 0) {
    if (pipes) {
      dup2(in[0], 0);
      dup2(out[1], 1);
      close(in[1]);
      close(out[0]);
    }
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    std::perror("execv");
    _exit(127);
  }
  Child c;
  c.pid = pid;
  if (pipes) {
    close(in[0]);
    close(out[1]);
    c.to = fdopen(in[1], "w");
    c.from = fdopen(out[0], "r");
  }
  return c;
}

void Stop(pid_t pid, int sig = SIGTERM) {
  kill(pid, sig);
  for (int i = 0; i < 200; ++i) {
    int status;
    if (waitpid(pid, &status, WNOHANG) == pid) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
}

std::string HttpGet(int port, const std::string& path) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string body;
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) {
    std::string req = absl::StrCat("GET ", path, " HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n");
    if (write(fd, req.data(), req.size()) == static_cast<ssize_t>(req.size())) {
      char buf[65536];
      ssize_t n;
      while ((n = read(fd, buf, sizeof buf)) > 0) body.append(buf, n);
    }
  }
  close(fd);
  return body;
}

struct Scrape {
  double t = 0;  // seconds (steady clock)
  double received = 0;
  double hosts_connected = -1;       // controller only
  std::map<double, double> buckets;  // upper bound -> cumulative count
};

Scrape ScrapeMetrics(int port) {
  Scrape s;
  s.t = std::chrono::duration<double>(Clock::now().time_since_epoch()).count();
  std::istringstream in(HttpGet(port, "/metrics"));
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    size_t sp = line.rfind(' ');
    if (sp == std::string::npos) continue;
    double v = 0;
    if (!absl::SimpleAtod(line.substr(sp + 1), &v)) continue;
    std::string key = line.substr(0, sp);
    if (key.ends_with("reports_received_total")) s.received = v;
    if (key == "rocetune_controller_hosts{state=\"connected\"}") s.hosts_connected = v;
    static const std::string kBucket = "report_delay_seconds_bucket{le=\"";
    size_t le = key.find(kBucket);
    if (le != std::string::npos) {
      std::string bound = key.substr(le + kBucket.size());
      bound = bound.substr(0, bound.find('"'));
      double b = bound == "+Inf" ? INFINITY : std::strtod(bound.c_str(), nullptr);
      s.buckets[b] = v;
    }
  }
  return s;
}

// Quantile q of the observations between two scrapes, interpolated in a bucket.
double Quantile(const Scrape& a, const Scrape& b, double q) {
  double total = b.buckets.empty() ? 0 : b.buckets.rbegin()->second - a.buckets.rbegin()->second;
  if (total <= 0) return NAN;
  double target = q * total, prev_bound = 0, prev_cum = 0;
  for (const auto& [bound, cum_b] : b.buckets) {
    auto it = a.buckets.find(bound);
    double cum = cum_b - (it == a.buckets.end() ? 0 : it->second);
    if (cum >= target) {
      if (std::isinf(bound)) return prev_bound;  // beyond the last bound: a lower bound
      double frac = cum > prev_cum ? (target - prev_cum) / (cum - prev_cum) : 1;
      return prev_bound + frac * (bound - prev_bound);
    }
    prev_bound = bound;
    prev_cum = cum;
  }
  return NAN;
}

using rocetune::bench::ProcessCpuSeconds;
using rocetune::bench::ProcessRssKb;

bool ReadReady(const std::string& path, int* grpc_port, int* metrics_port) {
  for (int i = 0; i < 300; ++i) {
    std::ifstream in(path);
    std::string s((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (std::sscanf(s.c_str(), "{\"grpc_port\":%d,\"metrics_port\":%d}", grpc_port, metrics_port) ==
        2) {
      return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

struct RunResult {
  bool ok = false;
  int connected = 0;
  double flood_rate = 0;
  double flood_p99 = NAN;
  double paced_offered = 0;
  double paced_rate = 0;
  double paced_p50 = NAN;
  double paced_p99 = NAN;
  double server_cpu_us_per_report = 0;     // flood phase
  double generator_cpu_us_per_report = 0;  // flood phase, all generators
  double server_paced_cpu_us_per_report = 0;
  double generator_paced_cpu_us_per_report = 0;
  long rss_idle_kb = 0;
  long rss_flood_kb = 0;         // after the flood phase
  long rss_loaded_kb = 0;        // at the end of the paced phase (Reports in flight included)
  long rss_steady_kb = 0;        // after an agent-paced phase, drained, before the flood
  double rss_per_stream_kb = 0;  // steady - idle, per stream
  double rss_loaded_per_stream_kb = 0;  // loaded - idle, per stream
};

void SleepS(double s) { std::this_thread::sleep_for(std::chrono::duration<double>(s)); }

// `paced_rate` <= 0: choose 70% of this run's flood rate.
RunResult RunOne(const std::string& self, const std::vector<std::string>& server_argv,
                 const std::string& ready, int n, double seconds, double warmup,
                 double* paced_rate) {
  RunResult r;
  unlink(ready.c_str());
  Child server = Spawn(server_argv, false);
  int gport = 0, mport = 0;
  if (!ReadReady(ready, &gport, &mport)) {
    std::fprintf(stderr, "server did not become ready: %s\n", server_argv[0].c_str());
    Stop(server.pid, SIGKILL);
    return r;
  }
  SleepS(0.5);
  r.rss_idle_kb = ProcessRssKb(server.pid);
  // The generators: streams split evenly; commands go to all, answers are summed.
  const int k = std::max(1, std::min(absl::GetFlag(FLAGS_generators), n));
  std::vector<Child> gens;
  for (int g = 0; g < k; ++g) {
    const int first = n * g / k, count = n * (g + 1) / k - first;
    gens.push_back(Spawn(
        {self, "--generator", absl::StrCat("--port=", gport), absl::StrCat("--n=", count),
         absl::StrCat("--first=", first),
         absl::StrCat("--streams_per_connection=", absl::GetFlag(FLAGS_streams_per_connection)),
         "--generator_impl=" + absl::GetFlag(FLAGS_generator_impl),
         absl::StrCat("--flood_inflight=", absl::GetFlag(FLAGS_flood_inflight)),
         absl::StrCat("--h2_trace=", absl::GetFlag(FLAGS_h2_trace) ? "true" : "false"),
         absl::StrCat("--generator_reads=",
                      absl::GetFlag(FLAGS_generator_reads) ? "true" : "false"),
         "--report=" + absl::GetFlag(FLAGS_report),
         "--ethtool_fixture=" + absl::GetFlag(FLAGS_ethtool_fixture)},
        true));
  }
  auto tell = [&](const std::string& cmd) {
    for (Child& g : gens) {
      std::fprintf(g.to, "%s\n", cmd.c_str());
      std::fflush(g.to);
    }
  };
  char line[256] = {0};
  bool gens_ok = true;
  for (Child& g : gens) {
    int connected = 0, failed = 0;
    if (std::fgets(line, sizeof line, g.from) == nullptr ||
        std::sscanf(line, "CONNECTED %d %d", &connected, &failed) != 2) {
      gens_ok = false;
    }
    r.connected += connected;
  }
  if (!gens_ok) {
    std::fprintf(stderr, "generator failed to connect\n");
    for (Child& g : gens) Stop(g.pid, SIGKILL);
    Stop(server.pid);
    return r;
  }
  // The controller registers (and stores) every host before the measurement.
  for (int i = 0; i < 1200; ++i) {
    double h = ScrapeMetrics(mport).hosts_connected;
    if (h < 0 || h >= n) break;
    SleepS(0.1);
  }
  // Stop sending and let the server drain the backlog: done when it has
  // received every Report the generators sent.
  auto drain = [&] {
    tell("idle");
    double sent = 0;
    tell("sent");
    for (Child& g : gens) {
      double one = 0;
      if (std::fgets(line, sizeof line, g.from) != nullptr &&
          std::sscanf(line, "SENT %lf", &one) == 1) {
        sent += one;
      }
    }
    for (int i = 0; i < 600 && ScrapeMetrics(mport).received < sent; ++i) SleepS(0.1);
  };
  // Memory per host, measured first, at an agent-like pace: every host reports
  // about once a second (capped at 5,000 Reports/s) for a while, the load
  // drains, and the RSS above the idle server is divided by the streams. The
  // flood that follows leaves transport buffers behind (glibc keeps them), so
  // RSS after it says more about the flood than about hosts.
  tell(absl::StrFormat("pace %.1f", std::min(5000.0, static_cast<double>(n)) / k));
  SleepS(warmup + 3);
  drain();
  SleepS(1);
  r.rss_steady_kb = ProcessRssKb(server.pid);
  r.rss_per_stream_kb = n > 0 ? static_cast<double>(r.rss_steady_kb - r.rss_idle_kb) / n : 0;
  // One measured phase: `cmd` to the generators, a warm-up, then the
  // server's metrics at the start and at the end of `seconds`.
  double server_cpu = 0, gen_cpu = 0;  // over the last phase
  auto gens_cpu = [&] {
    double sum = 0;
    for (const Child& g : gens) sum += ProcessCpuSeconds(g.pid);
    return sum;
  };
  auto phase = [&](const std::string& cmd) {
    tell(cmd);
    SleepS(warmup);
    std::pair<Scrape, Scrape> ends;
    ends.first = ScrapeMetrics(mport);
    server_cpu = -ProcessCpuSeconds(server.pid);
    gen_cpu = -gens_cpu();
    SleepS(seconds);
    ends.second = ScrapeMetrics(mport);
    server_cpu += ProcessCpuSeconds(server.pid);
    gen_cpu += gens_cpu();
    return ends;
  };
  auto [f0, f1] = phase("flood");
  r.rss_flood_kb = ProcessRssKb(server.pid);
  r.flood_rate = (f1.received - f0.received) / (f1.t - f0.t);
  if (f1.received > f0.received) {
    r.server_cpu_us_per_report = 1e6 * server_cpu / (f1.received - f0.received);
    r.generator_cpu_us_per_report = 1e6 * gen_cpu / (f1.received - f0.received);
  }
  r.flood_p99 = Quantile(f0, f1, 0.99);
  if (*paced_rate <= 0) *paced_rate = 0.7 * r.flood_rate;
  r.paced_offered = *paced_rate;
  drain();  // the flood backlog, before pacing
  auto [p0, p1] = phase(absl::StrFormat("pace %.1f", *paced_rate / k));
  r.rss_loaded_kb = ProcessRssKb(server.pid);
  r.paced_rate = (p1.received - p0.received) / (p1.t - p0.t);
  if (p1.received > p0.received) {
    r.server_paced_cpu_us_per_report = 1e6 * server_cpu / (p1.received - p0.received);
    r.generator_paced_cpu_us_per_report = 1e6 * gen_cpu / (p1.received - p0.received);
  }
  r.paced_p50 = Quantile(p0, p1, 0.5);
  r.paced_p99 = Quantile(p0, p1, 0.99);
  r.rss_loaded_per_stream_kb = n > 0 ? static_cast<double>(r.rss_loaded_kb - r.rss_idle_kb) / n : 0;
  tell("quit");
  for (Child& g : gens) {
    Stop(g.pid, 0);  // wait for it to exit on its own first
    Stop(g.pid);
    fclose(g.to);
    fclose(g.from);
  }
  Stop(server.pid);
  r.ok = r.connected == n;
  return r;
}

std::string Dir(const std::string& path) { return path.substr(0, path.rfind('/')); }

int RunOrchestrator() {
  RaiseFdLimit();
  signal(SIGPIPE, SIG_IGN);
  char exe[4096];
  ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (len <= 0) return 1;
  exe[len] = 0;
  std::string self = exe;
  std::string sink = absl::GetFlag(FLAGS_sink_bin);
  if (sink.empty()) sink = Dir(self) + "/grpc_sink";
  std::string controller = absl::GetFlag(FLAGS_controller_bin);
  if (controller.empty()) controller = Dir(Dir(self)) + "/controller/rocetune-controller";
  for (const std::string& bin : {sink, controller}) {
    if (access(bin.c_str(), X_OK) != 0) {
      std::fprintf(stderr, "controller_load_bench: %s not found (build it first)\n", bin.c_str());
      return 1;
    }
  }
  const size_t report_bytes = ReportBodyBytes(0).size();
  const int report_counters = MakeReportTemplate(0).report().counters_size();
  bool quick = absl::GetFlag(FLAGS_quick);
  std::vector<int> counts;
  if (quick) {
    counts = {1000};
  } else {
    for (absl::string_view s : absl::StrSplit(absl::GetFlag(FLAGS_streams), ',')) {
      int n = 0;
      if (absl::SimpleAtoi(s, &n) && n > 0) counts.push_back(n);
    }
  }
  double seconds = quick ? 2 : absl::GetFlag(FLAGS_seconds);
  double warmup = quick ? 1 : 2;
  char tmpl[] = "/tmp/controller_load_bench_XXXXXX";
  std::string tmp = mkdtemp(tmpl);
  int rc = 0;
  for (int n : counts) {
    std::string state = absl::StrCat(tmp, "/state_", n);
    std::string ready = absl::StrCat(tmp, "/ready_", n);
    double paced = absl::GetFlag(FLAGS_paced_rate);
    std::vector<std::string> ctl_argv = {controller,
                                         "--insecure_loopback",
                                         "--listen=127.0.0.1:0",
                                         "--metrics_address=127.0.0.1:0",
                                         "--state_dir=" + state,
                                         "--ready_file=" + ready,
                                         "--log_level=warning"};
    for (absl::string_view a :
         absl::StrSplit(absl::GetFlag(FLAGS_controller_args), ' ', absl::SkipEmpty())) {
      ctl_argv.emplace_back(a);
    }
    RunResult ctl = RunOne(self, ctl_argv, ready, n, seconds, warmup, &paced);
    RunResult snk;
    if (absl::GetFlag(FLAGS_with_sink))
      snk = RunOne(
          self,
          {sink, "--listen=127.0.0.1:0", "--metrics_address=127.0.0.1:0", "--ready_file=" + ready},
          ready, n, seconds, warmup, &paced);
    if (!ctl.ok || (absl::GetFlag(FLAGS_with_sink) && !snk.ok)) rc = 1;
    std::printf(
        "BENCH controller_load_bench streams=%d report=%s report_bytes=%zu report_counters=%d "
        "connected=%d/%d ctl_reports_per_s=%.0f "
        "sink_reports_per_s=%.0f rate_vs_sink=%.2f ctl_flood_p99_ms=%.1f sink_flood_p99_ms=%.1f "
        "paced_offered_per_s=%.0f ctl_paced_per_s=%.0f sink_paced_per_s=%.0f "
        "ctl_p50_ms=%.2f ctl_p99_ms=%.2f sink_p99_ms=%.2f ctl_rss_mb=%.1f sink_rss_mb=%.1f "
        "ctl_cpu_us_per_report=%.1f sink_cpu_us_per_report=%.1f gen_cpu_us_per_report=%.1f "
        "ctl_paced_cpu_us_per_report=%.1f sink_paced_cpu_us_per_report=%.1f "
        "gen_paced_cpu_us_per_report=%.1f "
        "ctl_flood_rss_mb=%.1f "
        "sink_flood_rss_mb=%.1f "
        "ctl_kb_per_stream=%.1f sink_kb_per_stream=%.1f extra_kb_per_stream=%.1f "
        "extra_kb_per_stream_loaded=%.1f\n",
        n, absl::GetFlag(FLAGS_report).c_str(), report_bytes, report_counters, ctl.connected,
        snk.connected, ctl.flood_rate, snk.flood_rate,
        snk.flood_rate > 0 ? ctl.flood_rate / snk.flood_rate : 0, ctl.flood_p99 * 1e3,
        snk.flood_p99 * 1e3, paced, ctl.paced_rate, snk.paced_rate, ctl.paced_p50 * 1e3,
        ctl.paced_p99 * 1e3, snk.paced_p99 * 1e3, ctl.rss_loaded_kb / 1024.0,
        snk.rss_loaded_kb / 1024.0, ctl.server_cpu_us_per_report, snk.server_cpu_us_per_report,
        ctl.generator_cpu_us_per_report, ctl.server_paced_cpu_us_per_report,
        snk.server_paced_cpu_us_per_report, ctl.generator_paced_cpu_us_per_report,
        ctl.rss_flood_kb / 1024.0, snk.rss_flood_kb / 1024.0, ctl.rss_per_stream_kb,
        snk.rss_per_stream_kb, ctl.rss_per_stream_kb - snk.rss_per_stream_kb,
        ctl.rss_loaded_per_stream_kb - snk.rss_loaded_per_stream_kb);
    std::fflush(stdout);
  }
  std::string cleanup = "rm -rf " + tmp;
  if (std::system(cleanup.c_str()) != 0) std::fprintf(stderr, "cannot remove %s\n", tmp.c_str());
  return rc;
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  if (absl::GetFlag(FLAGS_report) != "host8" && absl::GetFlag(FLAGS_report) != "small") {
    std::fprintf(stderr, "controller_load_bench: --report wants host8 or small, not \"%s\"\n",
                 absl::GetFlag(FLAGS_report).c_str());
    return 2;
  }
  if (absl::GetFlag(FLAGS_generator)) {
    return RunGenerator(absl::GetFlag(FLAGS_port), absl::GetFlag(FLAGS_n));
  }
  return RunOrchestrator();
}
