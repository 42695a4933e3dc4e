// sim_sensitivity: how much each DCQCN, ECN and PFC knob the tuner may touch
// moves the shipped scenarios. Every knob is set to a low and a high value
// (one at a time, everything else at the scenario's setting) and each run is
// compared with the scenario as shipped: probe RTT p99, delivered throughput,
// and the scenario's step time (all-reduce step or incast burst, mean). Prints
// a markdown table on stdout (sim/README.md "Knob sensitivity" is this table)
// and one BENCH line. Runs are shortened to keep `make bench` quick; the
// simulator is deterministic, so the table is reproducible.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "sim/fabric.h"
#include "sim/scenario_loader.h"

namespace {

using rocetune::sim::SimSummary;

struct ScenarioRun {
  const char* name;
  const char* label;
  std::vector<std::string> shorten;
};

struct Knob {
  std::string name;                    // as shown
  std::vector<std::string> low, high;  // --set overrides; empty = not applicable
  std::string low_label, high_label;
};

struct Figures {
  bool ok = false;
  double p99 = 0, gbps = 0, step = 0;
  uint64_t steps = 0;  // completed all-reduce steps or incast bursts
  std::string json;
};

Figures Run(const ScenarioRun& sc, const std::vector<std::string>& extra) {
  std::vector<std::string> o = sc.shorten;
  o.insert(o.end(), extra.begin(), extra.end());
  Figures f;
  auto s = rocetune::sim::LoadScenario(
      std::string(ROCETUNE_SOURCE_DIR) + "/sim/scenarios/" + sc.name + ".textproto", o);
  if (!s.ok()) {
    std::fprintf(stderr, "sim_sensitivity: %s\n", std::string(s.status().message()).c_str());
    return f;
  }
  auto fabric = rocetune::sim::Fabric::Create(*s);
  if (!fabric.ok()) {
    std::fprintf(stderr, "sim_sensitivity: %s: %s\n", sc.name,
                 std::string(fabric.status().message()).c_str());
    return f;
  }
  (*fabric)->RunToEnd();
  SimSummary sum = (*fabric)->Summary(0);
  f.ok = true;
  f.p99 = sum.probe_rtt_us.p99;
  f.gbps = sum.delivered_gbps;
  const bool ar = sum.allreduce_step_us.count > 0;
  f.step = ar ? sum.allreduce_step_us.mean : sum.incast_burst_us.mean;
  f.steps = ar ? sum.allreduce_step_us.count : sum.incast_burst_us.count;
  f.json = sum.ToJson();
  return f;
}

std::string Delta(double v, double base) {
  if (base == 0 && v == 0) return "0";
  if (base == 0) return "new";
  const double d = 100.0 * (v - base) / base;
  if (std::abs(d) < 0.5) return "0";
  return absl::StrFormat("%+.0f", d);
}

}  // namespace

