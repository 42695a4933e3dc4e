// The simulator against the DCQCN fluid model (Zhu et al., SIGCOMM 2015, section
// 5, Eqs. 5-9): N long flows with the paper's parameters at 40 Gb/s settle at
// the fluid model's fixed point. The fixed point is solved here from the
// equations; the simulated mean queue after the alpha transient must be within
// 2x of it, grow with N, and reach the top of the RED ramp at about the same N.
#include <cmath>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "sim/fabric.h"
#include "sim/scenario_loader.h"

namespace rocetune::sim {
namespace {

// The paper scenario's parameters (sim/scenarios/dcqcn_paper_40g_*flows).
struct Paper {
  double link_bps = 40e9;
  double mtu = 1024;           // bytes per packet: the unit of marking
  double tau = 50e-6;          // CNP interval (min_time_between_cnps)
  double tau_alpha = 55e-6;    // alpha timer (dce_tcp_rtt)
  double timer = 55e-6;        // rate-increase timer (rpg_time_reset)
  double byte_counter = 10e6;  // bytes (rpg_byte_reset 156250 x 64)
  double f = 5;                // fast-recovery steps (rpg_threshold)
  double r_ai_bps = 40e6;      // additive increase (rpg_ai_rate)
  double kmin = 5000, kmax = 200000, pmax = 0.01;
};

// dR_C/dt at the fixed point R_C = C / N (dq/dt = 0), with alpha and R_T at
// their own fixed points (dalpha/dt = 0, dR_T/dt = 0), as a function of the
// marking probability p. Rates in packets/s, the byte counter in packets.
double RateDrift(const Paper& m, double n, double p) {
  const double r = m.link_bps / 8 / m.mtu / n;
  const double b = m.byte_counter / m.mtu;
  const double q = 1 - p;
  const double alpha = 1 - std::pow(q, m.tau_alpha * r);                // Eq. 7 = 0
  const double cut_window = 1 - std::pow(q, m.tau * r);                 // a mark within tau
  const double byte_events = r * p / (std::pow(q, -b) - 1);             // B unmarked packets
  const double timer_events = r * p / (std::pow(q, -m.timer * r) - 1);  // T unmarked
  const double r_ai = m.r_ai_bps / 8 / m.mtu;
  // Eq. 8 = 0: (R_T - R_C) / tau * cut_window = R_AI * (past-F-weighted events).
  const double gap =
      m.tau / cut_window * r_ai *
      (std::pow(q, m.f * b) * byte_events + std::pow(q, m.f * m.timer * r) * timer_events);
  // Eq. 9: decrease minus increase.
  return -r * alpha / (2 * m.tau) * cut_window + gap / 2 * (byte_events + timer_events);
}

// The fixed point's marking probability (bisection on log p) and its queue on
// the RED ramp (Kmax once p passes Pmax).
double FluidQueue(const Paper& m, double n) {
  double lo = 1e-9, hi = 0.5;
  EXPECT_GT(RateDrift(m, n, lo), 0) << "increase wins with almost no marks";
  EXPECT_LT(RateDrift(m, n, hi), 0) << "decrease wins with many marks";
  for (int i = 0; i < 200; ++i) {
    const double mid = std::sqrt(lo * hi);
    (RateDrift(m, n, mid) > 0 ? lo : hi) = mid;
  }
  const double p = lo;
  return p >= m.pmax ? m.kmax : m.kmin + p / m.pmax * (m.kmax - m.kmin);
}

// The paper scenario with n flows into host 0, 150 ms of which the last 75 are
// measured (the alpha time constant is 55 us / g = 14 ms).
double SimulatedQueue(int n) {
  absl::StatusOr<v1::Scenario> s = LoadScenario(
      std::string(ROCETUNE_SOURCE_DIR) + "/sim/scenarios/dcqcn_paper_40g_2flows.textproto",
      {"duration_ms=150", "warmup_ms=75"});
  EXPECT_TRUE(s.ok()) << s.status();
  if (!s.ok()) return 0;
  s->mutable_topology()->set_hosts(static_cast<uint32_t>(n + 1));
  s->mutable_workload()->clear_long_flows();
  for (int i = 0; i < n; ++i) {
    v1::LongFlow* f = s->mutable_workload()->add_long_flows();
    f->set_src(static_cast<uint32_t>(i + 1));
    f->set_dst(0);
    f->set_start_us(100.0 * i);
  }
  absl::StatusOr<std::unique_ptr<Fabric>> fabric = Fabric::Create(*s);
  EXPECT_TRUE(fabric.ok()) << fabric.status();
  if (!fabric.ok()) return 0;
  (*fabric)->RunToEnd();
  const SimSummary sum = (*fabric)->Summary(0);
  for (const SimSummary::Queue& q : sum.queues) {
    if (q.name == "tor0->h0") return q.mean_bytes;
  }
  ADD_FAILURE() << "no bottleneck queue in the summary";
  return 0;
}

// The (interpolated) N at which queue(N) first reaches `level`, searched in
// [lo, hi] where queue(lo) < level <= queue(hi); queue is sampled at integers.
template <typename F>
double CrossingN(F queue, int lo, int hi, double level) {
  double q_lo = queue(lo), q_hi = queue(hi);
  while (hi - lo > 1) {
    const int mid = (lo + hi) / 2;
    const double q = queue(mid);
    if (q < level) {
      lo = mid;
      q_lo = q;
    } else {
      hi = mid;
      q_hi = q;
    }
  }
  return lo + (level - q_lo) / (q_hi - q_lo);
}

TEST(FluidModelTest, FixedPointQueueMatchesTheFluidModel) {
  const Paper m;
  std::printf("%4s %14s %14s %7s\n", "N", "fluid_bytes", "sim_bytes", "ratio");
  double previous = 0;
  for (int n : {2, 4, 10, 20}) {
    const double fluid = FluidQueue(m, n);
    const double sim = SimulatedQueue(n);
    std::printf("%4d %14.0f %14.0f %7.2f\n", n, fluid, sim, sim / fluid);
    EXPECT_GT(sim, fluid / 2) << "N = " << n;
    EXPECT_LT(sim, fluid * 2) << "N = " << n;
    EXPECT_GT(sim, previous) << "the queue grows with N (N = " << n << ")";
    previous = sim;
  }
}

TEST(FluidModelTest, QueueLeavesTheRedRampAtTheFluidModelsN) {
  // "Leaves the ramp": the N at which the mean queue reaches 90 % of its level
  // at N = 30, where both models sit at the top of the ramp (the fluid model
  // at Kmax exactly; the simulator oscillates around it).
  const Paper m;
  constexpr int kTop = 30;
  auto fluid = [&](int n) { return FluidQueue(m, n); };
  const double fluid_n = CrossingN(fluid, 2, kTop, 0.9 * fluid(kTop));
  std::map<int, double> runs;
  auto sim = [&](int n) {
    auto it = runs.find(n);
    return it != runs.end() ? it->second : runs[n] = SimulatedQueue(n);
  };
  const double sim_top = sim(kTop);
  const double sim_n = CrossingN(sim, 10, kTop, 0.9 * sim_top);
  std::printf("leaves the RED ramp at N: fluid %.1f, simulated %.1f (top: %.0f vs %.0f bytes)\n",
              fluid_n, sim_n, fluid(kTop), sim_top);
  EXPECT_GT(sim_top, 0.8 * m.kmax);
  EXPECT_NEAR(sim_n, fluid_n, 0.3 * fluid_n);
}

}  // namespace
}  // namespace rocetune::sim
