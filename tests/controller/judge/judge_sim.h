#ifndef ROCETUNE_TESTS_CONTROLLER_JUDGE_JUDGE_SIM_H_
#define ROCETUNE_TESTS_CONTROLLER_JUDGE_JUDGE_SIM_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "controller/judge/judge.h"

namespace rocetune::controller::sim {

// A canary/control fleet after the judge's statistical model: per-probe RTT is
// a mixture of a lognormal body and a lognormal tail (weight ~3%), moved on
// the log scale by a persistent host offset, a rack offset shared by the
// rack's hosts, a fleet-wide per-window offset and an AR(1) host-window
// noise; each host also has its own tail weight. Probes are binned straight
// into the real QuantileSketch (multinomial counts per bucket, window offsets
// rounded to whole buckets), so a seed costs well under a millisecond.
// Guard counters are Poisson around host rates with persistent host and rack
// spread and a per-(host, segment) log-normal noise.
struct SimConfig {
  int racks = 8;
  int canary_per_rack = 1;
  int control_per_rack = 1;
  int probes_per_window = 1000;                  // per host per 10 s window
  int windows_before = 30;                       // baseline; 0 = none
  int windows_after = 30;                        // the whole bake
  std::vector<int> look_windows = {12, 24, 30};  // bake windows seen at each look
  // Of look_windows, how many are planned looks (0: all); the rest are hold
  // looks after the final one (a HOLD at the final look goes on, each seeing
  // more windows), as many as the HOLD limit allows. Windows past
  // windows_after are drawn as more of the bake.
  int planned_looks = 0;
  double window_seconds = 10;
  // A stage after the canary, judged twice (the cumulative test, judge.h):
  // when cumulative_before_windows > 0, the first that many windows of the
  // before span are every host's period before the change's first step, and
  // the last step_before_windows (0: all of it) the step's own baseline; the
  // windows between are the earlier steps' bakes, which neither test reads.
  // RunSchedule then judges each look both ways, each test at half the
  // step's false-FAIL budget, and merges the two verdicts as the controller
  // does.
  int cumulative_before_windows = 0;
  int step_before_windows = 0;
  // Of each rack's canary hosts (within-rack design), the first this many
  // were changed at an earlier step: they run the change in the step's own
  // baseline too, not only in its bake.
  int canary_changed_earlier_per_rack = 0;
  double present_share = 1;  // share of windows with a report (both periods)

  // RTT model (seconds).
  double body_median = 10e-6;
  double body_sigma = 0.25;
  double tail_weight = 0.03;
  double tail_median = 30e-6;
  double tail_sigma = 0.5;
  // Effects on the log scale.
  double host_sd = 0.08;
  double host_tail_weight_sd = 0.25;  // tail weight x exp(N(0, sd^2))
  double rack_sd = 0.10;
  double fleet_window_sd = 0.05;
  double ar_sd = 0.05;
  double ar_phi = 0.6;
  double fleet_after_log_shift = 0;  // every host after the change (a fleet incident)

  // Rack-level design (a change applied per ToR): when canary_racks > 0, the
  // first canary_racks racks are entirely canary and the others entirely
  // control, each with hosts_per_rack hosts (canary_per_rack and
  // control_per_rack are then ignored).
  int canary_racks = 0;
  int hosts_per_rack = 4;
  // Rack effects that move over time (shared by a rack's hosts, not by the
  // fleet), so they do not cancel in a rack's before/after shift: an AR(1)
  // rack-window offset (stationary sd, coefficient) and a per-rack step from
  // the baseline to the bake, on ln RTT; and a per-rack step of the guard
  // counter rates. Drawn from a stream of their own, so configurations
  // without them keep their draws.
  double rack_ar_sd = 0;
  double rack_ar_phi = 0.8;
  double rack_drift_sd = 0;
  double counter_rack_drift_sd = 0;

