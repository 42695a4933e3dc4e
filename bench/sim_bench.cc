// sim_bench: how fast the fabric simulator runs the issue-5 performance case,
// one simulated second of a 32-host 100 Gb/s fabric under incast plus
// WebSearch background load (sim/scenarios/incast_background_32_hosts), on
// one core. The target is at most 10 s on one core. The simulator is single
// threaded, so its CPU seconds are the wall time it takes on a dedicated core;
// on a shared machine wall_seconds also counts time spent waiting for a core.
// budget_ratio = cpu_seconds / 10 (<= 1 meets the target), wall_budget_ratio =
// wall_seconds / 10.
#include <chrono>
#include <cstdio>
#include <ctime>
#include <string>

#include "sim/fabric.h"
#include "sim/scenario_loader.h"

int main(int argc, char** argv) {
  std::string path =
      std::string(ROCETUNE_SOURCE_DIR) + "/sim/scenarios/incast_background_32_hosts.textproto";
  if (argc > 1) path = argv[1];
  absl::StatusOr<rocetune::v1::Scenario> scenario =
      rocetune::sim::LoadScenario(path, {"duration_ms=1000"});
  if (!scenario.ok()) {
    std::fprintf(stderr, "sim_bench: %s\n", std::string(scenario.status().message()).c_str());
    return 1;
  }
  auto fabric = rocetune::sim::Fabric::Create(*scenario);
  if (!fabric.ok()) {
    std::fprintf(stderr, "sim_bench: %s\n", std::string(fabric.status().message()).c_str());
    return 1;
  }
  const std::clock_t cpu0 = std::clock();
  const auto t0 = std::chrono::steady_clock::now();
  (*fabric)->RunToEnd();
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double cpu = static_cast<double>(std::clock() - cpu0) / CLOCKS_PER_SEC;
  const rocetune::sim::SimSummary s = (*fabric)->Summary(wall);
  const double budget = 10.0;
  std::printf(
      "BENCH sim_bench sim_seconds_per_wall_second=%.4f events_per_second=%.0f wall_seconds=%.3f "
      "cpu_seconds=%.3f sim_seconds=%.3f sim_seconds_per_cpu_second=%.4f "
      "events_per_cpu_second=%.0f budget_seconds=%.1f budget_ratio=%.3f wall_budget_ratio=%.3f "
      "meets_target=%d flows=%llu probes=%llu\n",
      s.sim_seconds / wall, static_cast<double>(s.events) / wall, wall, cpu, s.sim_seconds,
      s.sim_seconds / cpu, static_cast<double>(s.events) / cpu, budget, cpu / budget, wall / budget,
      cpu <= budget ? 1 : 0, static_cast<unsigned long long>(s.flows_started),
      static_cast<unsigned long long>(s.probe_rtt_us.count));
  return 0;
}
