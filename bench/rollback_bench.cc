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
//
// Then (--mode=both, the default; --mode=plain or --mode=partition runs one)
// the partitioned runs (issue 25 item 2): the same with one canary host cut off. The
// bench moves into a network namespace of its own; every simulated host's
// agent reaches the controller at a loopback address of its own (h<i> at
// 127.0.0.<i+2>, mapped to the controller's by an nftables DNAT rule), so one
// host can be cut alone. As soon as the first canary host has applied the bad
// set, every packet of its connection is dropped (silent, as a cut link). The
// rest of the fleet is restored as before; the cut host gives the set up by
// itself when the change's provisional lease (10 s) runs out without the
// controller (`self_restored`), and once the cut heals (right after that) the
// controller confirms its restore (`confirmed`). Needs root, nft and ip;
// without them it prints a SKIPPED line (exit 77 when it was the only mode).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "tests/e2e/campaign_flow.h"
#include "tests/e2e/e2e_env.h"
#include "tests/e2e/fault_checks.h"

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

// The e2e policy with a 10 s provisional lease (the policy default is 300 s):
// a canary host cut off from the controller gives the set up 10 s after its
// agent lost the stream.
constexpr int kLeaseSeconds = 10;
std::string BenchPolicy() {
  return absl::StrReplaceAll(
      TestPolicy("bench-bad", kBakeSeconds),
      {{"guard {", absl::StrCat("guard {\n  provisional_lease_seconds: ", kLeaseSeconds)}});
}

constexpr char kCutTable[] = "rocetune_bench_cut";

// Every host (but `except`) acked its desired version and holds the knob's
// value from before.
bool Restored(Env& env, const std::string& except = "") {
  for (const v1::HostInfo& h : env.Hosts()) {
    if (h.host_id() == except) continue;
    if (!h.desired_version().empty() && h.current_version() != h.desired_version()) return false;
    if (ParameterOf(h, kKnob) != kBefore) return false;
  }
  return true;
}

double Max(const std::vector<double>& v) {
  return v.empty() ? 0 : *std::max_element(v.begin(), v.end());
}

std::string LoopbackOf(int host) { return absl::StrCat("127.0.0.", host + 2); }

// The first canary host of change `id` that has applied its pushed version,
// once there is one ("" after `timeout`).
std::string AppliedCanaryHost(Env& env, const std::string& id, absl::Duration timeout) {
  std::string found;
  env.WaitFor(
      [&] {
        absl::StatusOr<v1::Change> c = env.GetChange(id);
        // Only while the canary runs: after a rollback there is nothing to cut.
        if (!c.ok() || c->state() != v1::CANARY) return false;
        std::map<std::string, std::string> applied;
        for (const v1::HostInfo& h : env.Hosts()) applied[h.host_id()] = h.current_version();
        for (const v1::HostTarget& t : c->hosts()) {
          if (t.role() == v1::HostTarget::CANARY && !t.pushed_version().empty() &&
              applied[t.host_id()] == t.pushed_version()) {
            found = t.host_id();
            return true;
          }
        }
        return false;
      },
      timeout, absl::Milliseconds(20));
  return found;
}

