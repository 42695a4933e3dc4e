// sim_bench: how fast the fabric simulator runs, on one core.
//  - sim_bench: one simulated second of the 32-host 100 Gb/s fabric under
//    incast plus WebSearch background load
//    (sim/scenarios/incast_background_32_hosts); target at most 5 CPU s.
//  - sim_bench_320: 50 simulated ms of the 320-host spine-leaf fabric
//    (sim/scenarios/spine_leaf_320_hosts); target: CPU s per host-second
//    within 1.5x of the 32-host case (host_cost_ratio <= 1.5).
// The simulator is single threaded, so its CPU seconds are the wall time it
// takes on a dedicated core; on a shared machine wall_seconds also counts time
// spent waiting for a core. With a scenario path as the argument, only that
// scenario runs (one simulated second unless it sets less).
#include <chrono>
#include <cstdio>
#include <ctime>
#include <string>
#include <vector>

#include "sim/fabric.h"
#include "sim/scenario_loader.h"

namespace {

struct Run {
  double cpu = 0, wall = 0, sim = 0;
  int hosts = 0;
  rocetune::sim::SimSummary summary;
};

bool RunOne(const std::string& path, const std::vector<std::string>& overrides, Run* out) {
  absl::StatusOr<rocetune::v1::Scenario> scenario = rocetune::sim::LoadScenario(path, overrides);
  if (!scenario.ok()) {
    std::fprintf(stderr, "sim_bench: %s\n", std::string(scenario.status().message()).c_str());
    return false;
  }
  auto fabric = rocetune::sim::Fabric::Create(*scenario);
  if (!fabric.ok()) {
    std::fprintf(stderr, "sim_bench: %s\n", std::string(fabric.status().message()).c_str());
    return false;
  }
  const std::clock_t cpu0 = std::clock();
  const auto t0 = std::chrono::steady_clock::now();
  (*fabric)->RunToEnd();
  out->wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  out->cpu = static_cast<double>(std::clock() - cpu0) / CLOCKS_PER_SEC;
  out->summary = (*fabric)->Summary(out->wall);
  out->sim = out->summary.sim_seconds;
  out->hosts = (*fabric)->host_count();
  return true;
}

void Print(const char* name, const Run& r, double budget_cpu_per_sim_s) {
  const double cpu_per_sim = r.cpu / r.sim;
  std::printf(
      "BENCH %s hosts=%d sim_seconds=%.3f cpu_seconds=%.3f wall_seconds=%.3f "
      "cpu_s_per_sim_s=%.3f cpu_s_per_host_s=%.5f events_per_cpu_second=%.0f "
      "budget_cpu_s_per_sim_s=%.1f budget_ratio=%.3f flows=%llu probes=%llu\n",
      name, r.hosts, r.sim, r.cpu, r.wall, cpu_per_sim, cpu_per_sim / r.hosts,
      static_cast<double>(r.summary.events) / r.cpu, budget_cpu_per_sim_s,
      cpu_per_sim / budget_cpu_per_sim_s, static_cast<unsigned long long>(r.summary.flows_started),
      static_cast<unsigned long long>(r.summary.probe_rtt_us.count));
}

}  // namespace

int main(int argc, char** argv) {
  const std::string dir = std::string(ROCETUNE_SOURCE_DIR) + "/sim/scenarios/";
  if (argc > 1) {
    Run r;
    if (!RunOne(argv[1], {}, &r)) return 1;
    Print("sim_bench", r, 5.0);
    return 0;
  }
  Run small, large;
  if (!RunOne(dir + "incast_background_32_hosts.textproto", {"duration_ms=1000"}, &small)) {
    return 1;
  }
  Print("sim_bench", small, 5.0);
  if (!RunOne(dir + "spine_leaf_320_hosts.textproto", {"duration_ms=50", "warmup_ms=5"}, &large)) {
    return 1;
  }
  // The 320-host budget scales the 32-host cost per host-second by 1.5.
  const double small_per_host = small.cpu / small.sim / small.hosts;
  Print("sim_bench_320", large, 1.5 * small_per_host * large.hosts);
  const double large_per_host = large.cpu / large.sim / large.hosts;
  std::printf("BENCH sim_bench_scaling host_cost_ratio=%.3f meets_target=%d\n",
              large_per_host / small_per_host, large_per_host <= 1.5 * small_per_host ? 1 : 0);
  return 0;
}