int main() {
  const std::vector<ScenarioRun> scenarios = {
      {"dcqcn_paper_40g_10flows", "paper 40G x10", {"duration_ms=40", "warmup_ms=20"}},
      {"incast_16to1_100g", "incast 16:1", {"duration_ms=10"}},
      {"victim_flow", "victim flow", {"duration_ms=10"}},
      {"allreduce_16_hosts_background", "all-reduce + bg", {"duration_ms=15"}},
      {"allreduce_8_hosts_large_messages", "all-reduce 16 MB", {"duration_ms=40"}},
  };
  auto dc = [](const std::string& k, const std::string& lo, const std::string& hi) {
    Knob knob{k, {}, {}, lo, hi};
    if (!lo.empty()) knob.low = {"dcqcn." + k + "=" + lo};
    if (!hi.empty()) knob.high = {"dcqcn." + k + "=" + hi};
    return knob;
  };
  std::vector<Knob> knobs = {
      // Not a knob: another seed shows how far chaotic runs move on their own.
      {"seed (noise reference)", {"seed=99"}, {}, "99", ""},
      dc("rpg_ai_rate", "1", "100"),
      dc("rpg_hai_rate", "5", "500"),
      dc("rpg_time_reset", "50", "1000"),
      dc("rpg_byte_reset", "1000", "200000"),
      dc("rpg_threshold", "", "5"),
      dc("rpg_min_dec_fac", "10", "90"),
      dc("rpg_min_rate", "", "1000"),
      dc("rpg_gd", "10", ""),
      dc("rpg_max_rate", "50000", ""),
      dc("dce_tcp_g", "1000", "1023"),
      dc("dce_tcp_rtt", "", "55"),
      dc("rate_reduce_monitor_period", "1", "50"),
      dc("initial_alpha_value", "256", ""),
      dc("min_time_between_cnps", "0", "50"),
      dc("clamp_tgt_rate", "", "1"),
      dc("clamp_tgt_rate_after_time_inc", "0", ""),
      dc("rate_to_set_on_first_cnp", "10000", ""),
      {"ecn kmin,kmax x1/4, x4", {}, {}, "x1/4", "x4"},
      {"ecn.pmax x1/4, x4", {}, {}, "x1/4", "x4"},
      {"pfc.dynamic_alpha",
       {"pfc.dynamic_alpha=0.03125"},
       {"pfc.dynamic_alpha=0.5"},
       "1/32",
       "1/2"},
      {"pfc.xoff_bytes (static)",
       {"pfc.xoff_bytes=100000"},
       {"pfc.xoff_bytes=1000000"},
       "100K",
       "1M"},
  };
  const std::clock_t cpu0 = std::clock();
  int runs = 0;
  std::vector<Figures> base;
  for (const ScenarioRun& sc : scenarios) {
    base.push_back(Run(sc, {}));
    ++runs;
    if (!base.back().ok) return 1;
  }
  std::vector<std::string> header = {"knob", "value"};
  for (const ScenarioRun& sc : scenarios) header.push_back(sc.label);
  std::printf("| %s |\n", absl::StrJoin(header, " | ").c_str());
  std::string rule = "|";
  for (size_t i = 0; i < header.size(); ++i) rule += "---|";
  std::printf("%s\n", rule.c_str());
  std::vector<std::string> dead;
  for (Knob& k : knobs) {
    for (int side = 0; side < 2; ++side) {
      bool any_effect = false;
      const std::string& label = side == 0 ? k.low_label : k.high_label;
      if (label.empty()) continue;
      std::vector<std::string> cells = {k.name, label};
      for (size_t i = 0; i < scenarios.size(); ++i) {
        std::vector<std::string> extra = side == 0 ? k.low : k.high;
        if (k.name.rfind("ecn ", 0) == 0 || k.name.rfind("ecn.pmax", 0) == 0) {
          // Scale the scenario's own ECN setting.
          auto s =
              rocetune::sim::LoadScenario(std::string(ROCETUNE_SOURCE_DIR) + "/sim/scenarios/" +
                                              scenarios[i].name + ".textproto",
                                          {});
          if (!s.ok()) return 1;
          const double m = side == 0 ? 0.25 : 4.0;
          if (k.name.rfind("ecn.pmax", 0) == 0) {
            extra = {absl::StrCat("ecn.pmax=", std::min(1.0, s->ecn().pmax() * m))};
          } else {
            extra = {
                absl::StrCat("ecn.kmin_bytes=",
                             static_cast<uint64_t>(static_cast<double>(s->ecn().kmin_bytes()) * m)),
                absl::StrCat(
                    "ecn.kmax_bytes=",
                    static_cast<uint64_t>(static_cast<double>(s->ecn().kmax_bytes()) * m))};
          }
        }
        Figures f = Run(scenarios[i], extra);
        ++runs;
        if (!f.ok) return 1;
        if (f.json == base[i].json) {
          cells.push_back("=");
          continue;
        }
        any_effect = true;
        std::string step = "-";  // the scenario has no steps
        if (base[i].steps > 0) step = f.steps == 0 ? "none done" : Delta(f.step, base[i].step);
        cells.push_back(absl::StrCat(Delta(f.p99, base[i].p99), " / ", Delta(f.gbps, base[i].gbps),
                                     " / ", step));
      }
      std::printf("| %s |\n", absl::StrJoin(cells, " | ").c_str());
      if (!any_effect) dead.push_back(absl::StrCat(k.name, "=", label));
      std::fflush(stdout);
    }
  }
  const double cpu = static_cast<double>(std::clock() - cpu0) / CLOCKS_PER_SEC;
  std::printf(
      "\nCells: change in %% of probe RTT p99 / delivered throughput / mean step time "
      "(all-reduce step or incast burst; \"-\" = the scenario has none, \"none done\" = no "
      "step completed); \"=\" = byte-identical summary.\n");
  std::fprintf(stderr, "BENCH sim_sensitivity runs=%d cpu_seconds=%.1f dead_values=%s\n", runs, cpu,
               dead.empty() ? "none" : absl::StrJoin(dead, ",").c_str());
  std::printf("BENCH sim_sensitivity runs=%d cpu_seconds=%.1f dead_values=%zu\n", runs, cpu,
              dead.size());
  return 0;
}
