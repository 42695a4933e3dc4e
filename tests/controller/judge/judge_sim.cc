#include "tests/controller/judge/judge_sim.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <random>
#include <vector>

#include "controller/judge/stats.h"
#include "model/quantile_sketch.h"

namespace rocetune::controller::sim {
namespace {

double NormalCdf(double z) { return 0.5 * std::erfc(-z / std::sqrt(2.0)); }

// Probabilities of the sketch buckets k_lo .. k_lo + size - 1 (bucket k holds
// (gamma^(k-1), gamma^k]) under lognormal(ln median, sigma); the mass outside
// goes to the end buckets.
std::vector<double> LognormalBuckets(double median, double sigma, int k_lo, int size,
                                     double log_gamma) {
  std::vector<double> p(size);
  double prev = 0;
  for (int i = 0; i < size; ++i) {
    double edge =
        (i == size - 1) ? 1 : NormalCdf(((k_lo + i) * log_gamma - std::log(median)) / sigma);
    p[i] = edge - prev;
    prev = edge;
  }
  return p;
}

struct Variant {
  std::vector<double> body;
  std::vector<double> tail;
  double tail_weight_scale = 1;
};

// A Poisson draw: inversion for small means, the normal approximation above.
int64_t Poisson(double lambda, std::mt19937_64& rng) {
  if (lambda <= 0) return 0;
  if (lambda >= 30) {
    double z = std::normal_distribution<double>(0, 1)(rng);
    return std::max<int64_t>(0, std::llround(lambda + std::sqrt(lambda) * z));
  }
  double u = std::uniform_real_distribution<double>(0, 1)(rng);
  double p = std::exp(-lambda);
  double cdf = p;
  int64_t k = 0;
  while (u > cdf && k < 1000) {
    ++k;
    p *= lambda / static_cast<double>(k);
    cdf += p;
  }
  return k;
}

// A host's per-bucket counts for about n probes spread over windows whose
// bucket shifts are `shifts`: independent Poisson counts per bucket (so the
// total varies like a Poisson count around n, as a real host's would).
void DrawInto(const Variant& v, double tail_weight, const std::vector<int>& shifts, int64_t n,
              int k_lo, double log_gamma, std::mt19937_64& rng, QuantileSketch* out) {
  if (n <= 0 || shifts.empty()) return;
  const int size = static_cast<int>(v.body.size());
  int jmin = *std::min_element(shifts.begin(), shifts.end());
  int jmax = *std::max_element(shifts.begin(), shifts.end());
  const int span = size + jmax - jmin;
  std::vector<double> p(span, 0.0);
  double w = std::min(1.0, tail_weight * v.tail_weight_scale);
  double per_window = 1.0 / static_cast<double>(shifts.size());
  std::vector<double> mix(size);
  for (int i = 0; i < size; ++i) mix[i] = (1 - w) * v.body[i] + w * v.tail[i];
  std::vector<int> windows_at(jmax - jmin + 1, 0);
  for (int j : shifts) windows_at[j - jmin]++;
  for (int at = 0; at <= jmax - jmin; ++at) {
    if (windows_at[at] == 0) continue;
    double share = per_window * windows_at[at];
    for (int i = 0; i < size; ++i) p[at + i] += share * mix[i];
  }
  for (int i = 0; i < span; ++i) {
    int64_t x = Poisson(static_cast<double>(n) * p[i], rng);
    if (x > 0) {
      int k = k_lo + jmin + i;
      out->Insert(std::exp((k - 0.5) * log_gamma), static_cast<uint64_t>(x));
    }
  }
}

struct Segment {
  enum Kind { kBefore, kCumulativeBefore, kAfter };
  int begin = 0;  // window indices, global (before windows first)
  int end = 0;
  Kind kind = kBefore;
};

}  // namespace

std::vector<std::vector<HostInput>> SimulateLooks(const SimConfig& c, uint64_t seed,
                                                  std::vector<std::vector<HostInput>>* cumulative) {
  std::mt19937_64 rng(seed * 0x9E3779B97F4A7C15ULL + 12345);
  std::normal_distribution<double> normal(0, 1);
  const double log_gamma = std::log((1 + QuantileSketch::kDefaultRelativeAccuracy) /
                                    (1 - QuantileSketch::kDefaultRelativeAccuracy));

  // Bucket grid wide enough for both variants.
  double max_scale = std::max(1.0, c.canary_body_scale) * std::max(1.0, c.canary_tail_scale);
  double lo = std::log(c.body_median * std::min(1.0, c.canary_body_scale)) - 6 * c.body_sigma;
  double hi = std::log(c.tail_median * max_scale) + 7 * c.tail_sigma;
  int k_lo = static_cast<int>(std::floor(lo / log_gamma));
  int size = static_cast<int>(std::ceil(hi / log_gamma)) - k_lo + 1;
  Variant base{LognormalBuckets(c.body_median, c.body_sigma, k_lo, size, log_gamma),
               LognormalBuckets(c.tail_median, c.tail_sigma, k_lo, size, log_gamma), 1};
  Variant changed{
      LognormalBuckets(c.body_median * c.canary_body_scale, c.body_sigma, k_lo, size, log_gamma),
      LognormalBuckets(c.tail_median * c.canary_body_scale * c.canary_tail_scale, c.tail_sigma,
                       k_lo, size, log_gamma),
      c.canary_tail_weight_scale};

  const int windows = c.windows_before +
                      std::max(c.windows_after, c.look_windows.empty() ? 0 : c.look_windows.back());
  std::vector<double> fleet(windows);
  for (double& f : fleet) f = c.fleet_window_sd * normal(rng);
  auto present = [&c](int w_in_period) {
    return std::floor((w_in_period + 1) * c.present_share) >
           std::floor(w_in_period * c.present_share);
  };

  // Without a cumulative test the segments (and so the draws) are the ones
  // every other configuration has always had.
  const bool two_tests = c.cumulative_before_windows > 0 && cumulative != nullptr;
  const int step_before = c.step_before_windows > 0
                              ? std::min(c.step_before_windows, c.windows_before)
                              : c.windows_before;
  std::vector<Segment> segments;
  if (two_tests) {
    segments.push_back(
        {0, std::min(c.cumulative_before_windows, c.windows_before), Segment::kCumulativeBefore});
  }
  if (c.windows_before > 0) {
    segments.push_back({c.windows_before - step_before, c.windows_before, Segment::kBefore});
  }
  int prev = 0;
  for (int lw : c.look_windows) {
    segments.push_back({c.windows_before + prev, c.windows_before + lw, Segment::kAfter});
    prev = lw;
  }
  if (two_tests) cumulative->assign(c.look_windows.size(), {});

  const bool rack_level = c.canary_racks > 0;
  const int hosts_per_rack = rack_level ? c.hosts_per_rack : c.canary_per_rack + c.control_per_rack;
  std::mt19937_64 rack_rng(seed * 0xD1B54A32D192ED03ULL + 777);
  std::vector<std::vector<HostInput>> looks(c.look_windows.size());
  for (int r = 0; r < c.racks; ++r) {
    double rack = c.rack_sd * normal(rng);
    double counter_rack = c.counter_rack_sd * normal(rng);
    // Rack effects over time, on ln RTT per window; a counter-rate step.
    std::vector<double> rack_time(windows, 0.0);
    double counter_rack_step = 0;
    if (c.rack_ar_sd > 0 || c.rack_drift_sd > 0 || c.counter_rack_drift_sd > 0) {
      double ar = c.rack_ar_sd * normal(rack_rng);
      double step = c.rack_drift_sd * normal(rack_rng);
      counter_rack_step = c.counter_rack_drift_sd * normal(rack_rng);
      for (int w = 0; w < windows; ++w) {
        if (w > 0) {
          ar = c.rack_ar_phi * ar +
               std::sqrt(1 - c.rack_ar_phi * c.rack_ar_phi) * c.rack_ar_sd * normal(rack_rng);
        }
        rack_time[w] = ar + (w >= c.windows_before ? step : 0);
      }
    }
    for (int h = 0; h < hosts_per_rack; ++h) {
      const bool canary = rack_level ? r < c.canary_racks : h < c.canary_per_rack;
      const bool changed_earlier = canary && !rack_level && h < c.canary_changed_earlier_per_rack;
      HostInput in;
      in.rack = "rack" + std::to_string(r);
      in.canary = canary;
      in.host_id = in.rack + (canary ? "-canary" : "-control") + std::to_string(h);
      double host = c.host_sd * normal(rng);
      double tail_weight = c.tail_weight * std::exp(c.host_tail_weight_sd * normal(rng));
      double counter_host = c.counter_host_sd * normal(rng) + counter_rack;
      // AR(1) host-window noise, stationary sd ar_sd.
      std::vector<int> shift(windows);
      double ar = c.ar_sd * normal(rng);
      for (int w = 0; w < windows; ++w) {
        if (w > 0) ar = c.ar_phi * ar + std::sqrt(1 - c.ar_phi * c.ar_phi) * c.ar_sd * normal(rng);
        double incident = w >= c.windows_before ? c.fleet_after_log_shift : 0;
        shift[w] = static_cast<int>(
            std::lround((rack + rack_time[w] + host + fleet[w] + ar + incident) / log_gamma));
      }
      // One HostPeriod per segment, then cumulated per look.
      std::vector<HostPeriod> parts;
      for (const Segment& s : segments) {
        HostPeriod hp;
        std::vector<int> shifts;
        const bool is_after = s.kind == Segment::kAfter;
        int first = is_after ? c.windows_before : s.begin;
        for (int w = s.begin; w < s.end; ++w) {
          hp.windows_expected++;
          if (present(w - first)) {
            hp.windows_present++;
            shifts.push_back(shift[w]);
          }
        }
        const bool changed_now =
            canary && (is_after || (changed_earlier && s.kind == Segment::kBefore));
        int64_t n = static_cast<int64_t>(shifts.size()) * c.probes_per_window;
        DrawInto(changed_now ? changed : base, tail_weight, shifts, n, k_lo, log_gamma, rng,
                 &hp.rtt);
        double loss = changed_now ? std::max(c.loss, c.canary_loss_after) : c.loss;
        uint64_t lost =
            static_cast<uint64_t>(std::llround(static_cast<double>(n) * loss / (1 - loss)));
        hp.probes_sent = static_cast<uint64_t>(n) + lost;
        hp.probes_lost = lost;
        hp.covered_seconds = hp.windows_present * c.window_seconds;
        const double counter_step = is_after ? counter_rack_step : 0;
        auto noisy = [&](double mean) {
          return mean * std::exp(counter_host + counter_step + c.counter_noise_sd * normal(rng));
        };
        double secs = hp.covered_seconds;
        std::poisson_distribution<uint64_t> cnp(std::max(
            1e-9, noisy(c.cnp_per_second * (changed_now ? c.canary_cnp_scale : 1)) * secs));
        hp.cnp = cnp(rng);
        std::poisson_distribution<uint64_t> retx(std::max(
            1e-9, noisy(c.retransmits_per_second * (changed_now ? c.canary_retransmit_scale : 1)) *
                      secs));
        hp.retransmits = retx(rng);
        hp.pause_us[3] = static_cast<uint64_t>(
            noisy(c.pause_ratio * (changed_now ? c.canary_pause_scale : 1)) * secs * 1e6);
        hp.tx_bytes = static_cast<uint64_t>(noisy(c.throughput_gbps) * 1e9 / 8 * secs);
        parts.push_back(std::move(hp));
      }
      HostPeriod before;
      HostPeriod cumulative_before;
      size_t first_after = 0;
      for (size_t i = 0; i < segments.size(); ++i) {
        if (segments[i].kind == Segment::kBefore) before = parts[i];
        if (segments[i].kind == Segment::kCumulativeBefore) cumulative_before = parts[i];
        if (segments[i].kind != Segment::kAfter) first_after = i + 1;
      }
      HostPeriod after;
      for (size_t l = 0; l < c.look_windows.size(); ++l) {
        const HostPeriod& p = parts[first_after + l];
        (void)after.rtt.Merge(p.rtt);
        after.probes_sent += p.probes_sent;
        after.probes_lost += p.probes_lost;
        after.windows_present += p.windows_present;
        after.windows_expected += p.windows_expected;
        after.covered_seconds += p.covered_seconds;
        after.cnp += p.cnp;
        after.retransmits += p.retransmits;
        after.tx_bytes += p.tx_bytes;
        for (int q = 0; q < 8; ++q) after.pause_us[q] += p.pause_us[q];
        HostInput at_look = in;
        at_look.before = before;
        at_look.after = after;
        if (two_tests) {
          HostInput against_first = at_look;
          against_first.before = cumulative_before;
          (*cumulative)[l].push_back(std::move(against_first));
        }
        looks[l].push_back(std::move(at_look));
      }
    }
  }
  return looks;
}

SimConfig RackLevelConfig(int canary_racks, int control_racks) {
  SimConfig c;
  c.racks = canary_racks + control_racks;
  c.canary_racks = canary_racks;
  c.hosts_per_rack = 4;
  c.rack_ar_sd = 0.05;
  c.rack_ar_phi = 0.8;
  c.rack_drift_sd = 0.05;
  c.counter_rack_drift_sd = 0.1;
  return c;
}

Tally RunSchedule(const SimConfig& sim_config, JudgeConfig config, int seeds, uint64_t first_seed) {
  Tally t;
  auto start = std::chrono::steady_clock::now();
  const bool two_tests = sim_config.cumulative_before_windows > 0;
  if (two_tests) config = HalfFailBudget(std::move(config));
  std::vector<std::vector<HostInput>> cumulative;
  for (int i = 0; i < seeds; ++i) {
    auto looks = SimulateLooks(sim_config, first_seed + static_cast<uint64_t>(i),
                               two_tests ? &cumulative : nullptr);
    const size_t planned =
        sim_config.planned_looks > 0
            ? std::min(looks.size(), static_cast<size_t>(sim_config.planned_looks))
            : looks.size();
    config.looks = static_cast<uint32_t>(planned);
    config.hold_looks = static_cast<uint32_t>(looks.size() - planned);
    v1::Verdict::Outcome last = v1::Verdict::HOLD;
    std::string last_rule;
    for (size_t l = 0; l < looks.size(); ++l) {
      config.look = static_cast<uint32_t>(l + 1);
      v1::Verdict v = Judge(looks[l], config);
      if (two_tests) MergeCumulative(Judge(cumulative[l], config), &v);
      last = v.outcome();
      last_rule = v.rule();
      const bool hold_look = l + 1 > planned;
      if (last == v1::Verdict::FAIL) {
        t.fail_rules[v.rule()]++;
        if (l + 1 < planned) t.fail_at_interim++;
        if (hold_look) t.fail_at_hold++;
        break;
      }
      if (last == v1::Verdict::PASS) {
        if (l + 1 < planned) {
          t.pass_before_final++;
          continue;
        }
        if (hold_look) t.pass_at_hold++;
        break;
      }
      if (l + 1 == planned) t.hold_at_final++;
    }
    t.runs++;
    if (last == v1::Verdict::FAIL) t.fail++;
    if (last == v1::Verdict::PASS) t.pass++;
    if (last == v1::Verdict::HOLD) {
      t.hold++;
      t.hold_rules[last_rule]++;
    }
  }
  t.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return t;
}

std::string Describe(const char* name, const Tally& t) {
  std::string out = std::string(name) + ": " + std::to_string(t.runs) + " seeds, FAIL " +
                    std::to_string(t.fail) + " (" + std::to_string(t.fail_at_interim) +
                    " at an interim look), PASS " + std::to_string(t.pass) + ", HOLD " +
                    std::to_string(t.hold) + ", " + std::to_string(t.seconds) + " s";
  if (t.hold_at_final > 0 || t.pass_at_hold > 0 || t.fail_at_hold > 0) {
    out += "; HOLD at the final look " + std::to_string(t.hold_at_final) + ", then PASS " +
           std::to_string(t.pass_at_hold) + ", FAIL " + std::to_string(t.fail_at_hold) +
           " at hold looks";
  }
  for (const auto& [rule, n] : t.fail_rules) out += " [" + rule + ": " + std::to_string(n) + "]";
  for (const auto& [rule, n] : t.hold_rules) {
    out += " [HOLD " + rule + ": " + std::to_string(n) + "]";
  }
  return out;
}

int Seeds(int default_seeds) {
  const char* env = std::getenv("ROCETUNE_JUDGE_SEEDS");
  if (env == nullptr) return default_seeds;
  int n = std::atoi(env);
  return n > 0 ? n : default_seeds;
}

bool UpperBoundBelow(int k, int n, double rate) {
  return stats::BinomialCdf(k, static_cast<uint64_t>(n), rate) < 0.05;
}

bool LowerBoundAtLeast(int k, int n, double rate) {
  return k >= 1 && 1 - stats::BinomialCdf(k - 1, static_cast<uint64_t>(n), rate) <= 0.05;
}

JudgeConfig AllMetricsConfig() {
  JudgeConfig config;
  config.looks = 3;
  config.guard.set_pass_max_ucb_regression(kSimPassMargin);
  for (const char* m :
       {"throughput_gbps", "pfc_pause_ratio", "cnp_per_second", "retransmits_per_second"}) {
    v1::Constraint c;
    c.set_metric(m);
    config.constraints.push_back(c);
  }
  return config;
}

}  // namespace rocetune::controller::sim
