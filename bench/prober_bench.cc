// Prober CPU cost on the UDP path over loopback, against a baseline measured in
// the same run: a bare UDP ping-pong loop (echo thread + paced sender, no
// bookkeeping) at the same probe rate. Both runs include the responder side in
// this process. Also: QuantileSketch memory per peer class after realistic inserts.
//
// BENCH prober_bench probes_per_second=... cpu_s_per_s_per_1k_pps=... baseline_...=... ratio=...
// BENCH prober_bench sketch_bytes_per_peer_class=... sketch_wire_bytes=... samples=...
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "agent/probe/udp_prober.h"
#include "agent/probe/udp_responder.h"
#include "daemon/logging.h"
#include "model/quantile_sketch.h"

namespace rocetune {
namespace {

constexpr int kPeers = 10;
constexpr double kTotalRate = 1000;  // probes per second over all peers
constexpr absl::Duration kRun = absl::Seconds(3);

double ProcessCpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

struct Cost {
  double cpu_per_s_per_1k = 0;  // CPU-seconds per second per 1,000 probes/s
  uint64_t answered = 0;
};

// Echo thread + a sender pacing kTotalRate packets/s and reading each echo.
Cost Baseline() {
  int srv = socket(AF_INET, SOCK_DGRAM, 0);
  int cli = socket(AF_INET, SOCK_DGRAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(srv, reinterpret_cast<sockaddr*>(&a), sizeof(a));
  socklen_t len = sizeof(a);
  getsockname(srv, reinterpret_cast<sockaddr*>(&a), &len);
  std::atomic<bool> stop{false};
  std::thread echo([&] {
    char buf[2048];
    while (!stop) {
      pollfd p{srv, POLLIN, 0};
      if (poll(&p, 1, 50) <= 0) continue;
      sockaddr_in from{};
      socklen_t fl = sizeof(from);
      ssize_t n = recvfrom(srv, buf, sizeof(buf), 0, reinterpret_cast<sockaddr*>(&from), &fl);
      if (n > 0)
        sendto(srv, buf, static_cast<size_t>(n), 0, reinterpret_cast<sockaddr*>(&from), fl);
    }
  });
  const double cpu0 = ProcessCpuSeconds();
  const absl::Time t0 = absl::Now();
  const absl::Duration gap = absl::Seconds(1.0 / kTotalRate);
  absl::Time next = t0;
  uint64_t answered = 0;
  char buf[64] = {};
  while (absl::Now() - t0 < kRun) {
    sendto(cli, buf, sizeof(buf), 0, reinterpret_cast<sockaddr*>(&a), sizeof(a));
    next += gap;
    for (;;) {
      const absl::Duration wait = next - absl::Now();
      if (wait <= absl::ZeroDuration()) break;
      pollfd p{cli, POLLIN, 0};
      timespec ts = absl::ToTimespec(wait);
      if (ppoll(&p, 1, &ts, nullptr) > 0 && recv(cli, buf, sizeof(buf), 0) > 0) ++answered;
    }
  }
  const double wall = absl::ToDoubleSeconds(absl::Now() - t0);
  const double cpu = ProcessCpuSeconds() - cpu0;
  stop = true;
  echo.join();
  close(srv);
  close(cli);
  return {cpu / wall / (kTotalRate / 1000), answered};
}

Cost ProberRun() {
  UdpResponder::Options ro;
  auto responder = UdpResponder::Start(ro);
  UdpProber::Options po;
  po.bind_v4 = "127.0.0.1:0";
  po.bind_v6 = "[::1]:0";
  auto prober = UdpProber::Create(po);
  if (!responder.ok() || !prober.ok()) {
    std::fprintf(stderr, "prober_bench: setup failed\n");
    return {};
  }
  v1::ProbePlan plan;
  plan.set_probes_per_second(kTotalRate / kPeers);
  plan.set_payload_bytes(64);
  plan.set_timeout_ms(500);
  for (int i = 0; i < kPeers; ++i) {
    v1::ProbePeer* p = plan.add_peers();
    p->set_peer_class(absl::StrCat("class", i));
    p->set_udp_address((*responder)->address());
  }
  const double cpu0 = ProcessCpuSeconds();
  const absl::Time t0 = absl::Now();
  (void)(*prober)->SetPlan(plan);
  // The agent takes a window per report interval; do the same.
  while (absl::Now() - t0 < kRun) {
    absl::SleepFor(absl::Milliseconds(500));
    (void)(*prober)->TakeWindow();
  }
  const double wall = absl::ToDoubleSeconds(absl::Now() - t0);
  const double cpu = ProcessCpuSeconds() - cpu0;
  (void)(*prober)->SetPlan(v1::ProbePlan());
  (*prober)->Stop();
  (*responder)->Stop();
  return {cpu / wall / (kTotalRate / 1000), (*responder)->stats().answered};
}

}  // namespace
}  // namespace rocetune

int main() {
  rocetune::SetLogLevel("warning").IgnoreError();
  const rocetune::Cost base = rocetune::Baseline();
  const rocetune::Cost prober = rocetune::ProberRun();
  std::printf(
      "BENCH prober_bench probes_per_second=%.0f peers=%d cpu_s_per_s_per_1k_pps=%.4f "
      "baseline_cpu_s_per_s_per_1k_pps=%.4f ratio=%.2f answered=%llu baseline_answered=%llu\n",
      rocetune::kTotalRate, rocetune::kPeers, prober.cpu_per_s_per_1k, base.cpu_per_s_per_1k,
      base.cpu_per_s_per_1k > 0 ? prober.cpu_per_s_per_1k / base.cpu_per_s_per_1k : 0.0,
      static_cast<unsigned long long>(prober.answered),
      static_cast<unsigned long long>(base.answered));

  // One window of one peer class: 1,000 probes/s for 10 s, RTTs lognormal around
  // 20 us with a congested tail.
  std::mt19937_64 rng(1);
  std::lognormal_distribution<double> rtt(std::log(20e-6), 0.8);
  std::lognormal_distribution<double> tail(std::log(2e-3), 1.0);
  std::uniform_real_distribution<double> u(0, 1);
  rocetune::QuantileSketch sketch;
  constexpr int kSamples = 10000;
  for (int i = 0; i < kSamples; ++i) sketch.Insert(u(rng) < 0.01 ? tail(rng) : rtt(rng));
  const size_t wire = sketch.ToProto().ByteSizeLong();
  // Baseline: the raw samples an exact p99 would need.
  const size_t raw = kSamples * sizeof(double);
  std::printf(
      "BENCH prober_bench sketch_bytes_per_peer_class=%zu sketch_wire_bytes=%zu samples=%d "
      "raw_sample_bytes=%zu ratio=%.3f\n",
      sketch.MemoryBytes(), wire, kSamples, raw,
      static_cast<double>(sketch.MemoryBytes()) / static_cast<double>(raw));
  return 0;
}
