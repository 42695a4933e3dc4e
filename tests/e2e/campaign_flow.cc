#include "tests/e2e/campaign_flow.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace rocetune::e2e {
namespace {

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

FleetFigures MeasureFleet(Env& env, int n, const std::string& peer_class) {
  std::vector<double> all, cls;
  std::map<std::string, std::vector<double>> jobs;
  double gbps = 0;
  int got = 0;
  for (int i = 0; i < n; ++i) {
    absl::SleepFor(absl::Seconds(1));
    absl::StatusOr<v1::FleetSummaryResponse> a = env.Summary(absl::Seconds(2));
    if (!a.ok()) continue;
    if (!peer_class.empty()) {
      absl::StatusOr<v1::FleetSummaryResponse> c = env.Summary(absl::Seconds(2), peer_class);
      if (!c.ok()) continue;
      cls.push_back(c->probe_rtt_p99_seconds() * 1e6);
    }
    all.push_back(a->probe_rtt_p99_seconds() * 1e6);
    for (const v1::JobSummary& j : a->jobs()) {
      if (j.p99_seconds() > 0) jobs[j.op()].push_back(j.p99_seconds() * 1e6);
    }
    gbps += a->tx_gbps_per_host();
    ++got;
  }
  FleetFigures out{Median(all), Median(cls), got == 0 ? 0 : gbps / got, {}};
  for (auto& [op, v] : jobs) out.job_p99_us[op] = Median(v);
  return out;
}

std::string JobFigures(const FleetFigures& before, const FleetFigures& after) {
  std::string out;
  for (const auto& [op, b] : before.job_p99_us) {
    auto it = after.job_p99_us.find(op);
    if (it == after.job_p99_us.end() || b <= 0) continue;
    absl::StrAppendFormat(&out,
                          " job_%s_p99_before_us=%.1f job_%s_p99_after_us=%.1f "
                          "job_%s_p99_change_pct=%.1f",
                          op, b, op, it->second, op, 100 * (it->second / b - 1));
  }
  return out.empty() ? " job_figures=none" : out;
}

std::string IdIn(const std::string& out, const std::string& prefix) {
  size_t at = out.find(prefix);
  if (at == std::string::npos) return "";
  size_t end = at + prefix.size();
  while (end < out.size() && isdigit(static_cast<unsigned char>(out[end]))) ++end;
  return out.substr(at, end - at);
}

int64_t ParameterOf(const v1::HostInfo& host, const std::string& name) {
  for (const auto& d : host.current_parameters().devices()) {
    auto it = d.dcqcn().find(name);
    if (it != d.dcqcn().end()) return it->second;
  }
  return -1;
}

absl::StatusOr<v1::Campaign> RunApprovedCampaign(Env& env, const std::string& policy_name,
                                                 absl::Duration timeout) {
  std::string out;
  if (env.Ctl({"tuning", "start", policy_name, "--reason=e2e tuning"}, "alice", &out) != 0) {
    return absl::InternalError(absl::StrCat("tuning start ", policy_name, ": ", out));
  }
  const std::string campaign = IdIn(out, "t-");
  if (campaign.empty()) return absl::InternalError(absl::StrCat("no campaign id in: ", out));
  if (env.Ctl({"tuning", "approve", campaign, "--reason=mine"}, "alice", &out) != 1 ||
      !absl::StrContains(out, "PERMISSION_DENIED")) {
    return absl::InternalError(
        absl::StrCat("alice approved her own campaign ", campaign, " or failed otherwise: ", out));
  }
  if (env.Ctl({"tuning", "approve", campaign, "--reason=go"}, "bob", &out) != 0) {
    return absl::InternalError(absl::StrCat("bob's approval of ", campaign, ": ", out));
  }
  const bool ended = env.WaitFor(
      [&] {
        absl::StatusOr<v1::Campaign> t = env.GetCampaign(campaign);
        return t.ok() && t->state() != v1::Campaign::RUNNING;
      },
      timeout, absl::Seconds(1));
  absl::StatusOr<v1::Campaign> t = env.GetCampaign(campaign);
  if (!t.ok()) return t.status();
  if (!ended) {
    return absl::DeadlineExceededError(absl::StrCat(
        campaign, " still running after ", absl::FormatDuration(timeout), ": ", t->DebugString()));
  }
  return t;
}

absl::StatusOr<v1::Change> PromoteAndWait(Env& env, const std::string& change,
                                          absl::Duration timeout) {
  std::string out;
  if (env.Ctl({"change", "approve", change, "--reason=mine"}, "alice", &out) != 1) {
    return absl::InternalError(absl::StrCat("the campaign's proposer approved its promotion ",
                                            change, " or failed otherwise: ", out));
  }
  if (env.Ctl({"change", "approve", change, "--reason=promote"}, "bob", &out) != 0) {
    return absl::InternalError(absl::StrCat("bob's approval of ", change, ": ", out));
  }
  env.WaitFor(
      [&] {
        absl::StatusOr<v1::Change> c = env.GetChange(change);
        return c.ok() && c->state() != v1::APPROVED && c->state() != v1::CANARY &&
               c->state() != v1::STAGE;
      },
      timeout, absl::Seconds(1));
  return env.GetChange(change);
}

const v1::Trial* Confirmation(const v1::Campaign& t) {
  const std::map<std::string, int64_t> best(t.best().begin(), t.best().end());
  const v1::Trial* out = nullptr;
  for (const v1::Trial& tr : t.trials()) {
    if (tr.confirms() != 0 &&
        std::map<std::string, int64_t>(tr.knobs().begin(), tr.knobs().end()) == best) {
      out = &tr;
    }
  }
  return out;
}

const v1::Trial* ConfirmedTrial(const v1::Campaign& t) {
  const v1::Trial* c = Confirmation(t);
  if (c == nullptr) return nullptr;
  for (const v1::Trial& tr : t.trials()) {
    if (tr.index() == c->confirms()) return &tr;
  }
  return nullptr;
}

void ExpectConfirmedOnFreshRacks(const v1::Trial* conf, const std::string& out) {
  ASSERT_NE(conf, nullptr) << out;
  EXPECT_EQ(conf->outcome(), "confirmed") << out;
  EXPECT_LT(conf->objective_upper(), 1.0) << out;
  EXPECT_GT(conf->canary_hosts(), 4u) << out;
  EXPECT_EQ(conf->fresh_canary_hosts(), conf->canary_hosts()) << out;
}

void ExpectUnconfirmedEnd(const v1::Campaign& t, const std::string& out, const std::string& bench) {
  const v1::Trial* conf = Confirmation(t);
  ASSERT_NE(conf, nullptr) << "the tuner found nothing better: " << out;
  EXPECT_NE(conf->outcome(), "confirmed") << out;
  EXPECT_TRUE(absl::StrContains(t.note(), "was not confirmed")) << out;
  std::printf("BENCH %s promoted=0 search_estimate=%s confirmed_estimate=%s confirmation=%s\n",
              bench.c_str(), EstimateOf(ConfirmedTrial(t)).c_str(), EstimateOf(conf).c_str(),
              conf->outcome().c_str());
}

void ExpectJobRollback(Env& env, const v1::Campaign& t, const v1::Change& c, int members,
                       const std::string& bench, absl::Duration timeout) {
  ASSERT_EQ(c.state(), v1::ROLLED_BACK) << c.DebugString().substr(0, 4000);
  ASSERT_GT(c.verdicts_size(), 0);
  const v1::Verdict& v = c.verdicts(c.verdicts_size() - 1);
  EXPECT_EQ(v.outcome(), v1::Verdict::FAIL) << v.summary();
  EXPECT_EQ(v.rule(), "fleet_constraint") << v.summary();
  const v1::MetricEvidence* job = nullptr;
  for (const v1::MetricEvidence& m : v.metrics()) {
    if (m.metric() == "fleet_step_time_p99") {
      job = &m;
    } else if (absl::StartsWith(m.metric(), "fleet_")) {
      // The job's constraint alone decided: no other fleet metric failed.
      EXPECT_NE(m.outcome(), "fail") << m.metric() << ": " << m.note();
    }
  }
  ASSERT_NE(job, nullptr) << "not the job's constraint: " << v.summary();
  EXPECT_EQ(job->outcome(), "fail") << job->note();
  EXPECT_GT(job->ratio(), job->ratio_upper()) << job->note();
  // Every member back on the start values: the ToRs' ECN thresholds and the
  // hosts' DCQCN knobs, as each now reports them.
  std::string differs;
  int reporting = 0;  // members that report at least one of the knobs
  const bool restored = env.WaitFor(
      [&] {
        differs.clear();
        reporting = 0;
        for (const v1::HostInfo& h : env.Hosts()) {
          bool reports = false;
          for (const auto& [knob, start] : t.start()) {
            const int64_t now = ParameterOf(h, knob);
            if (now == -1) continue;
            reports = true;
            if (now != start) {
              absl::StrAppend(&differs, h.host_id(), " ", knob, "=", now, " (start ", start, "); ");
            }
          }
          reporting += reports ? 1 : 0;
        }
        return differs.empty() && reporting >= members;
      },
      timeout);
  EXPECT_TRUE(restored) << differs << reporting << " of " << members << " members report";
  std::printf(
      "BENCH %s promoted=1 rolled_back=job_p99 stage=%u job_fleet_p99_ratio=%.3f "
      "job_fleet_fail_above=%.3f search_estimate=%s confirmed_estimate=%s\n",
      bench.c_str(), v.stage(), job->ratio(), job->ratio_upper(),
      EstimateOf(ConfirmedTrial(t)).c_str(), EstimateOf(Confirmation(t)).c_str());
}

std::string RackLevelRollout(double canary_fraction) {
  return absl::StrCat(R"(rollout {
  canary_fraction: )",
                      canary_fraction, R"(
  min_canary_hosts: 8
  bake_seconds: 6
  baseline_seconds: 4
  looks: 2
  # Straight from the canary racks to all: an intermediate stage of 6 racks
  # would leave 2 control racks, too few for the rack-level judge to bound
  # the p99 ratio (it HOLDs until the limit aborts the change). The last
  # stage, with no control left, is judged by the fleet guard.
  stages: [1.0]
  rack_label: "tor"
}
guard {
  max_p99_regression: 0.05
  pass_max_ucb_regression: 0.2
  confidence: 0.995
  min_samples: 300
  min_rack_pairs: 4
  max_hold_seconds: 12
}
approval { approvers: 1 }
)");
}

std::string EstimateOf(const v1::Trial* tr) {
  if (tr == nullptr) return "-";
  return absl::StrFormat("%.3f[%.3f,%.3f]", tr->objective_ratio(), tr->objective_lower(),
                         tr->objective_upper());
}

int BudgetedTrials(const v1::Campaign& t) {
  int n = 0;
  for (const v1::Trial& tr : t.trials()) n += tr.retry_of() == 0 && tr.confirms() == 0 ? 1 : 0;
  return n;
}

}  // namespace rocetune::e2e