// `netns`: whether the process entered a network namespace of its own (the
// partitioned runs need it; main enters it before any run).
int Main(int runs, bool partition, const absl::Status& netns) {
  EnvOptions opt;
  // The judge decides, not the agents' guard.
  opt.fabricsim_flags = {"--guard_max_pfc_pause_ratio=0", "--guard_max_cnp_rate=0"};
  std::unique_ptr<NftTable> nat, cut;
  // Removes the cut's rules when there are any; false, having said why, when
  // nft failed (the run must not go on with a host still cut off).
  auto uncut = [&cut]() {
    if (cut == nullptr) return true;
    if (absl::Status s = cut->Delete(); !s.ok()) {
      std::fprintf(stderr, "rollback_bench: %s\n", std::string(s.message()).c_str());
      return false;
    }
    return true;
  };
  if (partition) {
    if (!netns.ok()) {
      std::printf("BENCH rollback_partition status=SKIPPED reason=\"%s\"\n",
                  std::string(netns.message()).c_str());
      return 77;
    }
    const std::string nft = SystemTool("nft");
    for (int h = 0; h < 32; ++h) opt.controller_address_of[absl::StrCat("h", h)] = LoopbackOf(h);
    // Every other loopback address reaches the controller's (and any) port.
    nat = std::make_unique<NftTable>(nft, "rocetune_bench_nat");
    if (absl::Status s = nat->Install(
            testing::MakeTempDir("rollback-nat"),
            "  chain output {\n"
            "    type nat hook output priority -100; policy accept;\n"
            "    ip daddr != 127.0.0.1 ip daddr 127.0.0.0/8 dnat ip to 127.0.0.1\n"
            "  }\n"
            "  chain input {\n    type nat hook input priority 100; policy accept;\n  }\n");
        !s.ok()) {
      std::fprintf(stderr, "rollback_bench --partition: %s\n", std::string(s.message()).c_str());
      return 1;
    }
    cut = std::make_unique<NftTable>(nft, kCutTable);
  }
  Env env(opt);
  if (!env.Start()) {
    std::fprintf(stderr, "rollback_bench: the fleet did not start\n%s\n%s\n",
                 env.ControllerLog().c_str(), env.FabricLog().c_str());
    return 1;
  }
  std::string out;
  if (env.Ctl({"policy", "apply", env.WriteFile("bad.textproto", BenchPolicy()), "--reason=bench"},
              "alice", &out) != 0) {
    std::fprintf(stderr, "rollback_bench: policy apply: %s\n", out.c_str());
    return 1;
  }
  std::vector<double> decided, restored, self_restored, confirmed, after_heal;
  int not_rolled_back = 0, not_cut = 0;
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
    // --partition: cut the first canary host that runs the bad set.
    std::string cut_host;
    int expired_before = 0;
    if (partition) {
      cut_host = AppliedCanaryHost(env, id, absl::Seconds(30));
      int index = -1;
      if (cut_host.empty() || !absl::SimpleAtoi(cut_host.substr(1), &index)) {
        std::fprintf(stderr, "run %d: no canary host applied the set\n", i);
      } else {
        expired_before = CountOf(env.FabricLog(), kLeaseExpiredLog);
        const std::string address = LoopbackOf(index);
        if (absl::Status s = cut->Install(
                env.dir(), absl::StrCat("  chain output {\n"
                                        "    type filter hook output priority 0; policy accept;\n"
                                        "    ct original ip daddr ",
                                        address, " drop\n  }\n"));
            !s.ok()) {
          std::fprintf(stderr, "rollback_bench: %s\n", std::string(s.message()).c_str());
          return 1;
        }
      }
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
      if (!uncut()) return 1;
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
    const absl::Time canary_at = absl::FromUnixNanos(canary);
    auto since_canary = [&] { return absl::ToDoubleSeconds(absl::Now() - canary_at); };
    if (!env.WaitFor([&] { return Restored(env, cut_host); }, absl::Seconds(60),
                     absl::Milliseconds(50))) {
      ++not_rolled_back;
      if (!uncut()) return 1;
      continue;
    }
    decided.push_back((back - canary) / 1e9);
    restored.push_back(since_canary());
    std::string line = absl::StrFormat("run %d: decided %.2f s, restored %.2f s", i, decided.back(),
                                       restored.back());
    if (partition && cut->installed()) {
      // The cut host gives the set up by itself once the lease runs out.
      if (env.WaitFor([&] { return CountOf(env.FabricLog(), kLeaseExpiredLog) > expired_before; },
                      absl::Seconds(90), absl::Milliseconds(50))) {
        // When it happened, from the agent's log line (the wait above may
        // have begun after it).
        const std::optional<absl::Time> at =
            NthLogTime(env.FabricLog(), kLeaseExpiredLog, expired_before + 1);
        self_restored.push_back(at.has_value() ? absl::ToDoubleSeconds(*at - canary_at)
                                               : since_canary());
        absl::StrAppendFormat(&line, ", %s gave the set up by itself at %.2f s", cut_host,
                              self_restored.back());
      } else {
        absl::StrAppendFormat(&line, ", %s did not give the set up within 90 s", cut_host);
        // What the fabric said meanwhile: its warnings and the lines naming the host.
        std::vector<std::string> said;
        for (absl::string_view l : absl::StrSplit(env.FabricLog(), '\n')) {
          if (absl::StrContains(l, cut_host) || absl::StrContains(l, "level=warn"))
            said.emplace_back(l);
        }
        for (size_t k = said.size() > 30 ? said.size() - 30 : 0; k < said.size(); ++k) {
          std::fprintf(stderr, "  %s\n", said[k].c_str());
        }
      }
      const absl::Time healed = absl::Now();
      if (!uncut()) return 1;
      if (env.WaitFor([&] { return Restored(env); }, absl::Seconds(60), absl::Milliseconds(50))) {
        confirmed.push_back(since_canary());
        after_heal.push_back(absl::ToDoubleSeconds(absl::Now() - healed));
        absl::StrAppendFormat(&line, ", its restore confirmed at %.2f s (%.2f s after the heal)",
                              confirmed.back(), after_heal.back());
      } else {
        absl::StrAppend(&line, ", its restore not confirmed within 60 s of the heal");
      }
    } else if (partition) {
      ++not_cut;
    }
    std::fprintf(stderr, "%s (after the canary started)\n", line.c_str());
  }
  if (!partition) {
    std::printf(
        "BENCH rollback runs=%d rolled_back=%zu not_rolled_back=%d decided_median_s=%.2f "
        "decided_max_s=%.2f restored_median_s=%.2f restored_max_s=%.2f judge_window_s=%.1f\n",
        runs, decided.size(), not_rolled_back, Quantile(decided, 0.5), Max(decided),
        Quantile(restored, 0.5), Max(restored), kBakeSeconds / 3.0);
    return 0;
  }
  // `restored`: every host but the cut one; `self_restored`: the cut host
  // gave the set up (lease); `confirmed`: its restore acked after the heal.
  std::printf(
      "BENCH rollback_partition runs=%d rolled_back=%zu not_rolled_back=%d not_cut=%d "
      "decided_median_s=%.2f decided_max_s=%.2f restored_others_median_s=%.2f "
      "restored_others_max_s=%.2f self_restored=%zu self_restored_median_s=%.2f "
      "self_restored_max_s=%.2f confirmed=%zu confirmed_median_s=%.2f confirmed_max_s=%.2f "
      "confirmed_after_heal_median_s=%.2f confirmed_after_heal_max_s=%.2f lease_s=%d\n",
      runs, decided.size(), not_rolled_back, not_cut, Quantile(decided, 0.5), Max(decided),
      Quantile(restored, 0.5), Max(restored), self_restored.size(), Quantile(self_restored, 0.5),
      Max(self_restored), confirmed.size(), Quantile(confirmed, 0.5), Max(confirmed),
      Quantile(after_heal, 0.5), Max(after_heal), kLeaseSeconds);
  return 0;
}

}  // namespace
}  // namespace rocetune::e2e

int main(int argc, char** argv) {
  int runs = 20;
  std::string mode = "both";
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (absl::StartsWith(a, "--runs=") && absl::SimpleAtoi(a.substr(7), &runs) && runs > 0)
      continue;
    if (absl::StartsWith(a, "--mode=")) {
      mode = a.substr(7);
      if (mode == "plain" || mode == "partition" || mode == "both") continue;
    }
    std::fprintf(stderr,
                 "rollback_bench: unknown argument %s (--runs=N, --mode=plain|partition|both)\n",
                 a.c_str());
    return 2;
  }
  // Both modes run in a network namespace of their own when the partitioned
  // runs are asked for (entered before any thread or channel is made; the
  // plain runs only use loopback). Without it the plain runs still run.
  const absl::Status netns = mode == "plain" ? absl::FailedPreconditionError("not asked for")
                                             : rocetune::e2e::EnterPrivateNetns();
  if (mode != "partition") {
    const int rc = rocetune::e2e::Main(runs, /*partition=*/false, netns);
    if (rc != 0 || mode == "plain") return rc;
  }
  const int rc = rocetune::e2e::Main(runs, /*partition=*/true, netns);
  return rc == 77 && mode == "both" ? 0 : rc;
}