  // The change, applied to canary hosts after it.
  double canary_tail_scale = 1;  // tail component x this
  double canary_tail_weight_scale = 1;
  double canary_body_scale = 1;  // with the tail scale: whole-distribution change

  // Probe loss (share of probes sent) per group and period.
  double canary_loss_after = 0;
  double loss = 0;

  // Guard counters, per host.
  double cnp_per_second = 50;
  double retransmits_per_second = 5;
  double pause_ratio = 1e-3;
  double throughput_gbps = 40;
  double counter_host_sd = 0.3;  // persistent host spread of the rates
  double counter_rack_sd = 0.2;
  double counter_noise_sd = 0.03;  // per (host, segment)
  double canary_cnp_scale = 1;     // after the change
  double canary_pause_scale = 1;
  double canary_retransmit_scale = 1;
};

// The rack-level fleet the tests use: canary_racks entirely canary racks and
// control_racks entirely control racks of 4 hosts, otherwise the defaults
// above, plus rack effects that move over time: a rack-window AR(1) with sd
// 0.05 and coefficient 0.8 (like the host-window noise, but more persistent:
// a ToR's load changes slowly), a baseline-to-bake step of sd 0.05 per rack on
// ln RTT and of sd 0.1 on the guard counter rates.
SimConfig RackLevelConfig(int canary_racks, int control_racks);

// The judge's input at each look of the bake (cumulative after-periods);
// with config.cumulative_before_windows > 0 and `cumulative` given, also the
// cumulative test's input at each look (the same after-periods, each host's
// period before the change's first step as its before).
std::vector<std::vector<HostInput>> SimulateLooks(
    const SimConfig& config, uint64_t seed,
    std::vector<std::vector<HostInput>>* cumulative = nullptr);

// Outcomes of running the full look schedule over a list of seeds: a FAIL at
// any look ends that seed's run; otherwise the final look decides, or, after a
// HOLD there, the first hold look that does not HOLD. `hold`: still HOLD after
// the last look (the HOLD limit would abort the change).
struct Tally {
  int runs = 0;
  int fail = 0;
  int pass = 0;
  int hold = 0;
  int fail_at_interim = 0;
  int hold_at_final = 0;      // the final look HOLDs (and hold looks follow, if any)
  int pass_at_hold = 0;       // PASS at a hold look (counted in `pass`)
  int fail_at_hold = 0;       // FAIL at a hold look (counted in `fail`)
  int pass_before_final = 0;  // must stay 0
  std::map<std::string, int> fail_rules;
  std::map<std::string, int> hold_rules;  // the last look's rule of the runs that end HOLD
  double seconds = 0;
};
Tally RunSchedule(const SimConfig& sim_config, JudgeConfig config, int seeds, uint64_t first_seed);
std::string Describe(const char* name, const Tally& t);

// The seed count: `default_seeds`, or ROCETUNE_JUDGE_SEEDS for longer offline runs.
int Seeds(int default_seeds);

// Clopper-Pearson gates at 95%: with k events out of n runs, is the one-sided
// upper confidence bound of the rate below `rate` (k <= 4 of 1000, <= 12 of
// 2000 for 1%)? Is the lower bound at least `rate` (k >= 962 of 1000 for 95%)?
bool UpperBoundBelow(int k, int n, double rate);
bool LowerBoundAtLeast(int k, int n, double rate);

// The PASS margin (guard.pass_max_ucb_regression) of AllMetricsConfig: +20%,
// as the simulated fleets' policies set it. The default, +5%, is measured
// apart (judge_power_test's TheDefaultMargin... case): eight racks cannot
// bound a neutral change that tightly half of the time.
inline constexpr double kSimPassMargin = 0.2;

// A judge config with policy defaults but the PASS margin kSimPassMargin,
// three looks and one constraint per guard metric at its default ratio.
JudgeConfig AllMetricsConfig();

}  // namespace rocetune::controller::sim

#endif  // ROCETUNE_TESTS_CONTROLLER_JUDGE_JUDGE_SIM_H_
