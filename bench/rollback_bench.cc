// How long a bad change stays on the fabric: the real rocetune-controller and
// rocetune-fabricsim --agents (32 hosts in 8 ToRs, a 16:1 incast with
// background traffic), driven with rocetunectl. Each run proposes a bad set
// (rpg_min_dec_fac=100: a CNP barely cuts the rate), approves it and
// measures, from the canary's start, when the controller decided to roll it
// back (`decided`) and when every host had acked its restore and holds its
// set from before again (`restored`). Prints one BENCH line with the median
// and worst of each over the runs (default 20; ROCETUNE_BENCH_ARGS="--runs=N").
// Exits 1 when the fleet does not start; a run that is not rolled back counts
// in `not_rolled_back`.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "tests/e2e/campaign_flow.h"
#include "tests/e2e/e2e_env.h"

namespace rocetune::e2e {
namespace {

constexpr char kKnob[] = "rpg_min_dec_fac";
constexpr int64_t kBefore = 50;  // the simulator's firmware default
constexpr int kBakeSeconds = 6;

double Quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t i = std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())));
  return v[i];
}

// Every host acked its desired version and holds `value` for the knob.
bool Restored(Env& env) {
  for (const v1::HostInfo& h : env.Hosts()) {
    if (!h.desired_version().empty() && h.current_version() != h.desired_version()) return false;
    if (ParameterOf(h, kKnob) != kBefore) return false;
  }
  return true;
}

int Main(int runs) {
  EnvOptions opt;
  // The judge decides, not the agents' guard.
  opt.fabricsim_flags = {"--guard_max_pfc_pause_ratio=0", "--guard_max_cnp_rate=0"};
  Env env(opt);
  if (!env.Start()) {
    std::fprintf(stderr, "rollback_bench: the fleet did not start\n%s\n%s\n",
                 env.ControllerLog().c_str(), env.FabricLog().c_str());
    return 1;
  }
  std::string out;
  if (env.Ctl(
          {"policy", "apply", env.WriteFile("bad.textproto", TestPolicy("bench-bad", kBakeSeconds)),
           "--reason=bench"},
          "alice", &out) != 0) {
    std::fprintf(stderr, "rollback_bench: policy apply: %s\n", out.c_str());
    return 1;
  }
  std::vector<double> decided, restored;
  int not_rolled_back = 0;
  for (int i = 0; i < runs; ++i) {
    // A baseline of the fleet on its own set (the previous run's restore included).
    absl::SleepFor(absl::Seconds(kBakeSeconds));
    std::vector<std::string> args = {"change", "propose", "bench-bad", absl::StrCat(kKnob, "=100"),
                                     absl::StrCat("--reason=bench run ", i)};
    // The values were rolled back by the first run: proposing them again is an override.
    if (i > 0) args.push_back("--override_rejected=rollback_bench: the same bad set each run");
    if (env.Ctl(args, "alice", &out) != 0) {
      std::fprintf(stderr, "rollback_bench: propose: %s\n", out.c_str());
      return 1;
    }
    const std::string id = IdIn(out, "c-");
    if (env.Ctl({"change", "approve", id, "--reason=bench"}, "bob", &out) != 0) {
      std::fprintf(stderr, "rollback_bench: approve: %s\n", out.c_str());
      return 1;
    }
    absl::StatusOr<v1::Change> c;
    env.WaitFor(
        [&] {
          c = env.GetChange(id);
          return c.ok() && (c->state() == v1::ROLLED_BACK || c->state() == v1::DONE ||
                            c->state() == v1::ABORTED);
        },
        absl::Seconds(120));
    if (!c.ok() || c->state() != v1::ROLLED_BACK) {
      ++not_rolled_back;
      if (c.ok() && (c->state() == v1::CANARY || c->state() == v1::STAGE)) {
        env.Ctl({"change", "rollback", id, "--reason=bench: not decided"}, "bob", &out);
      }
      env.WaitFor([&] { return Restored(env); }, absl::Seconds(60));
      continue;
    }
    int64_t canary = 0, back = 0;
    for (const v1::ChangeTransition& t : c->transitions()) {
      if (t.to() == v1::CANARY) canary = t.unix_nanos();
      if (t.to() == v1::ROLLED_BACK) back = t.unix_nanos();
    }
    if (!env.WaitFor([&] { return Restored(env); }, absl::Seconds(60), absl::Milliseconds(50))) {
      ++not_rolled_back;
      continue;
    }
    decided.push_back((back - canary) / 1e9);
    restored.push_back(absl::ToDoubleSeconds(absl::Now() - absl::FromUnixNanos(canary)));
    std::fprintf(stderr, "run %d: decided %.2f s, restored %.2f s after the canary started\n", i,
                 decided.back(), restored.back());
  }
  std::printf(
      "BENCH rollback runs=%d rolled_back=%zu not_rolled_back=%d decided_median_s=%.2f "
      "decided_max_s=%.2f restored_median_s=%.2f restored_max_s=%.2f judge_window_s=%.1f\n",
      runs, decided.size(), not_rolled_back, Quantile(decided, 0.5),
      decided.empty() ? 0 : *std::max_element(decided.begin(), decided.end()),
      Quantile(restored, 0.5),
      restored.empty() ? 0 : *std::max_element(restored.begin(), restored.end()),
      kBakeSeconds / 3.0);
  return 0;
}

}  // namespace
}  // namespace rocetune::e2e

int main(int argc, char** argv) {
  int runs = 20;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (absl::StartsWith(a, "--runs=") && absl::SimpleAtoi(a.substr(7), &runs) && runs > 0)
      continue;
    std::fprintf(stderr, "rollback_bench: unknown argument %s (--runs=N)\n", a.c_str());
    return 2;
  }
  return rocetune::e2e::Main(runs);
}
