// The rollout manager's state machine, in process and deterministic: a fake
// clock, a real Fleet, TelemetryStore, Store (SQLite in a temp dir), policy
// loader and judge; agents are fake connections that apply and ACK (or NACK)
// every push, and the test feeds each host's telemetry window by window from
// an RTT model whose tail grows with a parameter the change sets.
#include "controller/rollout/rollout_manager.h"

#include <cmath>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "absl/synchronization/mutex.h"
#include "controller/campaign/campaigns.h"
#include "controller/rollout/change_planner.h"
#include "daemon/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/controller/controller_test_util.h"
#include "tests/controller/fake_agent.h"

namespace rocetune::controller {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

constexpr int kRacks = 8;
constexpr int kHostsPerRack = 4;
constexpr char kDevice[] = "mlx5_0";

using testing::FakeAgent;

std::string PolicyText(int approvers = 1, uint32_t max_hold = 12) {
  return absl::StrCat(
      R"pb(
        name: "test-policy"
        selector { match_labels { key: "role" value: "trainer" } }
        objective { metric: PROBE_RTT_P99 }
        knobs { parameter: "rpg_time_reset" min: 2 max: 600 step: 2 log_scale: true }
        tuner { kind: COORDINATE_DESCENT trial_budget: 8 min_improvement: 0.03 }
        rollout {
          canary_fraction: 0.25
          min_canary_hosts: 8
          bake_seconds: 6
          stages: [ 0.5, 1.0 ]
          rack_label: "rack"
          baseline_seconds: 4
          looks: 3
        }
        guard { max_p99_regression: 0.05 confidence: 0.995 min_samples: 1500 min_rack_pairs: 6
                pass_max_ucb_regression: 0.2
                max_hold_seconds:)pb",
      max_hold, R"pb(}
                     approval { approvers: )pb",
      approvers, " }\n");
}

bool InFlightForTest(v1::ChangeState s) {
  return s == v1::CANARY || s == v1::STAGE || s == v1::APPROVED;
}

class RolloutTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::MakeTempDir();
    Open();
    for (int r = 0; r < kRacks; ++r) {
      for (int i = 0; i < kHostsPerRack; ++i) {
        const std::string id = absl::StrFormat("h%02d", r * kHostsPerRack + i);
        hosts_.push_back(id);
        rack_of_[id] = r;
      }
    }
    Connect();
  }
  void TearDown() override { Close(); }

  void Open() {
    auto store = Store::Open(dir_);
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = *std::move(store);
    TelemetryOptions topt;
    topt.window = absl::Seconds(1);
    topt.retention = absl::Minutes(2);
    telemetry_ = std::make_unique<TelemetryStore>(topt);
    FleetOptions fopt;
    fopt.plan_probes = false;
    fleet_ = std::make_unique<Fleet>(&clock_, telemetry_.get(), store_.get(), nullptr, fopt);
    ASSERT_TRUE(fleet_->LoadFromStore().ok());
    RolloutOptions ropt;
    ropt.tick = absl::ZeroDuration();
    ropt.window = absl::Seconds(1);
    ropt.retention = absl::Minutes(2);
    ropt.restore_confirm_timeout = absl::Seconds(10);
    ropt.campaign_trial_wait = absl::Seconds(60);
    ropt.probe_locality_label = probe_locality_label_;
    manager_ = std::make_unique<RolloutManager>(fleet_.get(), telemetry_.get(), store_.get(),
                                                nullptr, &clock_, ropt);
    // Fresh series per Open, as a restarted controller has.
    registry_ = std::make_unique<prometheus::Registry>();
    metrics_ = std::make_unique<RolloutMetrics>(*registry_);
    manager_->set_metrics(metrics_.get());
    ASSERT_TRUE(manager_->Load().ok());
    manager_->Start();
  }
  void Close() {
    if (manager_ != nullptr) manager_->Stop();
    manager_.reset();
    agents_.clear();
    fleet_.reset();
    telemetry_.reset();
    store_.reset();
  }
  void Connect() {
    for (const std::string& id : hosts_) {
      v1::Hello h;
      h.set_host_id(id);
      (*h.mutable_labels())["rack"] = absl::StrCat("r", rack_of_[id]);
      (*h.mutable_labels())["role"] = "trainer";
      v1::NicDevice* d = h.add_devices();
      d->set_name(kDevice);
      d->set_cc_param_layout("ofed_sysfs");
      d->add_ports()->set_speed_mbps(100000);
      v1::DeviceParameters* p = h.mutable_current_parameters()->add_devices();
      p->set_device(kDevice);
      (*p->mutable_dcqcn())["rpg_time_reset"] = 300;
      (*p->mutable_dcqcn())["rpg_ai_rate"] = 5;
      auto agent = std::make_shared<FakeAgent>(++stream_, fleet_.get(), id);
      agents_[id] = agent;
      auto reg = fleet_->Register(h, agent);
      ASSERT_TRUE(reg.ok()) << reg.status();
      telem_[id] = reg->telemetry;
    }
  }

  // Feeds `seconds` windows of telemetry, ticking the manager after each.
  void Run(int seconds) {
    for (int s = 0; s < seconds; ++s) {
      const absl::Time start = clock_.Now();
      for (const std::string& id : hosts_) {
        const int64_t value = agents_[id]->Param("rpg_time_reset", 300);
        const double factor = host_factor_ ? host_factor_(id, value) : factor_(value);
        v1::Report r;
        r.set_seq(++seq_);
        r.set_start_unix_nanos(absl::ToUnixNanos(start));
        r.set_end_unix_nanos(absl::ToUnixNanos(start + absl::Seconds(1)));
        QuantileSketch sk;
        std::lognormal_distribution<double> body(std::log(10e-6), 0.25);
        std::lognormal_distribution<double> tail(std::log(30e-6), 0.5);
        std::uniform_real_distribution<double> u(0, 1);
        const double host_offset =
            std::exp(0.08 * ((std::hash<std::string>()(id) % 100) / 50.0 - 1));
        const int probes = probes_(id);
        for (int i = 0; i < probes; ++i) {
          const double v = u(rng_) < 0.03 ? tail(rng_) * factor : body(rng_);
          sk.Insert(v * host_offset);
        }
        v1::LatencyWindow* w = r.add_latency();
        w->set_peer_class("intra_rack");
        sk.ToProto(w->mutable_network_rtt_seconds());
        w->set_probes_sent(probes);
        auto add = [&](const char* name, int prio, uint64_t delta) {
          v1::CounterSample* c = r.add_counters();
          c->set_device(kDevice);
          c->set_port(1);
          c->set_priority(prio);
          c->set_name(name);
          c->set_delta(delta);
          c->set_rate_per_second(static_cast<double>(delta));
        };
        add("tx_bytes", -1, tx_bytes_(id));
        add("cnp_handled", -1, 1000);
        add("rx_pfc_pause_duration_us", 3, pause_us_(id));
        if (job_tail_factor_ && job_tail_factor_(id) > 0) {
          // The job signal: 300 steps of job "train" a second, 3% of them in
          // a tail scaled by job_tail_factor_ (0: the job reports nothing).
          QuantileSketch steps;
          std::lognormal_distribution<double> step(std::log(1e-3), 0.1);
          std::lognormal_distribution<double> slow(std::log(3e-3), 0.3);
          const double f = job_tail_factor_(id);
          for (int i = 0; i < 300; ++i) steps.Insert(u(rng_) < 0.03 ? slow(rng_) * f : step(rng_));
          v1::JobTiming* j = r.add_jobs();
          j->set_job("train");
          j->set_op("step");
          steps.ToProto(j->mutable_seconds());
        }
        ASSERT_TRUE(telem_[id]->AddReport(r, start + absl::Milliseconds(500)).ok());
      }
      clock_.Advance(absl::Seconds(1));
      Tick();
    }
  }
  void Tick() {
    manager_->loop().RunSync([this] { manager_->Tick(); });
  }
  template <typename T>
  T OnExec(const std::function<T()>& f) {
    T out;
    manager_->loop().RunSync([&] { out = f(); });
    return out;
  }
  absl::StatusOr<v1::Change> Propose(int64_t value, const Identity& who = {"alice", false}) {
    return OnExec<absl::StatusOr<v1::Change>>([&] {
      v1::ProposeChangeRequest req;
      req.set_policy_name("test-policy");
      (*req.mutable_knobs())["rpg_time_reset"] = value;
      req.set_reason("test");
      return manager_->Propose(req, who);
    });
  }
  // The first canary host of a change and the version pushed to it ("" when none).
  std::pair<std::string, std::string> FirstCanary(const std::string& change_id) {
    const v1::Change c = Get(change_id);
    for (const v1::HostTarget& h : c.hosts()) {
      if (h.role() == v1::HostTarget::CANARY) return {h.host_id(), h.pushed_version()};
    }
    return {"", ""};
  }
  // A change to rpg_time_reset=2, which raises the canary's p99 tail by 60%,
  // proposed by alice after a 6 s baseline, approved by bob, its canary pushed.
  absl::StatusOr<v1::Change> ApprovedRegression() {
    factor_ = [](int64_t v) { return v == 2 ? 1.6 : 1.0; };
    return ApprovedChange(2);
  }
  // rpg_time_reset=`value` under `policy`, proposed by alice after a 6 s
  // baseline, approved by bob, its canary pushed.
  absl::StatusOr<v1::Change> ApprovedChange(int64_t value, const std::string& policy = "") {
    ApplyPolicy(policy.empty() ? PolicyText() : policy);
    Run(6);
    auto c = Propose(value);
    if (!c.ok()) return c.status();
    if (auto a = Act("approve", c->id(), {"bob", false}); !a.ok()) return a.status();
    Tick();
    return c;
  }
  // Feeds telemetry (up to 40 s) until change `id` is in STAGE `stage` or
  // no longer in flight.
  void RunUntilStage(const std::string& id, uint32_t stage) {
    for (int i = 0; i < 40; ++i) {
      const v1::Change now = Get(id);
      if (!InFlightForTest(now.state()) || (now.state() == v1::STAGE && now.stage() == stage)) {
        return;
      }
      Run(1);
    }
  }
  // Feeds 3 s of change `id`'s canary bake (past its 2 s onset), then sets
  // `*incident` and feeds telemetry (at most 40 s) until the change ends;
  // returns it then.
  v1::Change IncidentAfterTheOnset(const std::string& id, bool* incident) {
    Run(3);
    EXPECT_EQ(Get(id).state(), v1::CANARY);
    *incident = true;
    for (int i = 0; i < 40 && InFlightForTest(Get(id).state()); ++i) Run(1);
    return Get(id);
  }
  // A controller restart: the telemetry goes with the process, the store stays.
  void Restart() {
    Close();
    Open();
    Connect();
  }
  // The newest audit row of `change_id` (an empty row when there is none).
  v1::AuditEntry NewestAudit(const std::string& change_id) {
    v1::ListAuditRequest r;
    r.set_change_id(change_id);
    r.set_newest_first(true);
    absl::StatusOr<v1::ListAuditResponse> audit = store_->QueryAudit(r);
    EXPECT_TRUE(audit.ok()) << audit.status();
    return audit.ok() && audit->entries_size() > 0 ? audit->entries(0) : v1::AuditEntry();
  }
  // The newest audit row of `action` on campaign `id` (an empty row when
  // there is none).
  v1::AuditEntry CampaignAudit(const std::string& id, const std::string& action) {
    v1::ListAuditRequest r;
    r.set_limit(10000);
    r.set_newest_first(true);
    absl::StatusOr<v1::ListAuditResponse> audit = store_->QueryAudit(r);
    EXPECT_TRUE(audit.ok()) << audit.status();
    if (!audit.ok()) return v1::AuditEntry();
    for (const v1::AuditEntry& row : audit->entries()) {
      if (row.subject() == id && row.action() == action) return row;
    }
    return v1::AuditEntry();
  }
  // rocetunectl push HOST mlx5_0 rpg_ai_rate=AI [--replace], as carol.
  absl::StatusOr<v1::SetDesiredStateResponse> PushByHand(const std::string& host, int64_t ai,
                                                         bool replace = false) {
    return OnExec<absl::StatusOr<v1::SetDesiredStateResponse>>([&] {
      v1::SetDesiredStateRequest req;
      req.set_host_id(host);
      req.set_reason("lab");
      req.set_replace(replace);
      v1::DeviceParameters* d = req.mutable_parameters()->add_devices();
      d->set_device(kDevice);
      (*d->mutable_dcqcn())["rpg_ai_rate"] = ai;
      return manager_->SetDesiredState(req, Identity{"carol", false});
    });
  }
  absl::StatusOr<v1::Change> Act(const std::string& what, const std::string& id,
                                 const Identity& who) {
    return OnExec<absl::StatusOr<v1::Change>>([&] {
      v1::ChangeActionRequest req;
      req.set_id(id);
      req.set_reason(absl::StrCat(what, " in test"));
      if (what == "approve") return manager_->Approve(req, who);
      if (what == "reject") return manager_->Reject(req, who);
      if (what == "rollback") return manager_->Rollback(req, who);
      return manager_->Abort(req, who);
    });
  }
  absl::StatusOr<v1::Campaign> StartCampaign(const Identity& who) {
    return OnExec<absl::StatusOr<v1::Campaign>>([&] {
      v1::StartCampaignRequest req;
      req.set_policy_name("test-policy");
      req.set_reason("tune");
      return manager_->campaigns().Start(req, who);
    });
  }
  absl::StatusOr<v1::Campaign> ApproveCampaign(const std::string& id, const Identity& who) {
    return OnExec<absl::StatusOr<v1::Campaign>>([&] {
      v1::ChangeActionRequest r;
      r.set_id(id);
      return manager_->campaigns().Approve(r, who);
    });
  }
  // alice starts a campaign of test-policy and bob approves it: its id.
  std::string StartApprovedCampaign() {
    auto t = StartCampaign({"alice", false});
    EXPECT_TRUE(t.ok()) << t.status();
    if (!t.ok()) return "";
    auto a = ApproveCampaign(t->id(), {"bob", false});
    EXPECT_TRUE(a.ok()) << a.status();
    return t->id();
  }
  // A campaign started, approved and run to its end (RunCampaign); empty
  // when it could not start.
  v1::Campaign CampaignRun() {
    const std::string id = StartApprovedCampaign();
    return id.empty() ? v1::Campaign() : RunCampaign(id);
  }
  // PolicyText() tuning the probes and holding the job's "step" p99 to 1.05.
  static std::string JobHeldPolicy() {
    return absl::StrReplaceAll(PolicyText(),
                               {{"objective { metric: PROBE_RTT_P99 }",
                                 "objective { metric: PROBE_RTT_P99 op: \"step\" }\n"
                                 "constraints { metric: \"step_time_p99\" max_ratio: 1.05 }"}});
  }
  // Feeds telemetry a second at a time (at most 400 s) until campaign `id` is
  // no longer RUNNING, calling `each` with it after every second; returns it.
  v1::Campaign RunCampaign(const std::string& id,
                           const std::function<void(const v1::Campaign&)>& each = nullptr) {
    v1::Campaign now;
    for (int i = 0; i < 400; ++i) {
      Run(1);
      now = GetCampaign(id);
      if (each) each(now);
      if (now.state() != v1::Campaign::RUNNING) break;
    }
    return now;
  }
  v1::Campaign GetCampaign(const std::string& id) {
    return *OnExec<absl::StatusOr<v1::Campaign>>([&] { return manager_->campaigns().Get(id); });
  }
  v1::Change Get(const std::string& id) {
    auto c = OnExec<absl::StatusOr<v1::Change>>([&] { return manager_->GetChange(id); });
    EXPECT_TRUE(c.ok()) << c.status();
    return c.ok() ? *c : v1::Change();
  }
  void ApplyPolicy(const std::string& text) {
    auto r = OnExec<absl::StatusOr<v1::ApplyPolicyResponse>>([&] {
      v1::ApplyPolicyRequest req;
      req.set_text(text);
      req.set_file_name("test.textproto");
      return manager_->ApplyPolicy(req, Identity{"alice", false});
    });
    ASSERT_TRUE(r.ok()) << r.status();
  }
  int64_t DesiredValue(const std::string& host) {
    auto h = fleet_->GetStored(host);
    if (!h.ok() || h->desired_seq == 0) return -1;
    return h->desired.devices(0).dcqcn().at("rpg_time_reset");
  }

  static constexpr int kProbesPerWindow = 1000;
  FakeClock clock_{absl::FromUnixSeconds(1'700'000'000)};
  // The rollout series named `series` ("name{label=value,}"), -1 when absent.
  double Metric(const std::string& series) {
    for (const auto& fam : registry_->Collect()) {
      for (const auto& m : fam.metric) {
        std::string key = fam.name + "{";
        for (const auto& l : m.label) key += l.name + "=" + l.value + ",";
        key += "}";
        if (key == series) {
          return fam.type == prometheus::MetricType::Counter ? m.counter.value : m.gauge.value;
        }
      }
    }
    return -1;
  }

  std::string dir_;
  std::string probe_locality_label_ = "tor";
  std::unique_ptr<Store> store_;
  std::unique_ptr<TelemetryStore> telemetry_;
  std::unique_ptr<Fleet> fleet_;
  // Declared before manager_: they outlive it.
  std::unique_ptr<prometheus::Registry> registry_;
  std::unique_ptr<RolloutMetrics> metrics_;
  std::unique_ptr<RolloutManager> manager_;
  std::vector<std::string> hosts_;
  std::map<std::string, int> rack_of_;
  std::map<std::string, std::shared_ptr<FakeAgent>> agents_;
  std::map<std::string, std::shared_ptr<HostTelemetry>> telem_;
  uint64_t stream_ = 0;
  uint64_t seq_ = 0;
  std::mt19937_64 rng_{42};
  std::function<double(int64_t)> factor_ = [](int64_t) { return 1.0; };
  // A factor_ for campaigns: the tail shrinks linearly as rpg_time_reset
  // falls from 300 (1.0) towards 20 (0.5).
  static double TailShrinksWithTimeReset(int64_t v) {
    return 0.5 + 0.5 * std::min(1.0, std::max(0.0, (v - 20) / 280.0));
  }
  // When set, in place of factor_: the tail factor of a host at a value.
  std::function<double(const std::string&, int64_t)> host_factor_;
  // When set, every report carries the job signal (job "train", op "step"),
  // its tail scaled by this factor per host; none while it returns 0.
  std::function<double(const std::string&)> job_tail_factor_;
  // Probes a host answers per window.
  std::function<int(const std::string&)> probes_ = [](const std::string&) {
    return kProbesPerWindow;
  };
  v1::Campaign CampaignWaitingToProposeItsWinner(bool* paused);
  // Hosts whose agent holds rpg_time_reset = `value` now.
  size_t HostsWith(int64_t value) {
    size_t n = 0;
    for (const std::string& h : hosts_) n += agents_[h]->Param("rpg_time_reset", 300) == value;
    return n;
  }
  // Proposes rpg_time_reset = `value`, has bob approve it, and feeds
  // telemetry until the change ends (at most 60 s); its final state.
  v1::Change RunChange(int64_t value) {
    auto c = Propose(value);
    EXPECT_TRUE(c.ok()) << c.status();
    if (!c.ok()) return v1::Change();
    EXPECT_TRUE(Act("approve", c->id(), {"bob", false}).ok());
    Tick();
    for (int i = 0; i < 60 && InFlightForTest(Get(c->id()).state()); ++i) Run(1);
    return Get(c->id());
  }
  // True while any host runs a change (a trial in flight).
  bool AnyChangeActive() {
    for (const std::string& h : hosts_) {
      if (!manager_->ActiveChangeOf(h).empty()) return true;
    }
    return false;
  }
  std::function<uint64_t(const std::string&)> pause_us_ = [](const std::string&) { return 0; };
  std::function<uint64_t(const std::string&)> tx_bytes_ = [](const std::string&) {
    return 10'000'000'000ull;
  };
};

TEST(ChangePlannerTest, CanaryAndControlShareRacksAndStagesEndWithControl) {
  v1::Policy policy;
  policy.mutable_rollout()->set_canary_fraction(0.25);
  policy.mutable_rollout()->set_min_canary_hosts(4);
  policy.mutable_rollout()->add_stages(0.5);
  policy.mutable_rollout()->add_stages(1.0);
  std::vector<StoredHost> hosts;
  for (int i = 0; i < 32; ++i) {
    StoredHost h;
    h.info.set_host_id(absl::StrCat("h", i));
    (*h.info.mutable_labels())["rack"] = absl::StrCat("r", i / 4);
    hosts.push_back(h);
  }
  auto plan = PlanHosts(policy, hosts, "c-1");
  ASSERT_TRUE(plan.ok()) << plan.status();
  std::map<std::string, int> canary_by_rack, control_by_rack;
  int canaries = 0, stage1 = 0, stage2 = 0;
  for (const v1::HostTarget& t : *plan) {
    if (t.role() == v1::HostTarget::CANARY) {
      ++canaries;
      ++canary_by_rack[t.rack()];
      EXPECT_EQ(t.stage(), 0u);
    }
    if (t.role() == v1::HostTarget::CONTROL) {
      ++control_by_rack[t.rack()];
      EXPECT_EQ(t.stage(), 2u) << "control hosts change in the last stage";
    }
    if (t.stage() == 1) ++stage1;
    if (t.stage() == 2) ++stage2;
  }
  EXPECT_EQ(canaries, 8);
  EXPECT_EQ(canary_by_rack.size(), 8u) << "one canary per rack";
  EXPECT_EQ(canary_by_rack, control_by_rack);
  EXPECT_EQ(8 + stage1, 16) << "stage 1 reaches half of the hosts";
  EXPECT_EQ(8 + stage1 + stage2, 32);
  // Deterministic for a seed, different for another.
  auto again = PlanHosts(policy, hosts, "c-1");
  ASSERT_TRUE(again.ok());
  for (size_t i = 0; i < plan->size(); ++i) EXPECT_EQ((*plan)[i].role(), (*again)[i].role());
  auto other = PlanHosts(policy, hosts, "c-2");
  ASSERT_TRUE(other.ok());
  bool differs = false;
  for (size_t i = 0; i < plan->size(); ++i) differs |= (*plan)[i].role() != (*other)[i].role();
  EXPECT_TRUE(differs);
}

// Issue 24 item 4: a confirmation's canary and control hosts avoid the
// hosts of the trial it confirms: both fresh in racks of four, a fresh canary
// against the old control in racks of three, canary and control swapped in
// racks of two.
TEST(ChangePlannerTest, AConfirmationAvoidsTheHostsOfTheTrialItConfirms) {
  v1::Policy policy;
  policy.mutable_rollout()->set_canary_fraction(0.25);
  policy.mutable_rollout()->set_min_canary_hosts(6);
  std::vector<StoredHost> hosts;
  // Racks r0..r3 of four hosts, r4 of three, r5 of two.
  const std::vector<std::pair<std::string, int>> racks = {{"r0", 4}, {"r1", 4}, {"r2", 4},
                                                          {"r3", 4}, {"r4", 3}, {"r5", 2}};
  for (const auto& [rack, n] : racks) {
    for (int i = 0; i < n; ++i) {
      StoredHost h;
      h.info.set_host_id(absl::StrCat(rack, "-h", i));
      (*h.info.mutable_labels())["rack"] = rack;
      hosts.push_back(h);
    }
  }
  auto search = PlanHosts(policy, hosts, "t-1");
  ASSERT_TRUE(search.ok()) << search.status();
  PlanAvoid avoid;
  std::map<std::string, std::string> old_canary, old_control;  // rack -> host
  for (const v1::HostTarget& t : *search) {
    if (t.role() == v1::HostTarget::CANARY) {
      avoid[t.host_id()] = 2;
      old_canary[t.rack()] = t.host_id();
    }
    if (t.role() == v1::HostTarget::CONTROL) {
      avoid[t.host_id()] = 1;
      old_control[t.rack()] = t.host_id();
    }
  }
  ASSERT_EQ(old_canary.size(), 6u) << "one canary per rack";
  auto confirm = PlanHosts(policy, hosts, "t-1/confirmation", avoid);
  ASSERT_TRUE(confirm.ok()) << confirm.status();
  std::map<std::string, std::string> canary, control;
  for (const v1::HostTarget& t : *confirm) {
    if (t.role() == v1::HostTarget::CANARY) canary[t.rack()] = t.host_id();
    if (t.role() == v1::HostTarget::CONTROL) control[t.rack()] = t.host_id();
  }
  ASSERT_EQ(canary.size(), 6u);
  for (const std::string r : {"r0", "r1", "r2", "r3"}) {
    EXPECT_FALSE(avoid.contains(canary[r])) << r;
    EXPECT_FALSE(avoid.contains(control[r])) << r;
  }
  EXPECT_FALSE(avoid.contains(canary["r4"]));
  EXPECT_EQ(control["r4"], old_control["r4"]);
  EXPECT_EQ(canary["r5"], old_control["r5"]);
  EXPECT_EQ(control["r5"], old_canary["r5"]);
}

TEST(ChangePlannerTest, RefusesWithoutARackOfTwo) {
  v1::Policy policy;
  policy.mutable_rollout()->set_canary_fraction(0.5);
  std::vector<StoredHost> hosts(3);
  for (int i = 0; i < 3; ++i) {
    hosts[i].info.set_host_id(absl::StrCat("h", i));
    (*hosts[i].info.mutable_labels())["rack"] = absl::StrCat("r", i);
  }
  auto plan = PlanHosts(policy, hosts, "s");
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(plan.status().message(), HasSubstr("control host in its own rack"));
}

TEST(ChangePlannerTest, KnobsOutsideThePolicyAreRefused) {
  v1::Policy policy;
  policy.set_name("p");
  v1::Knob* k = policy.add_knobs();
  k->set_parameter("rpg_time_reset");
  k->set_min(2);
  k->set_max(600);
  EXPECT_TRUE(CheckKnobs(policy, {{"rpg_time_reset", 10}}).ok());
  EXPECT_THAT(CheckKnobs(policy, {{"rpg_time_reset", 601}}).message(), HasSubstr("[2, 600]"));
  EXPECT_THAT(CheckKnobs(policy, {{"rpg_ai_rate", 10}}).message(), HasSubstr("not a knob"));
  EXPECT_FALSE(CheckKnobs(policy, {}).ok());
}

// Issue 28 item 1: a hand push replaced the host's whole desired state with
// the one parameter named, so every other parameter and device went
// unmanaged (audited as "-> (removed)") and their drift could never be
// corrected. A push now merges; --replace is explicit.
TEST_F(RolloutTest, AHandPushMergesIntoTheDesiredStateAndReplaceIsExplicit) {
  auto push = [&](int64_t ai, bool replace) { return PushByHand("h00", ai, replace); };
  auto first = push(20, false);
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_EQ(first->changes_size(), 1);
  EXPECT_EQ(first->changes(0).parameter(), "rpg_ai_rate");
  EXPECT_EQ(first->changes(0).old_value(), "5");
  EXPECT_EQ(first->changes(0).new_value(), "20");
  auto h = fleet_->GetStored("h00");
  ASSERT_TRUE(h.ok());
  ASSERT_EQ(h->desired.devices_size(), 1);
  EXPECT_EQ(h->desired.devices(0).dcqcn().at("rpg_time_reset"), 300) << "kept, still managed";
  EXPECT_EQ(h->desired.devices(0).dcqcn().at("rpg_ai_rate"), 20);
  // The same values again: no new version, nothing changes.
  auto same = push(20, false);
  ASSERT_TRUE(same.ok());
  EXPECT_EQ(same->version(), first->version());
  EXPECT_EQ(same->changes_size(), 0);
  // --replace: exactly what is named; the response says what is dropped.
  auto replaced = push(20, true);
  ASSERT_TRUE(replaced.ok());
  ASSERT_EQ(replaced->changes_size(), 1);
  EXPECT_EQ(replaced->changes(0).parameter(), "rpg_time_reset");
  EXPECT_EQ(replaced->changes(0).new_value(), "");
  h = fleet_->GetStored("h00");
  EXPECT_EQ(h->desired.devices(0).dcqcn().count("rpg_time_reset"), 0u);
}

TEST(ChangePlannerTest, MergeParameterSetsSetsWhatIsNamedAndKeepsTheRest) {
  v1::ParameterSet base;
  v1::DeviceParameters* b0 = base.add_devices();
  b0->set_device("mlx5_0");
  (*b0->mutable_dcqcn())["rpg_time_reset"] = 300;
  (*b0->mutable_dcqcn())["rpg_ai_rate"] = 5;
  b0->set_rp_enable_mask(0x08);
  b0->mutable_pfc()->set_enable_mask(0x08);
  b0->mutable_pfc()->set_delay(100);
  base.add_devices()->set_device("mlx5_1");
  (*base.mutable_devices(1)->mutable_dcqcn())["rpg_time_reset"] = 300;
  v1::ParameterSet overlay;
  v1::DeviceParameters* o0 = overlay.add_devices();
  o0->set_device("mlx5_0");
  (*o0->mutable_dcqcn())["rpg_time_reset"] = 310;
  o0->mutable_pfc()->set_enable_mask(0x10);
  overlay.add_devices()->set_device("mlx5_2");
  (*overlay.mutable_devices(1)->mutable_dcqcn())["rpg_gd"] = 7;
  v1::ParameterSet m = MergeParameterSets(base, overlay);
  ASSERT_EQ(m.devices_size(), 3);
  EXPECT_EQ(m.devices(0).dcqcn().at("rpg_time_reset"), 310);
  EXPECT_EQ(m.devices(0).dcqcn().at("rpg_ai_rate"), 5);
  EXPECT_EQ(m.devices(0).rp_enable_mask(), 0x08u);
  EXPECT_EQ(m.devices(0).pfc().enable_mask(), 0x10u);
  EXPECT_EQ(m.devices(0).pfc().delay(), 100u);
  EXPECT_EQ(m.devices(1).dcqcn().at("rpg_time_reset"), 300);
  EXPECT_EQ(m.devices(2).device(), "mlx5_2");
  EXPECT_EQ(m.devices(2).dcqcn().at("rpg_gd"), 7);
}

// Issue 28 item 7: a PROPOSED change held its hosts forever, and a hand
// push to one of them was refused with advice ("roll it back") that a
// PROPOSED change does not accept. It now expires after proposal_ttl (24 h
// by default), audited, and the refusal names what its state accepts.
// A policy stored while the controller's --probe_locality_label was tor, proposed
// after a restart with rack: its objective's class (intra_tor) is no longer one
// any probe carries, so the proposal is refused, naming the flag, rather than a
// change that can only HOLD for want of probes.
TEST_F(RolloutTest, AStoredPeerClassTheLocalityLabelNoLongerGivesIsRefusedAtProposal) {
  ApplyPolicy(absl::StrReplaceAll(
      PolicyText(), {{"objective { metric: PROBE_RTT_P99 }",
                      "objective { metric: PROBE_RTT_P99 peer_class: \"intra_tor\" }"}}));
  probe_locality_label_ = "rack";
  Restart();
  const absl::StatusOr<v1::Change> c = Propose(300);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kFailedPrecondition) << c.status();
  EXPECT_THAT(c.status().message(), HasSubstr("\"intra_tor\" is not a class the probes report"));
  EXPECT_THAT(c.status().message(), HasSubstr("--probe_locality_label is rack"));
  probe_locality_label_ = "tor";
  Restart();
  EXPECT_TRUE(Propose(300).ok());
}

TEST_F(RolloutTest, AProposedChangeExpiresAndFreesItsHosts) {
  ApplyPolicy(PolicyText());
  auto c = Propose(100);
  ASSERT_TRUE(c.ok()) << c.status();
  auto push = [&] { return PushByHand("h00", 20); };
  auto refused = push();
  ASSERT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(refused.status().message(), HasSubstr("rocetunectl change reject " + c->id()));
  EXPECT_THAT(refused.status().message(), ::testing::Not(HasSubstr("roll it back")));
  clock_.Advance(absl::Hours(24) - absl::Seconds(1));
  Tick();
  EXPECT_EQ(Get(c->id()).state(), v1::PROPOSED);
  clock_.Advance(absl::Seconds(2));
  Tick();
  v1::Change now = Get(c->id());
  EXPECT_EQ(now.state(), v1::REJECTED);
  EXPECT_THAT(now.transitions(now.transitions_size() - 1).reason(), HasSubstr("expired"));
  EXPECT_EQ(NewestAudit(c->id()).action(), "change_expired");
  EXPECT_TRUE(push().ok()) << "the host is free again";
}

// Issue 28 item 8 (and issue 25 item 5, in part): a change whose hosts
// cannot report guard.min_samples probes in a baseline was accepted, then
// ABORTed bakes later ("13 probe RTTs before (< 500)"). Proposing it is now
// refused with the measured rate and what to change, when the fleet has
// reported long enough to tell.
TEST_F(RolloutTest, AProposalTheProbeRateCannotFillIsRefusedWithTheFigures) {
  const std::string thin =
      absl::StrReplaceAll(PolicyText(), {{"min_samples: 1500", "min_samples: 5000"}});
  ApplyPolicy(thin);
  // No reports yet: nothing to tell, the proposal stands.
  auto early = Propose(100);
  ASSERT_TRUE(early.ok()) << early.status();
  ASSERT_TRUE(Act("reject", early->id(), {"bob", false}).ok());
  Run(6);  // 1000 probes per host per second
  auto c = Propose(100);
  ASSERT_EQ(c.status().code(), absl::StatusCode::kFailedPrecondition) << c.status();
  EXPECT_THAT(c.status().message(), HasSubstr("median 1000.0 probe RTTs a second"));
  EXPECT_THAT(c.status().message(), HasSubstr("a 4 s baseline or bake holds about 4000"));
  EXPECT_THAT(c.status().message(), HasSubstr("guard.min_samples (5000)"));
  EXPECT_THAT(c.status().message(), HasSubstr("--probe_rate"));
  ApplyPolicy(PolicyText());  // 1500: 4000 suffice
  EXPECT_TRUE(Propose(100).ok());
}

// Issue 25 item 8: a host whose NICs keep the DCQCN reaction point off
// applies the change's reaction-point value, but it cannot act there. Its ack
// says so; the fleet and the change record it; the judge leaves the host out
// of the canary (it is not changed), and a change whose canary is left without
// enough changed hosts never PASSes.
TEST_F(RolloutTest, AHostWhereTheChangeIsNotInEffectIsNotCountedAsChanged) {
  for (const std::string& id : hosts_) {
    if (rack_of_[id] < 2) agents_[id]->SetReactionPointMask(0);
  }
  auto c = ApprovedChange(100);
  ASSERT_TRUE(c.ok()) << c.status();
  Run(8);  // the canary's bake (6 s) and its final look
  const v1::Change now = Get(c->id());
  int noted = 0;
  for (const v1::HostTarget& h : now.hosts()) {
    if (h.role() != v1::HostTarget::CANARY) continue;
    if (rack_of_[h.host_id()] < 2) {
      ASSERT_EQ(h.not_in_effect_size(), 1) << h.DebugString();
      EXPECT_EQ(h.not_in_effect(0).parameter(), "rpg_time_reset");
      EXPECT_EQ(h.not_in_effect(0).reason(),
                "the DCQCN reaction point is off on every priority (rp_enable_mask 0x00)");
      absl::StatusOr<StoredHost> stored = fleet_->GetStored(h.host_id());
      ASSERT_TRUE(stored.ok());
      // The fleet keeps every note of the set (rpg_ai_rate too); the change
      // keeps those on its own knob.
      EXPECT_EQ(stored->info.not_in_effect_size(), 2);
      ++noted;
    } else {
      EXPECT_EQ(h.not_in_effect_size(), 0) << h.DebugString();
    }
  }
  EXPECT_EQ(noted, 2);
  // The canary verdict judged 6 changed racks, not 8, and says why.
  ASSERT_GT(now.verdicts_size(), 0);
  const v1::Verdict& first = now.verdicts(0);
  uint32_t canary_hosts = 0;
  for (const auto& g : first.groups()) {
    if (g.group() == "canary") canary_hosts = g.hosts();
  }
  EXPECT_EQ(canary_hosts, 6u) << first.DebugString();
  int dropped = 0;
  for (const std::string& d : first.dropped_hosts()) {
    if (d.find("not changed: rpg_time_reset on mlx5_0 is not in effect") != std::string::npos) {
      ++dropped;
    }
  }
  EXPECT_EQ(dropped, 2) << first.DebugString();
}

// A change that switches the reaction point off itself (rp_enable_mask=0
// with a reaction-point value) is judged by what it switches: its canary
// hosts are changed hosts, whatever their acks say of rpg_time_reset.
TEST_F(RolloutTest, AChangeThatSwitchesTheBlockOffItselfIsJudgedAsAChange) {
  ApplyPolicy(absl::StrReplaceAll(
      PolicyText(),
      {{R"(knobs { parameter: "rpg_time_reset" min: 2 max: 600 step: 2 log_scale: true })",
        R"(knobs { parameter: "rpg_time_reset" min: 2 max: 600 step: 2 log_scale: true }
                         knobs { parameter: "rp_enable_mask" min: 0 max: 255 step: 1 })"}}));
  Run(6);
  auto c = OnExec<absl::StatusOr<v1::Change>>([&] {
    v1::ProposeChangeRequest req;
    req.set_policy_name("test-policy");
    (*req.mutable_knobs())["rpg_time_reset"] = 100;
    (*req.mutable_knobs())["rp_enable_mask"] = 0;
    req.set_reason("test");
    return manager_->Propose(req, {"alice", false});
  });
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_TRUE(Act("approve", c->id(), {"bob", false}).ok());
  Tick();
  Run(1);
  int canary = 0;
  const v1::Change now = Get(c->id());
  for (const v1::HostTarget& h : now.hosts()) {
    if (h.role() != v1::HostTarget::CANARY) continue;
    ++canary;
    EXPECT_FALSE(h.acked_version().empty()) << h.DebugString();
    EXPECT_EQ(h.not_in_effect_size(), 0) << h.DebugString();
    // The fleet still knows the value cannot act there.
    absl::StatusOr<StoredHost> stored = fleet_->GetStored(h.host_id());
    ASSERT_TRUE(stored.ok());
    EXPECT_GT(stored->info.not_in_effect_size(), 0) << stored->info.DebugString();
  }
  EXPECT_EQ(canary, 8);
}

TEST_F(RolloutTest, ACanaryWhereNothingIsInEffectNeverPasses) {
  for (const std::string& id : hosts_) agents_[id]->SetReactionPointMask(0);
  auto c = ApprovedChange(100);
  ASSERT_TRUE(c.ok()) << c.status();
  for (int i = 0; i < 40 && Get(c->id()).state() == v1::CANARY; ++i) Run(1);
  const v1::Change now = Get(c->id());
  EXPECT_EQ(now.state(), v1::ABORTED) << now.DebugString().substr(0, 3000);
  for (const auto& v : now.verdicts()) {
    EXPECT_NE(v.outcome(), v1::Verdict::PASS) << v.summary();
  }
  ASSERT_GT(now.verdicts_size(), 0);
  EXPECT_EQ(now.verdicts(now.verdicts_size() - 1).rule(), "min_rack_pairs");
}

// Issue 25 item 5: a look while a HOLD lasts reads the step's whole bake so
// far, so a HOLD limit the telemetry retention cannot cover would drop every
// host from the hold looks. Applying such a policy is refused, naming the
// fields and the --retention that would do.
TEST_F(RolloutTest, APolicyWhoseBakeAndHoldLimitOutlastRetentionIsRefused) {
  // Retention 2 min here: 6 s of bake plus 120 s of HOLD does not fit.
  auto r = OnExec<absl::StatusOr<v1::ApplyPolicyResponse>>([&] {
    v1::ApplyPolicyRequest req;
    req.set_text(PolicyText(1, 120));
    req.set_file_name("long_hold.textproto");
    return manager_->ApplyPolicy(req, Identity{"alice", false});
  });
  ASSERT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition) << r.status();
  EXPECT_THAT(r.status().message(), HasSubstr("long_hold.textproto: rollout.bake_seconds (6) plus "
                                              "guard.max_hold_seconds (120"));
  EXPECT_THAT(r.status().message(), HasSubstr("--retention=3m"));
  EXPECT_EQ(OnExec<v1::ListPoliciesResponse>([&] {
              return manager_->ListPolicies(v1::ListPoliciesRequest());
            }).policies_size(),
            0);
  ApplyPolicy(PolicyText(1, 100));  // 6 + 100 s and a window fit in 2 min
}

// Issue 25 item 5: a change no judge verdict could ever decide (too few
// labelled racks for the policy's minimum, or hosts without the rack label)
// is refused when proposed, with the figures and what to change; nothing is
// stored.
TEST_F(RolloutTest, AProposalTheJudgeCouldNeverDecideIsRefusedWithTheFigures) {
  ApplyPolicy(absl::StrReplaceAll(PolicyText(), {{"min_rack_pairs: 6", "min_rack_pairs: 9"}}));
  Run(6);
  auto c = Propose(100);
  ASSERT_EQ(c.status().code(), absl::StatusCode::kFailedPrecondition) << c.status();
  EXPECT_THAT(c.status().message(), HasSubstr("its 32 hosts span 8 labelled rack(s)"));
  EXPECT_THAT(c.status().message(), HasSubstr("needs at least 9 (guard.min_rack_pairs)"));
  // Hosts without the policy's rack label cannot be paired at all.
  ApplyPolicy(absl::StrReplaceAll(PolicyText(), {{"rack_label: \"rack\"", "rack_label: \"row\""}}));
  c = Propose(100);
  ASSERT_EQ(c.status().code(), absl::StatusCode::kFailedPrecondition) << c.status();
  EXPECT_THAT(c.status().message(),
              HasSubstr("span 0 labelled rack(s) (32 host(s) without a \"row\" label)"));
  auto listed = OnExec<absl::StatusOr<v1::ListChangesResponse>>(
      [&] { return manager_->ListChanges(v1::ListChangesRequest()); });
  ASSERT_TRUE(listed.ok());
  EXPECT_EQ(listed->changes_size(), 0) << "nothing stored for a refused proposal";
  ApplyPolicy(PolicyText());  // 8 racks, 6 needed
  EXPECT_TRUE(Propose(100).ok());
}

// Issue 25 item 5: a proposal says what its design can show, measured on the
// fleet's own recent telemetry (an A/A split of two bake-long periods with the
// plan's roles); a dry-run apply (policy validate --controller) says which
// hosts the policy selects and the same figures. With too little telemetry
// the proposal says the judge cannot decide yet.
TEST_F(RolloutTest, AProposalAndADryRunApplySayWhatTheDesignCanShow) {
  ApplyPolicy(PolicyText());
  Run(3);  // 3 s of telemetry: less than two 6 s periods
  auto early = Propose(100, {"alice", false});
  ASSERT_TRUE(early.ok()) << early.status();
  EXPECT_THAT(early->design_note(), HasSubstr("cannot decide")) << early->design_note();
  ASSERT_TRUE(Act("reject", early->id(), {"bob", false}).ok());
  Run(13);
  auto c = Propose(100);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_THAT(c->design_note(), HasSubstr("rack pairs, sd of a unit's ln p99 difference"));
  EXPECT_THAT(c->design_note(), HasSubstr("80% of the time"));
  EXPECT_THAT(c->design_note(), HasSubstr("(periods of 6s)"));
  EXPECT_EQ(Get(c->id()).design_note(), c->design_note()) << "kept with the change";
  auto dry = OnExec<absl::StatusOr<v1::ApplyPolicyResponse>>([&] {
    v1::ApplyPolicyRequest req;
    req.set_text(PolicyText());
    req.set_file_name("test.textproto");
    req.set_dry_run(true);
    return manager_->ApplyPolicy(req, Identity{"alice", false});
  });
  ASSERT_TRUE(dry.ok()) << dry.status();
  EXPECT_FALSE(dry->created());
  ASSERT_GE(dry->notes_size(), 2);
  EXPECT_THAT(dry->notes(0), HasSubstr("selects 32 connected host(s)"));
  EXPECT_THAT(dry->notes(dry->notes_size() - 1), HasSubstr("a change would have "));
  EXPECT_THAT(dry->notes(dry->notes_size() - 1), HasSubstr("rack pairs"));
}

TEST_F(RolloutTest, ApprovedChangeCanariesThenStagesToDone) {
  ApplyPolicy(PolicyText());
  Run(6);  // baseline
  auto c = Propose(100);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->state(), v1::PROPOSED);
  EXPECT_EQ(c->hosts_size(), 32);
  auto self = Act("approve", c->id(), {"alice", false});
  EXPECT_EQ(self.status().code(), absl::StatusCode::kPermissionDenied);
  auto ok = Act("approve", c->id(), {"bob", false});
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->state(), v1::APPROVED);
  Tick();
  v1::Change now = Get(c->id());
  ASSERT_EQ(now.state(), v1::CANARY);
  int pushed = 0;
  for (const auto& h : now.hosts()) {
    if (h.role() == v1::HostTarget::CANARY) {
      EXPECT_EQ(DesiredValue(h.host_id()), 100);
      ++pushed;
    } else {
      EXPECT_NE(DesiredValue(h.host_id()), 100) << h.host_id() << " changed before its stage";
    }
  }
  EXPECT_EQ(pushed, 8);
  EXPECT_EQ(Metric("rocetune_controller_active_change{change=" + c->id() + ",state=CANARY,}"), 1);
  EXPECT_EQ(Metric("rocetune_controller_changes{state=CANARY,}"), 1);
  // A conflicting proposal names the change that holds the hosts.
  auto conflict = Propose(200, {"carol", false});
  EXPECT_EQ(conflict.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(conflict.status().message(), HasSubstr(c->id()));
  Run(30);
  now = Get(c->id());
  EXPECT_EQ(now.state(), v1::DONE) << now.DebugString().substr(0, 3000);
  for (const std::string& h : hosts_) EXPECT_EQ(DesiredValue(h), 100) << h;
  bool passed = false;
  for (const auto& v : now.verdicts()) passed |= v.outcome() == v1::Verdict::PASS;
  EXPECT_TRUE(passed);
  // Every host not changed yet in a rack with a changed host is control: at
  // the canary (one per rack) its designated control host and the 16 REST
  // hosts; at stage 1 (half the fleet changed) the 8 REST hosts of stage 2
  // and the 8 control hosts.
  std::map<std::pair<uint32_t, std::string>, uint32_t> group_hosts;
  for (const auto& v : now.verdicts()) {
    for (const auto& g : v.groups()) group_hosts[{v.stage(), g.group()}] = g.hosts();
  }
  EXPECT_EQ((group_hosts[{0, "canary"}]), 8u);
  EXPECT_EQ((group_hosts[{0, "control"}]), 24u);
  EXPECT_EQ((group_hosts[{1, "canary"}]), 16u);
  EXPECT_EQ((group_hosts[{1, "control"}]), 16u);
  // Stage 1 was also judged against the fleet's pre-change baseline (the
  // cumulative test); the canary step's own baseline is that one already.
  bool cumulative_at_stage_1 = false;
  for (const auto& v : now.verdicts()) {
    const bool has = FindEvidence(v, "cumulative_ln_p99_did") != nullptr;
    if (v.stage() == 0) {
      EXPECT_FALSE(has) << v.summary();
    }
    if (v.stage() == 1) cumulative_at_stage_1 |= has;
  }
  EXPECT_TRUE(cumulative_at_stage_1);
  Tick();
  for (const char* to : {"PROPOSED", "APPROVED", "CANARY", "DONE"}) {
    EXPECT_EQ(
        Metric(std::string("rocetune_controller_change_transitions_total{to_state=") + to + ",}"),
        1)
        << to;
  }
  EXPECT_GE(Metric("rocetune_controller_change_transitions_total{to_state=STAGE,}"), 1);
  EXPECT_GE(Metric("rocetune_controller_judge_verdicts_total{verdict=PASS,}"), 1);
  EXPECT_EQ(Metric("rocetune_controller_changes{state=DONE,}"), 1);
  EXPECT_EQ(Metric("rocetune_controller_changes{state=CANARY,}"), 0);
  EXPECT_EQ(Metric("rocetune_controller_active_change{change=" + c->id() + ",state=STAGE,}"), -1);
  EXPECT_EQ(Metric("rocetune_controller_change_p99_seconds{group=canary,period=bake,}"), -1);
  auto chain = store_->VerifyAudit();
  ASSERT_TRUE(chain.ok());
  EXPECT_TRUE(chain->ok()) << chain->problem();
}

// Issue 25 item 2: every step's set goes out provisional, with the policy's
// lease (default 300 s); at DONE each host gets the same version again,
// final (lease 0), which is what lets its agent make it last-known-good.
TEST_F(RolloutTest, StepsPushProvisionalSetsAndDoneConfirmsThemUnderTheSameVersion) {
  auto c =
      ApprovedChange(100, absl::StrReplaceAll(PolicyText(), {{"min_rack_pairs: 6",
                                                              "min_rack_pairs: 6 "
                                                              "provisional_lease_seconds: 45"}}));
  ASSERT_TRUE(c.ok()) << c.status();
  const auto [canary, canary_version] = FirstCanary(c->id());
  ASSERT_FALSE(canary.empty());
  ASSERT_FALSE(agents_[canary]->leases().empty());
  EXPECT_EQ(agents_[canary]->leases().back(), 45u);
  auto info = fleet_->GetHost(canary);
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->desired_lease_seconds(), 45u);
  Run(30);
  v1::Change now = Get(c->id());
  ASSERT_EQ(now.state(), v1::DONE) << now.DebugString().substr(0, 3000);
  for (const v1::HostTarget& h : now.hosts()) {
    const std::vector<std::string> pushed = agents_[h.host_id()]->pushed();
    const std::vector<uint32_t> leases = agents_[h.host_id()]->leases();
    ASSERT_GE(pushed.size(), 2u) << h.host_id();
    // The step's push, then the confirmation: one version, leases 45 then 0.
    EXPECT_EQ(pushed.back(), h.pushed_version()) << h.host_id();
    EXPECT_EQ(pushed[pushed.size() - 2], h.pushed_version()) << h.host_id();
    EXPECT_EQ(leases[leases.size() - 2], 45u) << h.host_id();
    EXPECT_EQ(leases.back(), 0u) << h.host_id();
    auto hi = fleet_->GetHost(h.host_id());
    ASSERT_TRUE(hi.ok());
    EXPECT_EQ(hi->desired_lease_seconds(), 0u);
    EXPECT_EQ(hi->desired_version(), h.pushed_version());
  }
}

TEST_F(RolloutTest, TheDefaultLeaseIsThreeHundredSecondsAndARestoreIsFinal) {
  auto c = ApprovedChange(100);
  ASSERT_TRUE(c.ok()) << c.status();
  const auto [canary, canary_version] = FirstCanary(c->id());
  ASSERT_FALSE(canary.empty());
  EXPECT_EQ(agents_[canary]->leases().back(), 300u);
  // A restore is final: rolled back by hand, every touched host's last push has no lease.
  ASSERT_TRUE(Act("rollback", c->id(), {"bob", false}).ok());
  Tick();
  const v1::Change back = Get(c->id());
  for (const v1::HostTarget& h : back.hosts()) {
    if (h.pushed_version().empty()) continue;
    EXPECT_EQ(agents_[h.host_id()]->leases().back(), 0u) << h.host_id();
  }
}

// A host that gave up the canary's set when its lease expired (it lost the
// controller) rolls the change back, rule "lease_expired": not a verdict on
// the values, which may be proposed again at once.
TEST_F(RolloutTest, ALeaseThatExpiredOnACanaryHostRollsBackWithoutRejectingTheValues) {
  auto c = ApprovedChange(50);
  ASSERT_TRUE(c.ok()) << c.status();
  const auto [canary, canary_version] = FirstCanary(c->id());
  ASSERT_FALSE(canary.empty());
  google::protobuf::RepeatedPtrField<v1::GuardEvent> events;
  v1::GuardEvent* e = events.Add();
  e->set_kind("lease_expired");
  e->set_detail("no stream to the controller for 5m1s (the set's lease is 5m)");
  e->set_restored_version("baseline");
  e->set_judged_version(canary_version);
  fleet_->HandleGuardEvents(canary, events);
  manager_->loop().RunSync([] {});
  v1::Change now = Get(c->id());
  EXPECT_EQ(now.state(), v1::ROLLED_BACK);
  EXPECT_EQ(now.verdicts(now.verdicts_size() - 1).rule(), "lease_expired");
  EXPECT_THAT(now.verdicts(now.verdicts_size() - 1).summary(), HasSubstr(canary));
  EXPECT_EQ(Metric("rocetune_controller_changes_rolled_back_total{reason=lease_expired,}"), 1);
  EXPECT_EQ(Metric("rocetune_controller_judge_verdicts_total{verdict=FAIL,}"), 0);
  for (const v1::HostTarget& h : now.hosts()) {
    if (h.host_id() == canary) {
      EXPECT_THAT(h.rejected(), HasSubstr("lease expired"));
    }
  }
  auto again = Propose(50, {"carol", false});
  EXPECT_TRUE(again.ok()) << again.status();
}

// Issue 28 item 9: min_canary_hosts puts 8 of 32 hosts in a 10% canary, so
// a 0.2 stage (7 hosts) adds nobody. Such a stage is skipped (no bake, no transition):
// after the canary the change goes straight to the stage that adds hosts.
TEST_F(RolloutTest, AStageThatAddsNoHostIsSkipped) {
  ApplyPolicy(
      absl::StrReplaceAll(PolicyText(), {{"canary_fraction: 0.25", "canary_fraction: 0.1"},
                                         {"stages: [ 0.5, 1.0 ]", "stages: [ 0.2, 0.5, 1.0 ]"}}));
  Run(6);
  auto c = Propose(100);
  ASSERT_TRUE(c.ok()) << c.status();
  int stage1 = 0;
  for (const auto& h : c->hosts()) stage1 += h.stage() == 1 ? 1 : 0;
  ASSERT_EQ(stage1, 0) << "the plan should leave stage 1 empty";
  ASSERT_TRUE(Act("approve", c->id(), {"bob", false}).ok());
  Tick();
  Run(30);
  v1::Change now = Get(c->id());
  ASSERT_EQ(now.state(), v1::DONE) << now.DebugString().substr(0, 3000);
  std::vector<uint32_t> stages;
  for (const auto& t : now.transitions()) {
    if (t.to() == v1::STAGE) stages.push_back(t.stage());
  }
  EXPECT_THAT(stages, ::testing::ElementsAre(2, 3));
  for (const auto& v : now.verdicts()) EXPECT_NE(v.stage(), 1u) << "an empty stage was baked";
}

TEST_F(RolloutTest, RegressionOnTheCanaryRollsBackEveryTouchedHost) {
  auto c = ApprovedRegression();
  ASSERT_TRUE(c.ok()) << c.status();
  const absl::Time canary_start = clock_.Now();
  for (int i = 0; i < 12 && Get(c->id()).state() == v1::CANARY; ++i) Run(1);
  v1::Change now = Get(c->id());
  ASSERT_EQ(now.state(), v1::ROLLED_BACK);
  // Within two judge windows (a look is bake / looks = 2 s) plus the partial
  // window the canary started in.
  EXPECT_LE(clock_.Now() - canary_start, absl::Seconds(5));
  for (const std::string& h : hosts_) EXPECT_NE(DesiredValue(h), 2) << h;
  for (const auto& h : now.hosts()) {
    if (h.role() == v1::HostTarget::CANARY) {
      EXPECT_EQ(agents_[h.host_id()]->Param("rpg_time_reset", 0), 300);
    }
  }
  const v1::Verdict& v = now.verdicts(now.verdicts_size() - 1);
  EXPECT_EQ(v.outcome(), v1::Verdict::FAIL);
  const v1::AuditEntry newest = NewestAudit(c->id());
  EXPECT_EQ(newest.action(), "change_rolled_back");
  EXPECT_THAT(newest.reason(), HasSubstr("FAIL"));
  EXPECT_EQ(Metric("rocetune_controller_changes_rolled_back_total{reason=" +
                   (v.rule() == "fabric_regression" ? std::string("fabric_regression")
                                                    : std::string("judge_fail")) +
                   ",}"),
            1);
  EXPECT_EQ(Metric("rocetune_controller_judge_verdicts_total{verdict=FAIL,}"), 1);
  EXPECT_EQ(Metric("rocetune_controller_change_transitions_total{to_state=ROLLED_BACK,}"), 1);
  // Issue 28 item 9: every restore push acked after the change ended counts
  // on it (change show: "restored 8 of 8"), in memory and in the store.
  Run(1);
  now = Get(c->id());
  int restored = 0;
  for (const auto& h : now.hosts()) {
    if (h.pushed_version().empty()) continue;
    EXPECT_EQ(h.acked_version(), h.pushed_version()) << h.host_id();
    ++restored;
  }
  EXPECT_GT(restored, 0);
  absl::StatusOr<std::vector<v1::Change>> stored = store_->LoadChanges();
  ASSERT_TRUE(stored.ok());
  bool found = false;
  for (const v1::Change& sc : *stored) {
    if (sc.id() != c->id()) continue;
    found = true;
    for (const auto& h : sc.hosts()) {
      if (!h.pushed_version().empty()) {
        EXPECT_EQ(h.acked_version(), h.pushed_version());
      }
    }
  }
  EXPECT_TRUE(found) << "the rolled-back change is not in the store";
}

// Issue 25 item 2: a rollback is a tracked operation. A canary host that
// refuses its restore (NACK) keeps the bad set: change show names it failed,
// and once the bound has passed without a confirmation the gauge counts it
// and one audit row (restore_unconfirmed) names it, and no more rows follow.
TEST_F(RolloutTest, ARestoreNotConfirmedWithinTheBoundIsCountedAndAuditedOnce) {
  auto c = ApprovedRegression();
  ASSERT_TRUE(c.ok()) << c.status();
  const auto [refuser, pushed] = FirstCanary(c->id());
  ASSERT_FALSE(refuser.empty());
  agents_[refuser]->NackNext();  // the next push to it, its restore, is refused
  for (int i = 0; i < 12 && Get(c->id()).state() == v1::CANARY; ++i) Run(1);
  ASSERT_EQ(Get(c->id()).state(), v1::ROLLED_BACK);
  Run(1);
  v1::Change now = Get(c->id());
  for (const auto& h : now.hosts()) {
    if (h.pushed_version().empty()) continue;
    if (h.host_id() == refuser) {
      EXPECT_NE(h.acked_version(), h.pushed_version());
      EXPECT_THAT(h.rejected(), HasSubstr("restore NACK: mlx5_0"));
    } else {
      EXPECT_EQ(h.acked_version(), h.pushed_version()) << h.host_id();
    }
  }
  EXPECT_EQ(agents_[refuser]->Param("rpg_time_reset", 0), 2)
      << "the refuser keeps the change's set";
  // Within the bound: the refusal counts at once; the audit row waits for it.
  EXPECT_EQ(Metric("rocetune_controller_restores_unconfirmed{}"), 1);
  EXPECT_NE(NewestAudit(c->id()).action(), "restore_unconfirmed");
  Run(12);
  EXPECT_EQ(Metric("rocetune_controller_restores_unconfirmed{}"), 1);
  const v1::AuditEntry row = NewestAudit(c->id());
  EXPECT_EQ(row.action(), "restore_unconfirmed");
  EXPECT_EQ(row.actor(), "controller");
  EXPECT_THAT(row.reason(), HasSubstr("1 host(s) did not confirm the restore of " + c->id()));
  EXPECT_THAT(row.reason(), HasSubstr(refuser + " (restore NACK: mlx5_0"));
  Run(5);
  v1::ListAuditRequest r;
  r.set_change_id(c->id());
  absl::StatusOr<v1::ListAuditResponse> audit = store_->QueryAudit(r);
  ASSERT_TRUE(audit.ok());
  int rows = 0;
  for (const v1::AuditEntry& e : audit->entries()) rows += e.action() == "restore_unconfirmed";
  EXPECT_EQ(rows, 1);
  // A later change holds the host (PROPOSED, nothing pushed yet): a NACK of the
  // restore still lands on the change that pushed it.
  auto next = Propose(100);
  ASSERT_TRUE(next.ok()) << next.status();
  std::string restore_version;
  const v1::Change ended = Get(c->id());
  for (const auto& h : ended.hosts()) {
    if (h.host_id() == refuser) restore_version = h.pushed_version();
  }
  manager_->OnNack(refuser, restore_version, "mlx5_0: still read-only");
  Tick();
  const v1::Change after = Get(c->id());
  for (const auto& h : after.hosts()) {
    if (h.host_id() == refuser) {
      EXPECT_EQ(h.rejected(), "restore NACK: mlx5_0: still read-only");
    }
  }
  const v1::Change proposal = Get(next->id());
  EXPECT_EQ(proposal.verdicts_size(), 0) << "the proposal is not failed by it";
}

// Issue 28 item 5: c-2 DONE; c-3 on the same hosts rolled back by the judge
// restores c-2's set, as a new desired version. Rolling back c-2 was refused
// ("roll back the later change first", which c-3, already rolled back, could
// not be): the check compared version numbers, not the set the host holds.
TEST_F(RolloutTest, ADoneChangeCanBeRolledBackAfterALaterChangeOnItsHostsWasRolledBack) {
  ApplyPolicy(PolicyText());
  factor_ = [](int64_t v) { return v == 2 ? 1.6 : 1.0; };
  Run(6);
  auto done = Propose(100);
  ASSERT_TRUE(done.ok()) << done.status();
  ASSERT_TRUE(Act("approve", done->id(), {"bob", false}).ok());
  Tick();
  Run(30);
  ASSERT_EQ(Get(done->id()).state(), v1::DONE);
  Run(6);
  auto bad = Propose(2);
  ASSERT_TRUE(bad.ok()) << bad.status();
  ASSERT_TRUE(Act("approve", bad->id(), {"bob", false}).ok());
  Tick();
  for (int i = 0; i < 12 && Get(bad->id()).state() == v1::CANARY; ++i) Run(1);
  ASSERT_EQ(Get(bad->id()).state(), v1::ROLLED_BACK);
  for (const std::string& h : hosts_) ASSERT_EQ(DesiredValue(h), 100) << h;
  auto back = Act("rollback", done->id(), {"carol", false});
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->state(), v1::ROLLED_BACK);
  for (const std::string& h : hosts_) EXPECT_EQ(DesiredValue(h), 300) << h;
  // Under a later change still in force, rolling back is still refused.
  std::vector<std::string> ids;
  for (int64_t value : {150, 200}) {
    Run(6);
    auto c = Propose(value);
    ASSERT_TRUE(c.ok()) << c.status();
    ASSERT_TRUE(Act("approve", c->id(), {"bob", false}).ok());
    Tick();
    Run(30);
    ASSERT_EQ(Get(c->id()).state(), v1::DONE);
    ids.push_back(c->id());
  }
  auto refused = Act("rollback", ids[0], {"carol", false});
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(refused.status().message(), HasSubstr("roll back the later change first"));
}

TEST_F(RolloutTest, GuardEventOnACanaryHostRollsBackAndTheSetIsNeverRepushed) {
  ApplyPolicy(PolicyText());
  Run(6);
  auto c = Propose(50);
  ASSERT_TRUE(c.ok());
  ASSERT_TRUE(Act("approve", c->id(), {"bob", false}).ok());
  Tick();
  const auto [canary, canary_version] = FirstCanary(c->id());
  ASSERT_FALSE(canary.empty());
  google::protobuf::RepeatedPtrField<v1::GuardEvent> events;
  v1::GuardEvent* e = events.Add();
  e->set_kind("pfc_pause_guard");
  e->set_detail("mlx5_0 port 1 prio 3 paused 45% of 1 s");
  e->set_restored_version("baseline");
  fleet_->HandleGuardEvents(canary, events);
  manager_->loop().RunSync([] {});
  EXPECT_EQ(Get(c->id()).state(), v1::ROLLED_BACK);
  EXPECT_EQ(Metric("rocetune_controller_changes_rolled_back_total{reason=guard,}"), 1);
  EXPECT_EQ(Metric("rocetune_controller_judge_verdicts_total{verdict=FAIL,}"), 0);
  auto info = fleet_->GetHost(canary);
  ASSERT_TRUE(info.ok());
  EXPECT_THAT(info->rejected_versions(), ::testing::Contains(canary_version));
  // Reconnect: what is pushed is the rollback's version, never the rejected one.
  v1::Hello h;
  h.set_host_id(canary);
  (*h.mutable_labels())["rack"] = absl::StrCat("r", rack_of_[canary]);
  (*h.mutable_labels())["role"] = "trainer";
  auto again = std::make_shared<FakeAgent>(++stream_, fleet_.get(), canary);
  ASSERT_TRUE(fleet_->Register(h, again).ok());
  for (const std::string& v : again->pushed()) EXPECT_NE(v, canary_version);
}

// An agent's guard names the version it judged: an event about another set
// (an earlier change's, arriving late) does not fail this change; one about
// this change's set does. The policy's local_guard_rounds travels in the sets.
TEST_F(RolloutTest, OnlyAGuardEventAboutTheChangesOwnSetFailsIt) {
  ApplyPolicy(absl::StrReplaceAll(PolicyText(), {{"min_rack_pairs: 6",
                                                  "min_rack_pairs: 6 "
                                                  "local_guard_rounds: 3"}}));
  Run(6);
  auto c = Propose(50);
  ASSERT_TRUE(c.ok()) << c.status();
  for (const v1::HostTarget& h : c->hosts()) {
    EXPECT_EQ(h.target().local_guard().rounds_over(), 3u) << h.host_id();
  }
  ASSERT_TRUE(Act("approve", c->id(), {"bob", false}).ok());
  Tick();
  const auto [canary, canary_version] = FirstCanary(c->id());
  ASSERT_FALSE(canary.empty());
  google::protobuf::RepeatedPtrField<v1::GuardEvent> events;
  v1::GuardEvent* e = events.Add();
  e->set_kind("cnp_rate_guard");
  e->set_detail("mlx5_0 port 1 cnp_handled: 2000000/s > 1000000/s");
  e->set_restored_version("baseline");
  e->set_judged_version(absl::StrCat(canary_version, "-older"));
  fleet_->HandleGuardEvents(canary, events);
  manager_->loop().RunSync([] {});
  EXPECT_EQ(Get(c->id()).state(), v1::CANARY);
  e->set_judged_version(canary_version);
  fleet_->HandleGuardEvents(canary, events);
  manager_->loop().RunSync([] {});
  v1::Change now = Get(c->id());
  EXPECT_EQ(now.state(), v1::ROLLED_BACK);
  EXPECT_EQ(now.verdicts(now.verdicts_size() - 1).rule(), "local_guard");
}

// A policy's observe_only reaches the fleet: drift on the hosts it selects
// is recorded, never corrected; a later version without it corrects again.
TEST_F(RolloutTest, AnObserveOnlyPolicyStopsDriftCorrectionOnItsHosts) {
  const std::string host = hosts_.front();
  v1::ParameterSet set;
  v1::DeviceParameters* d = set.add_devices();
  d->set_device("mlx5_0");
  (*d->mutable_dcqcn())["rpg_time_reset"] = 300;
  ASSERT_TRUE(fleet_->SetDesiredState(host, set).ok());
  google::protobuf::RepeatedPtrField<v1::GuardEvent> events;
  v1::GuardEvent* e = events.Add();
  e->set_kind("drift");
  e->set_detail("mlx5_0/rpg_time_reset: expected 300, found 777");
  v1::DriftedParameter* p = e->add_drifted();
  p->set_device("mlx5_0");
  p->set_parameter("rpg_time_reset");
  p->set_expected(300);
  p->set_found(777);

  ApplyPolicy(absl::StrCat("observe_only: true\n", PolicyText()));
  const size_t before = agents_[host]->pushed().size();
  fleet_->HandleGuardEvents(host, events);
  EXPECT_EQ(agents_[host]->pushed().size(), before) << "observe-only: not corrected";
  EXPECT_THAT(fleet_->GetHost(host)->drift(0), HasSubstr("found 777"));

  ApplyPolicy(PolicyText());  // a new version, observe_only off
  fleet_->HandleGuardEvents(host, events);
  EXPECT_EQ(agents_[host]->pushed().size(), before + 1) << "corrected again";
}

// With roles in force, a policy needing approvers the roles file cannot
// supply (the proposer cannot approve its own change) is refused at proposal,
// not left PROPOSED until it expires.
TEST_F(RolloutTest, AProposalNoOtherIdentityCanApproveIsRefused) {
  ApplyPolicy(PolicyText(/*approvers=*/2));
  Run(6);
  auto roles = [](std::vector<std::string> approvers) {
    v1::RolesConfig config;
    v1::RoleBinding* b = config.add_binding();
    b->set_role("operator");
    b->add_identity("alice");
    v1::RoleBinding* a = config.add_binding();
    a->set_role("approver");
    for (const std::string& id : approvers) a->add_identity(id);
    absl::StatusOr<std::unique_ptr<Authorizer>> az = Authorizer::FromConfig(config, "roles.txtpb");
    EXPECT_TRUE(az.ok()) << az.status();
    return *std::move(az);
  };
  const Identity alice{"alice", true};
  std::unique_ptr<Authorizer> az = roles({"alice", "bob"});
  manager_->loop().RunSync([&] { manager_->set_authorizer(az.get()); });
  auto refused = Propose(40, alice);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(refused.status().message(),
              HasSubstr("needs 2 approvals from identities other than the proposer \"alice\""));
  EXPECT_THAT(refused.status().message(), HasSubstr("1 other (bob)"));
  auto listed = OnExec<absl::StatusOr<v1::ListChangesResponse>>(
      [&] { return manager_->ListChanges(v1::ListChangesRequest()); });
  ASSERT_TRUE(listed.ok());
  EXPECT_EQ(listed->changes_size(), 0) << "nothing stored for a refused proposal";
  // A second approver, or a prefix pattern, makes it possible.
  az = roles({"bob", "carol"});
  manager_->loop().RunSync([&] { manager_->set_authorizer(az.get()); });
  auto ok = Propose(40, alice);
  ASSERT_TRUE(ok.ok()) << ok.status();
  ASSERT_TRUE(Act("reject", ok->id(), {"bob", true}).ok());
  az = roles({"ops-*"});
  manager_->loop().RunSync([&] { manager_->set_authorizer(az.get()); });
  EXPECT_TRUE(Propose(42, alice).ok());
  // Declared (unauthenticated) identities: roles are not enforced, no check.
  manager_->loop().RunSync([&] { manager_->set_authorizer(nullptr); });
}

TEST_F(RolloutTest, NackOnACanaryHostRollsBack) {
  ApplyPolicy(PolicyText());
  Run(6);
  auto c = Propose(40);
  ASSERT_TRUE(c.ok());
  for (const auto& h : c->hosts()) {
    if (h.role() == v1::HostTarget::CANARY) {
      agents_[h.host_id()]->NackNext();
      break;
    }
  }
  ASSERT_TRUE(Act("approve", c->id(), {"bob", false}).ok());
  Tick();
  manager_->loop().RunSync([] {});
  v1::Change now = Get(c->id());
  EXPECT_EQ(now.state(), v1::ROLLED_BACK);
  EXPECT_EQ(now.verdicts(now.verdicts_size() - 1).rule(), "nack");
  for (const std::string& h : hosts_) EXPECT_NE(DesiredValue(h), 40);
  EXPECT_EQ(Metric("rocetune_controller_changes_rolled_back_total{reason=nack,}"), 1);
  EXPECT_EQ(Metric("rocetune_controller_changes_rolled_back_total{reason=judge_fail,}"), 0);
}

TEST_F(RolloutTest, ThinDataHoldsAndAHoldPastTheLimitAborts) {
  ApplyPolicy(PolicyText(1, 4));
  auto c = Propose(100);
  ASSERT_TRUE(c.ok());
  ASSERT_TRUE(Act("approve", c->id(), {"bob", false}).ok());
  Tick();
  ASSERT_EQ(Get(c->id()).state(), v1::CANARY);
  // No telemetry at all: HOLD, never PASS; then the limit aborts.
  for (int i = 0; i < 20; ++i) {
    clock_.Advance(absl::Seconds(1));
    Tick();
  }
  v1::Change now = Get(c->id());
  EXPECT_EQ(now.state(), v1::ABORTED);
  for (const auto& v : now.verdicts()) EXPECT_NE(v.outcome(), v1::Verdict::PASS);
  EXPECT_EQ(Metric("rocetune_controller_changes_rolled_back_total{reason=hold_timeout,}"), 1);
  EXPECT_GE(Metric("rocetune_controller_judge_verdicts_total{verdict=HOLD,}"), 1);
  EXPECT_EQ(Metric("rocetune_controller_judge_verdicts_total{verdict=PASS,}"), 0);
  EXPECT_EQ(Metric("rocetune_controller_changes{state=ABORTED,}"), 1);
  for (const std::string& h : hosts_) EXPECT_NE(DesiredValue(h), 100);
}

// A store that cannot write (disk full, read-only) must not stop the HOLD
// clock: the limit runs in memory, the abort is retried while it cannot be
// stored, and it lands at the first tick after writes succeed again (before,
// the HOLD start was only kept when its verdict was stored, so the clock
// started over once space came back).
TEST_F(RolloutTest, AStoreThatCannotWriteDoesNotStopTheHoldLimit) {
  ApplyPolicy(PolicyText(1, 4));
  int store_errors = 0;
  store_->set_error_observer([&](const absl::Status&) { ++store_errors; });
  auto c = Propose(100);
  ASSERT_TRUE(c.ok());
  ASSERT_TRUE(Act("approve", c->id(), {"bob", false}).ok());
  Tick();
  ASSERT_EQ(Get(c->id()).state(), v1::CANARY);
  ASSERT_TRUE(store_->ExecForTest("PRAGMA query_only = 1").ok());
  // No telemetry: HOLD at every look past the plan, 20 s against a 4 s limit.
  for (int i = 0; i < 20; ++i) {
    clock_.Advance(absl::Seconds(1));
    Tick();
  }
  v1::Change during = Get(c->id());
  EXPECT_EQ(during.state(), v1::CANARY) << "the abort cannot be stored yet";
  EXPECT_NE(during.hold_since_unix_nanos(), 0) << "the HOLD clock runs in memory";
  EXPECT_GT(Metric("rocetune_controller_change_hold_seconds{}"), 4);
  EXPECT_GT(store_errors, 0);
  ASSERT_TRUE(store_->ExecForTest("PRAGMA query_only = 0").ok());
  // The next look after writes succeed aborts; the HOLD clock did not restart.
  for (int i = 0; i < 3 && Get(c->id()).state() == v1::CANARY; ++i) {
    clock_.Advance(absl::Seconds(1));
    Tick();
  }
  v1::Change after = Get(c->id());
  EXPECT_EQ(after.state(), v1::ABORTED);
  EXPECT_EQ(Metric("rocetune_controller_changes_rolled_back_total{reason=hold_timeout,}"), 1);
  for (const std::string& h : hosts_) EXPECT_NE(DesiredValue(h), 100);
}

TEST_F(RolloutTest, RestartDuringTheCanaryResumesTheBakeWithThePersistedBaseline) {
  ApplyPolicy(PolicyText());
  Run(6);
  auto c = Propose(100);
  ASSERT_TRUE(c.ok());
  ASSERT_TRUE(Act("approve", c->id(), {"bob", false}).ok());
  Tick();
  Run(2);
  ASSERT_EQ(Get(c->id()).state(), v1::CANARY);
  Close();
  clock_.Advance(absl::Seconds(3));  // the controller is down for a while
  Open();
  // The telemetry before the restart is gone with the process; the baseline
  // comes from the store.
  v1::Change now = Get(c->id());
  ASSERT_EQ(now.state(), v1::CANARY) << now.DebugString().substr(0, 2000);
  auto audit = store_->QueryAudit([&] {
    v1::ListAuditRequest r;
    r.set_change_id(c->id());
    r.set_newest_first(true);
    return r;
  }());
  ASSERT_TRUE(audit.ok());
  ASSERT_GT(audit->entries_size(), 0);
  EXPECT_EQ(audit->entries(0).action(), "change_resumed");
  EXPECT_THAT(audit->entries(0).reason(), HasSubstr("resumed with the baseline persisted"));
  // The history shows the resume: CANARY -> CANARY by the controller.
  const v1::ChangeTransition& resumed = now.transitions(now.transitions_size() - 1);
  EXPECT_EQ(resumed.from(), v1::CANARY);
  EXPECT_EQ(resumed.to(), v1::CANARY);
  EXPECT_EQ(resumed.actor(), "controller");
  EXPECT_THAT(resumed.reason(), HasSubstr("restarted"));
  // Without reports the resumed bake does not start: no verdict yet.
  const int verdicts = now.verdicts_size();
  for (int i = 0; i < 3; ++i) {
    clock_.Advance(absl::Seconds(1));
    Tick();
  }
  EXPECT_EQ(Get(c->id()).verdicts_size(), verdicts);
  Connect();
  for (int i = 0; i < 40 && Get(c->id()).state() != v1::DONE; ++i) Run(1);
  now = Get(c->id());
  EXPECT_EQ(now.state(), v1::DONE) << now.DebugString().substr(0, 3000);
  for (const std::string& h : hosts_) EXPECT_EQ(DesiredValue(h), 100) << h;
  EXPECT_LE(Metric("rocetune_controller_changes_rolled_back_total{reason=restart,}"), 0);
  EXPECT_LE(Metric("rocetune_controller_change_transitions_total{to_state=CANARY,}"), 0)
      << "a resume does not count as entering CANARY";
  auto chain = store_->VerifyAudit();
  ASSERT_TRUE(chain.ok());
  EXPECT_TRUE(chain->ok()) << chain->problem();
}

TEST_F(RolloutTest, ARegressionFoundAfterAResumedCanaryIsRolledBack) {
  ApplyPolicy(PolicyText());
  factor_ = [](int64_t v) { return v == 2 ? 1.6 : 1.0; };  // tail +60%
  Run(6);
  auto c = Propose(2);
  ASSERT_TRUE(c.ok());
  ASSERT_TRUE(Act("approve", c->id(), {"bob", false}).ok());
  Tick();
  ASSERT_EQ(Get(c->id()).state(), v1::CANARY);
  Close();
  Open();
  Connect();
  ASSERT_EQ(Get(c->id()).state(), v1::CANARY);
  // Only the persisted baseline holds the canary's p99 before the change.
  for (int i = 0; i < 15 && Get(c->id()).state() == v1::CANARY; ++i) Run(1);
  v1::Change now = Get(c->id());
  ASSERT_EQ(now.state(), v1::ROLLED_BACK) << now.DebugString().substr(0, 3000);
  EXPECT_EQ(now.verdicts(now.verdicts_size() - 1).outcome(), v1::Verdict::FAIL);
  EXPECT_THAT(now.transitions(now.transitions_size() - 1).actor(), "judge");
  for (const std::string& h : hosts_) EXPECT_NE(DesiredValue(h), 2) << h;
}

TEST_F(RolloutTest, RestartAtTheLastStageKeepsTheFleetBaseline) {
  tx_bytes_ = [this](const std::string&) {
    size_t with = 0;
    for (const std::string& h : hosts_) with += agents_[h]->Param("rpg_time_reset", 300) == 8;
    return with == hosts_.size() ? 6'500'000'000ull : 10'000'000'000ull;
  };
  auto c = ApprovedChange(8);
  ASSERT_TRUE(c.ok()) << c.status();
  RunUntilStage(c->id(), 2);
  ASSERT_EQ(Get(c->id()).stage(), 2u);
  Restart();
  ASSERT_EQ(Get(c->id()).state(), v1::STAGE);
  for (int i = 0; i < 20 && Get(c->id()).state() == v1::STAGE; ++i) Run(1);
  v1::Change now = Get(c->id());
  ASSERT_EQ(now.state(), v1::ROLLED_BACK) << now.DebugString().substr(0, 3000);
  EXPECT_EQ(now.verdicts(now.verdicts_size() - 1).rule(), "fleet_constraint");
  for (const std::string& h : hosts_) EXPECT_EQ(DesiredValue(h), 300) << h;
}

// The cumulative test at stage 1 reads each host's probes from before the
// canary: after a restart the telemetry is gone, so they come from the
// persisted fleet baseline.
TEST_F(RolloutTest, RestartAtStageOneKeepsThePreChangeProbesForTheCumulativeTest) {
  auto c = ApprovedChange(100);
  ASSERT_TRUE(c.ok()) << c.status();
  RunUntilStage(c->id(), 1);
  ASSERT_EQ(Get(c->id()).stage(), 1u);
  Restart();
  const int before_restart = Get(c->id()).verdicts_size();
  for (int i = 0; i < 20; ++i) {
    const v1::Change now = Get(c->id());
    if (now.state() != v1::STAGE || now.stage() != 1) break;
    Run(1);
  }
  const v1::Change now = Get(c->id());
  bool cumulative = false;
  for (int i = before_restart; i < now.verdicts_size(); ++i) {
    const v1::Verdict& v = now.verdicts(i);
    if (v.stage() == 1) cumulative |= FindEvidence(v, "cumulative_ln_p99_did") != nullptr;
  }
  EXPECT_TRUE(cumulative) << now.DebugString().substr(0, 3000);
}

TEST_F(RolloutTest, RestartWithoutAPersistedBaselineRollsBackConsistently) {
  ApplyPolicy(PolicyText());
  Run(6);
  auto c = Propose(100);
  ASSERT_TRUE(c.ok());
  ASSERT_TRUE(Act("approve", c->id(), {"bob", false}).ok());
  Tick();
  ASSERT_EQ(Get(c->id()).state(), v1::CANARY);
  Close();
  {
    // As a database written before step baselines were kept.
    auto store = Store::Open(dir_);
    ASSERT_TRUE(store.ok());
    ASSERT_TRUE((*store)->ExecForTest("DELETE FROM step_baselines").ok());
  }
  Open();
  Connect();
  v1::Change now = Get(c->id());
  EXPECT_EQ(now.state(), v1::ROLLED_BACK);
  EXPECT_THAT(now.transitions(now.transitions_size() - 1).reason(), HasSubstr("restarted"));
  EXPECT_EQ(Metric("rocetune_controller_changes_rolled_back_total{reason=restart,}"), 1);
  EXPECT_EQ(Metric("rocetune_controller_changes{state=ROLLED_BACK,}"), 1);
  for (const std::string& h : hosts_) EXPECT_NE(DesiredValue(h), 100);
}

TEST_F(RolloutTest, ApprovalsCountDistinctIdentities) {
  ApplyPolicy(PolicyText(2));
  auto c = Propose(100);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->approvals_required(), 2);
  ASSERT_TRUE(Act("approve", c->id(), {"bob", false}).ok());
  EXPECT_EQ(Act("approve", c->id(), {"bob", false}).status().code(),
            absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(Get(c->id()).state(), v1::PROPOSED);
  auto second = Act("approve", c->id(), {"carol", true});
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(second->state(), v1::APPROVED);
  EXPECT_TRUE(second->approvals(1).authenticated());
  EXPECT_FALSE(second->approvals(0).authenticated());
}

// Issue 25 item 3: values a judge FAIL rolled back are not proposed again
// by accident (an override with a reason is audited) nor trialled again by a
// campaign (the trial is recorded as rejected_before, not run).
TEST_F(RolloutTest, ValuesRolledBackOnAFailAreRefusedUnlessOverriddenAndNotTrialledAgain) {
  ApplyPolicy(PolicyText());
  factor_ = [](int64_t v) { return v == 150 || v == 600 ? 1.6 : 1.0; };  // tail +60%
  Run(6);
  std::vector<std::string> failed;
  for (int64_t value : {150, 600}) {
    auto c = Propose(value);
    ASSERT_TRUE(c.ok()) << c.status();
    ASSERT_TRUE(Act("approve", c->id(), {"bob", false}).ok());
    Tick();
    for (int i = 0; i < 12 && Get(c->id()).state() == v1::CANARY; ++i) Run(1);
    ASSERT_EQ(Get(c->id()).state(), v1::ROLLED_BACK);
    failed.push_back(c->id());
    Run(3);
  }
  auto again = Propose(150);
  EXPECT_EQ(again.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(again.status().message(), HasSubstr(failed[0]));
  EXPECT_THAT(again.status().message(), HasSubstr("--override-rejected"));
  // Other values are not affected.
  auto other = Propose(160);
  ASSERT_TRUE(other.ok()) << other.status();
  ASSERT_TRUE(Act("reject", other->id(), {"bob", false}).ok());
  auto overridden = OnExec<absl::StatusOr<v1::Change>>([&] {
    v1::ProposeChangeRequest req;
    req.set_policy_name("test-policy");
    (*req.mutable_knobs())["rpg_time_reset"] = 600;
    req.set_reason("retry on the new firmware");
    req.set_override_rejected("firmware 28.41 fixed the CNP handling");
    return manager_->Propose(req, Identity{"alice", false});
  });
  ASSERT_TRUE(overridden.ok()) << overridden.status();
  const v1::AuditEntry row = NewestAudit(overridden->id());
  EXPECT_EQ(row.action(), "change_propose");
  EXPECT_THAT(row.detail(), HasSubstr(absl::StrCat("overrides the rollback of ", failed[1],
                                                   ": firmware 28.41 fixed the CNP handling")));
  ASSERT_TRUE(Act("reject", overridden->id(), {"bob", false}).ok());
  // A campaign from 300 (log-scale steps of 2) tries 150 and 600 first: both
  // are skipped as rejected before, without a change or a push.
  auto t = StartCampaign({"alice", false});
  ASSERT_TRUE(t.ok()) << t.status();
  ASSERT_TRUE(ApproveCampaign(t->id(), {"bob", false}).ok());
  v1::Campaign now;
  for (int i = 0; i < 400; ++i) {
    Run(1);
    now = GetCampaign(t->id());
    if (now.state() != v1::Campaign::RUNNING) break;
    for (const std::string& h : hosts_) {
      EXPECT_NE(DesiredValue(h), 150) << h;
      EXPECT_NE(DesiredValue(h), 600) << h;
    }
  }
  int skipped = 0;
  for (const v1::Trial& tr : now.trials()) {
    const int64_t v = tr.knobs().at("rpg_time_reset");
    if (v != 150 && v != 600) continue;
    EXPECT_EQ(tr.outcome(), "rejected_before") << tr.DebugString();
    EXPECT_TRUE(tr.change_id().empty());
    EXPECT_THAT(tr.note(), HasSubstr(v == 150 ? failed[0] : failed[1]));
    ++skipped;
  }
  EXPECT_GE(skipped, 1) << now.DebugString();
  EXPECT_EQ(Metric("rocetune_controller_campaign_trials_total{outcome=rejected_before,}"), skipped);
}

TEST_F(RolloutTest, CampaignTrialsRunCanaryOnlyAndPromotionNeedsApproval) {
  ApplyPolicy(PolicyText());
  factor_ = TailShrinksWithTimeReset;
  Run(6);
  auto t = StartCampaign({"alice", true});
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->start().at("rpg_time_reset"), 300);
  EXPECT_TRUE(t->proposer_authenticated());
  auto self = ApproveCampaign(t->id(), {"alice", false});
  EXPECT_EQ(self.status().code(), absl::StatusCode::kPermissionDenied);
  auto ok = ApproveCampaign(t->id(), {"bob", false});
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(ok->state(), v1::Campaign::RUNNING);
  v1::Campaign now;
  for (int i = 0; i < 400; ++i) {
    Run(1);
    now = GetCampaign(t->id());
    if (now.state() != v1::Campaign::RUNNING) break;
    // Only canary hosts ever run a trial's values.
    for (const std::string& h : hosts_) {
      const std::string holder = manager_->ActiveChangeOf(h);
      if (holder.empty()) {
        EXPECT_TRUE(DesiredValue(h) == -1 || DesiredValue(h) == 300) << h;
      }
    }
  }
  ASSERT_EQ(now.state(), v1::Campaign::FINISHED) << now.DebugString();
  int searched = 0;
  for (const v1::Trial& tr : now.trials()) searched += tr.confirms() == 0 ? 1 : 0;
  EXPECT_LE(searched, 8) << "the budget counts the search's trials";
  EXPECT_LT(now.best().at("rpg_time_reset"), 300);
  // A trial is labelled improved against the incumbent of its time, as the
  // tuner decides: each improved trial beats the one before by its own bar,
  // and the last is the campaign's best.
  double incumbent = 1.0;
  const v1::Trial* last_improved = nullptr;
  for (const v1::Trial& tr : now.trials()) {
    if (tr.outcome() != "improved") continue;
    EXPECT_LT(tr.objective_ratio(), incumbent * (1 - tr.min_improvement())) << tr.DebugString();
    incumbent = tr.objective_ratio();
    last_improved = &tr;
  }
  ASSERT_NE(last_improved, nullptr) << now.DebugString();
  EXPECT_EQ(last_improved->knobs().at("rpg_time_reset"), now.best().at("rpg_time_reset"));
  EXPECT_DOUBLE_EQ(now.best_objective_ratio(), last_improved->objective_ratio());
  // Every trial ended once and was counted under its outcome; trials are not rollbacks.
  std::map<std::string, int> outcomes;
  for (const v1::Trial& tr : now.trials()) ++outcomes[tr.outcome()];
  for (const auto& [outcome, n] : outcomes) {
    EXPECT_EQ(Metric("rocetune_controller_campaign_trials_total{outcome=" + outcome + ",}"), n)
        << outcome;
  }
  for (const char* reason : {"judge_fail", "fabric_regression", "manual"}) {
    EXPECT_EQ(Metric(std::string("rocetune_controller_changes_rolled_back_total{reason=") + reason +
                     ",}"),
              0)
        << reason;
  }
  ASSERT_FALSE(now.promotion_change_id().empty());
  v1::Change promo = Get(now.promotion_change_id());
  EXPECT_EQ(promo.state(), v1::PROPOSED);
  EXPECT_FALSE(promo.canary_only());
  // Proposed under the campaign proposer's verified identity.
  EXPECT_EQ(promo.proposer(), "alice");
  EXPECT_TRUE(promo.proposer_authenticated());
  EXPECT_EQ(Act("approve", promo.id(), {"alice", false}).status().code(),
            absl::StatusCode::kPermissionDenied);
  // The promotion is an ordinary change: canary, stages, DONE on every host.
  ASSERT_TRUE(Act("approve", promo.id(), {"bob", false}).ok());
  for (int i = 0; i < 60 && Get(promo.id()).state() != v1::DONE; ++i) Run(1);
  v1::Change done = Get(promo.id());
  EXPECT_EQ(done.state(), v1::DONE) << done.DebugString().substr(0, 2000);
  for (const std::string& h : hosts_) {
    EXPECT_EQ(DesiredValue(h), now.best().at("rpg_time_reset")) << h;
  }
}

TEST(TrialMinImprovementTest, ThePolicysValueElseTheTrialsNoiseAtLeastTheFloor) {
  v1::Policy p;
  EXPECT_DOUBLE_EQ(TrialMinImprovement(p, 0.0), kMinImprovementFloor);
  EXPECT_DOUBLE_EQ(TrialMinImprovement(p, 0.011), kMinImprovementFloor);
  EXPECT_DOUBLE_EQ(TrialMinImprovement(p, 0.073), 0.073);
  p.mutable_tuner()->set_min_improvement(0.03);
  EXPECT_DOUBLE_EQ(TrialMinImprovement(p, 0.073), 0.03);
}

// Issue 24 item 3: a trial is scored against its concurrent control, so what
// moves the whole fleet between a trial's baseline and its bake scores 0.
// The knob does nothing here; every host's p99 tail falls by 30% whenever a
// trial runs (a job phase that happens to line up with the trials). Each
// canary's own before/after shows the fall, and a campaign scored on it (as
// before this change) would promote a winner; scored on the DiD, no trial
// improves and nothing is proposed.
TEST_F(RolloutTest, AFleetWideShiftDuringEveryTrialIsNotCountedAsAGain) {
  ApplyPolicy(absl::StrReplaceAll(PolicyText(), {{" min_improvement: 0.03", ""}}));
  factor_ = [this](int64_t) { return AnyChangeActive() ? 0.7 : 1.0; };
  Run(6);
  const v1::Campaign now = CampaignRun();
  ASSERT_EQ(now.state(), v1::Campaign::FINISHED) << now.DebugString();
  int measured = 0;
  for (const v1::Trial& tr : now.trials()) {
    EXPECT_NE(tr.outcome(), "improved") << tr.DebugString();
    if (tr.outcome() != "not_improved") continue;
    ++measured;
    // The drift was there: the canary's own p99 fell by about 30%...
    EXPECT_LT(tr.own_shift_ratio(), 0.85) << tr.DebugString();
    // ...and the drift-corrected estimate is about 1, inside its interval.
    EXPECT_NEAR(tr.objective_ratio(), 1.0, 0.1) << tr.DebugString();
    EXPECT_LT(tr.objective_lower(), tr.objective_ratio());
    EXPECT_GT(tr.objective_upper(), tr.objective_ratio());
    // Unset in the policy: derived from the trial's own noise, at least 2%.
    EXPECT_GE(tr.min_improvement(), kMinImprovementFloor);
    EXPECT_NEAR(
        tr.min_improvement(),
        std::max(kMinImprovementFloor, 1 - std::sqrt(tr.objective_lower() / tr.objective_upper())),
        1e-9);
  }
  EXPECT_GE(measured, 4) << now.DebugString();
  EXPECT_TRUE(now.promotion_change_id().empty()) << now.DebugString();
  EXPECT_EQ(now.best().at("rpg_time_reset"), 300);
  EXPECT_DOUBLE_EQ(now.best_objective_ratio(), 1.0);
}

// Issue 24 item 3: a trial that HOLDs is run again once with twice the bake
// before it counts as not improved. The canary hosts of the first trial answer
// too few probes for the judge, so it HOLDs; its retry has them all.
TEST_F(RolloutTest, AHoldTrialIsRetriedOnceWithTwiceTheBake) {
  ApplyPolicy(PolicyText());
  factor_ = TailShrinksWithTimeReset;
  std::string first_trial;
  std::set<std::string> first_canary;
  probes_ = [this, &first_trial, &first_canary](const std::string& h) {
    return first_canary.contains(h) && manager_->ActiveChangeOf(h) == first_trial
               ? 5
               : kProbesPerWindow;
  };
  Run(6);
  const std::string id = StartApprovedCampaign();
  ASSERT_FALSE(id.empty());
  const v1::Campaign now = RunCampaign(id, [&](const v1::Campaign& c) {
    if (!first_trial.empty() || c.trials_size() == 0) return;
    first_trial = c.trials(0).change_id();
    const v1::Change trial = Get(first_trial);
    for (const v1::HostTarget& h : trial.hosts()) {
      if (h.role() == v1::HostTarget::CANARY) first_canary.insert(h.host_id());
    }
  });
  ASSERT_EQ(now.state(), v1::Campaign::FINISHED) << now.DebugString();
  ASSERT_GE(now.trials_size(), 3) << now.DebugString();
  const v1::Trial& held = now.trials(0);
  const v1::Trial& retry = now.trials(1);
  EXPECT_EQ(held.outcome(), "hold") << held.DebugString();
  EXPECT_EQ(held.bake_seconds(), 6u);
  EXPECT_EQ(retry.retry_of(), 1u);
  EXPECT_EQ(retry.bake_seconds(), 12u);
  EXPECT_EQ(retry.knobs().at("rpg_time_reset"), held.knobs().at("rpg_time_reset"));
  EXPECT_NE(retry.outcome(), "hold") << retry.DebugString();
  // The retry's change baked 12 s: its first look came a third of that after
  // its step began, its last at the end.
  const v1::Change rc = Get(retry.change_id());
  EXPECT_EQ(rc.bake_seconds(), 12u);
  // Its looks are a third of its bake apart: its first came 4 s (12 s / 3)
  // after the step's first window, the held trial's 2 s (6 s / 3).
  auto first_look = [](const v1::Change& c) {
    int64_t canary_at = 0;
    for (const v1::ChangeTransition& x : c.transitions()) {
      if (x.to() == v1::CANARY) canary_at = x.unix_nanos();
    }
    if (canary_at == 0 || c.verdicts_size() == 0) return absl::ZeroDuration();
    return absl::FromUnixNanos(c.verdicts(0).unix_nanos()) - absl::FromUnixNanos(canary_at);
  };
  EXPECT_EQ(first_look(rc) - first_look(Get(held.change_id())), absl::Seconds(2))
      << first_look(rc) << " " << first_look(Get(held.change_id()));
  // Only one retry per trial, and none for a retry: no trial after the first
  // repeats one, however it ended.
  for (int i = 2; i < now.trials_size(); ++i) {
    EXPECT_EQ(now.trials(i).retry_of(), 0u) << now.trials(i).DebugString();
  }
  // The search went on from the retry's result as if the trial had been
  // measured at once: it still finds the lower values.
  EXPECT_LT(now.best().at("rpg_time_reset"), 300);
  ASSERT_FALSE(now.promotion_change_id().empty());
}

// Issue 24 item 4: the search's winner is the best of several noisy
// measurements, so it is measured once more against the start values on canary
// hosts the search did not use, and proposed only when that confirms a gain;
// the promotion carries both estimates.
TEST_F(RolloutTest, AWinnerIsConfirmedOnFreshCanaryHostsBeforeItIsProposed) {
  ApplyPolicy(PolicyText());
  factor_ = TailShrinksWithTimeReset;
  Run(6);
  const std::string id = StartApprovedCampaign();
  ASSERT_FALSE(id.empty());
  bool proposed_before_confirmed = false;
  const v1::Campaign now = RunCampaign(id, [&](const v1::Campaign& c) {
    const bool confirmed = std::any_of(
        c.trials().begin(), c.trials().end(),
        [](const v1::Trial& tr) { return tr.confirms() != 0 && tr.outcome() == "confirmed"; });
    proposed_before_confirmed |= !c.promotion_change_id().empty() && !confirmed;
  });
  ASSERT_EQ(now.state(), v1::Campaign::FINISHED) << now.DebugString();
  EXPECT_FALSE(proposed_before_confirmed);
  const v1::Trial& conf = now.trials(now.trials_size() - 1);
  ASSERT_NE(conf.confirms(), 0u) << now.DebugString();
  const v1::Trial& winner = now.trials(static_cast<int>(conf.confirms()) - 1);
  EXPECT_EQ(winner.outcome(), "improved");
  EXPECT_EQ(winner.knobs().at("rpg_time_reset"), now.best().at("rpg_time_reset"));
  EXPECT_EQ(conf.knobs().at("rpg_time_reset"), now.best().at("rpg_time_reset"));
  EXPECT_EQ(conf.outcome(), "confirmed") << conf.DebugString();
  EXPECT_LT(conf.objective_upper(), 1.0);
  // Eight racks of four hosts: every canary host of the confirmation is one
  // the search did not use, and so is every control host.
  EXPECT_EQ(conf.canary_hosts(), 8u);
  EXPECT_EQ(conf.fresh_canary_hosts(), 8u);
  std::set<std::string> searched;  // the winning trial's canary and control hosts
  const v1::Change wc = Get(winner.change_id());
  for (const v1::HostTarget& h : wc.hosts()) {
    if (h.role() == v1::HostTarget::CANARY || h.role() == v1::HostTarget::CONTROL) {
      searched.insert(h.host_id());
    }
  }
  const v1::Change cc = Get(conf.change_id());
  EXPECT_TRUE(cc.canary_only());
  for (const v1::HostTarget& h : cc.hosts()) {
    if (h.role() == v1::HostTarget::CANARY || h.role() == v1::HostTarget::CONTROL) {
      EXPECT_FALSE(searched.contains(h.host_id())) << h.host_id();
    }
  }
  // The promotion names the confirmed estimate with its interval, then the
  // search's.
  ASSERT_FALSE(now.promotion_change_id().empty()) << now.DebugString();
  const v1::Change promo = Get(now.promotion_change_id());
  EXPECT_EQ(promo.state(), v1::PROPOSED);
  EXPECT_THAT(promo.reason(), HasSubstr(absl::StrFormat("confirmed objective p99 ratio vs start "
                                                        "against concurrent control %.3f [",
                                                        conf.objective_ratio())));
  EXPECT_THAT(promo.reason(),
              HasSubstr(absl::StrFormat("search estimate %.3f [", winner.objective_ratio())));
  EXPECT_THAT(promo.reason(), HasSubstr("8 canary members, 8 of them fresh"));
  EXPECT_EQ(Metric("rocetune_controller_campaign_trials_total{outcome=confirmed,}"), 1);
}

// A confirmation an operator aborts is not read as "not confirmed": it is run
// again, and the winner is proposed once a confirmation confirms it.
TEST_F(RolloutTest, AnAbortedConfirmationIsRunAgain) {
  ApplyPolicy(PolicyText());
  factor_ = TailShrinksWithTimeReset;
  Run(6);
  const std::string id = StartApprovedCampaign();
  ASSERT_FALSE(id.empty());
  std::string aborted;
  const v1::Campaign now = RunCampaign(id, [&](const v1::Campaign& c) {
    if (!aborted.empty() || c.trials_size() == 0) return;
    const v1::Trial& last = c.trials(c.trials_size() - 1);
    if (last.confirms() == 0 || last.outcome() != "running") return;
    if (Get(last.change_id()).state() != v1::CANARY) return;
    auto a = Act("abort", last.change_id(), {"carol", false});
    ASSERT_TRUE(a.ok()) << a.status();
    aborted = last.change_id();
  });
  ASSERT_FALSE(aborted.empty()) << now.DebugString();
  ASSERT_EQ(now.state(), v1::Campaign::FINISHED) << now.DebugString();
  int confirmations = 0;
  for (const v1::Trial& tr : now.trials()) confirmations += tr.confirms() != 0 ? 1 : 0;
  EXPECT_EQ(confirmations, 2) << now.DebugString();
  const v1::Trial& last = now.trials(now.trials_size() - 1);
  EXPECT_NE(last.change_id(), aborted);
  EXPECT_EQ(last.outcome(), "confirmed") << last.DebugString();
  EXPECT_FALSE(now.promotion_change_id().empty()) << now.DebugString();
}

// Issue 24 item 4: a gain that only the search's canary hosts show (here the
// knob helps those eight hosts and no other: what a lucky draw of hosts looks
// like) is not confirmed on fresh hosts, and nothing is proposed.
TEST_F(RolloutTest, AWinnerThatFreshCanaryHostsDoNotConfirmIsNotProposed) {
  ApplyPolicy(PolicyText());
  std::set<std::string> lucky;
  host_factor_ = [&lucky](const std::string& h, int64_t v) {
    if (!lucky.contains(h)) return 1.0;
    return 0.5 + 0.5 * std::min(1.0, std::max(0.0, (v - 20) / 280.0));
  };
  Run(6);
  const std::string id = StartApprovedCampaign();
  ASSERT_FALSE(id.empty());
  const v1::Campaign now = RunCampaign(id, [&](const v1::Campaign& c) {
    if (!lucky.empty() || c.trials_size() == 0) return;
    const v1::Change first = Get(c.trials(0).change_id());
    for (const v1::HostTarget& h : first.hosts()) {
      if (h.role() == v1::HostTarget::CANARY) lucky.insert(h.host_id());
    }
  });
  ASSERT_EQ(now.state(), v1::Campaign::FINISHED) << now.DebugString();
  ASSERT_EQ(lucky.size(), 8u);
  // The search saw the gain...
  EXPECT_LT(now.best().at("rpg_time_reset"), 300);
  EXPECT_LT(now.best_objective_ratio(), 0.9);
  // ...its confirmation on other hosts did not.
  const v1::Trial& conf = now.trials(now.trials_size() - 1);
  ASSERT_NE(conf.confirms(), 0u) << now.DebugString();
  EXPECT_EQ(conf.outcome(), "not_confirmed") << conf.DebugString();
  EXPECT_GT(conf.objective_upper(), 1.0) << conf.DebugString();
  EXPECT_TRUE(now.promotion_change_id().empty()) << now.DebugString();
  EXPECT_THAT(now.note(), HasSubstr("was not confirmed"));
  EXPECT_THAT(now.note(), HasSubstr("not proposed"));
  // Only one confirmation: a winner that was not confirmed is not re-measured.
  int confirmations = 0;
  for (const v1::Trial& tr : now.trials()) confirmations += tr.confirms() != 0 ? 1 : 0;
  EXPECT_EQ(confirmations, 1);
  // The campaign's end is audited with what was not proposed.
  const v1::AuditEntry e = CampaignAudit(id, "campaign_finished");
  EXPECT_EQ(e.action(), "campaign_finished");
  EXPECT_THAT(e.reason(), HasSubstr("was not confirmed"));
  EXPECT_THAT(e.detail(), HasSubstr("1 confirmations"));
  EXPECT_THAT(e.detail(), HasSubstr("nothing proposed"));
}

// A campaign that an earlier version left RUNNING with trials scored on the
// canary's own shift (no bar, no interval recorded) is stopped when the
// controller loads it, not continued on a mixed scale.
TEST_F(RolloutTest, ACampaignScoredByAnEarlierVersionIsStoppedAtLoad) {
  ApplyPolicy(PolicyText());
  factor_ = TailShrinksWithTimeReset;
  Run(6);
  const std::string id = StartApprovedCampaign();
  ASSERT_FALSE(id.empty());
  v1::Campaign now;
  for (int i = 0; i < 100 && now.trials_size() < 2; ++i) {
    Run(1);
    now = GetCampaign(id);
  }
  ASSERT_GE(now.trials_size(), 2) << now.DebugString();
  ASSERT_NE(now.trials(0).min_improvement(), 0) << now.trials(0).DebugString();
  ASSERT_EQ(now.state(), v1::Campaign::RUNNING);
  // The same campaign as an earlier version stored it.
  v1::Campaign old = now;
  old.mutable_trials(0)->clear_min_improvement();
  old.mutable_trials(0)->clear_objective_lower();
  old.mutable_trials(0)->clear_objective_upper();
  ASSERT_TRUE(store_->SaveCampaign(old, nullptr).ok());
  Restart();
  Run(1);  // the first tick after the load
  const v1::Campaign loaded = GetCampaign(id);
  EXPECT_EQ(loaded.state(), v1::Campaign::STOPPED);
  EXPECT_THAT(loaded.note(), HasSubstr("earlier version"));
  // Its running trial was aborted with it, and the stop audited.
  for (const v1::Trial& tr : loaded.trials()) {
    EXPECT_NE(tr.outcome(), "running") << tr.DebugString();
    if (!tr.change_id().empty()) {
      EXPECT_FALSE(InFlightForTest(Get(tr.change_id()).state())) << tr.change_id();
    }
  }
  EXPECT_EQ(CampaignAudit(id, "campaign_stop").action(), "campaign_stop");
  // A campaign of this version is continued after a restart.
  const std::string id2 = StartApprovedCampaign();
  ASSERT_FALSE(id2.empty());
  for (int i = 0; i < 100 && GetCampaign(id2).trials_size() < 2; ++i) Run(1);
  Restart();
  EXPECT_EQ(GetCampaign(id2).state(), v1::Campaign::RUNNING) << GetCampaign(id2).DebugString();
}

TEST_F(RolloutTest, StoppingACampaignBeforeItsApprovalRejectsIt) {
  ApplyPolicy(PolicyText());
  auto start = [&] {
    return OnExec<absl::StatusOr<v1::Campaign>>([&] {
      v1::StartCampaignRequest req;
      req.set_policy_name("test-policy");
      req.set_reason("tune");
      return manager_->campaigns().Start(req, Identity{"alice", true});
    });
  };
  auto stop = [&](const std::string& id) {
    return OnExec<absl::StatusOr<v1::Campaign>>([&] {
      v1::ChangeActionRequest r;
      r.set_id(id);
      r.set_reason("not now");
      return manager_->campaigns().Stop(r, Identity{"bob", true});
    });
  };
  auto t = start();
  ASSERT_TRUE(t.ok()) << t.status();
  auto rejected = stop(t->id());
  ASSERT_TRUE(rejected.ok()) << rejected.status();
  EXPECT_EQ(rejected->state(), v1::Campaign::REJECTED);
  EXPECT_EQ(rejected->trials_size(), 0);
  EXPECT_EQ(stop(t->id()).status().code(), absl::StatusCode::kFailedPrecondition);
  // Once approved and running, stopping it is STOPPED.
  auto u = start();
  ASSERT_TRUE(u.ok()) << u.status();
  ASSERT_TRUE(OnExec<absl::StatusOr<v1::Campaign>>([&] {
                v1::ChangeActionRequest r;
                r.set_id(u->id());
                return manager_->campaigns().Approve(r, Identity{"bob", true});
              }).ok());
  Run(2);
  auto stopped = stop(u->id());
  ASSERT_TRUE(stopped.ok()) << stopped.status();
  EXPECT_EQ(stopped->state(), v1::Campaign::STOPPED);
  bool reject_row = false, stop_row = false;
  auto audit = store_->ListAudit(0, 1000);
  ASSERT_TRUE(audit.ok()) << audit.status();
  for (const v1::AuditEntry& e : *audit) {
    reject_row |= e.action() == "campaign_reject" && e.subject() == t->id() && e.actor() == "bob";
    stop_row |= e.action() == "campaign_stop" && e.subject() == u->id();
  }
  EXPECT_TRUE(reject_row);
  EXPECT_TRUE(stop_row);
}

// ---- The fleet guard (fleet_guard.h): fleet before/after across the stages.

// A verdict's fleet evidence for `metric` ("fleet_throughput_gbps").
const v1::MetricEvidence* FleetMetric(const v1::Verdict& v, const std::string& metric) {
  for (const v1::MetricEvidence& m : v.metrics()) {
    if (m.metric() == metric) return &m;
  }
  return nullptr;
}

TEST_F(RolloutTest, FleetThroughputLossAtTheLastStageRollsBackEveryHost) {
  ApplyPolicy(PolicyText());
  // Every host loses 35% of its throughput once all hosts run
  // rpg_time_reset=8, and nothing before: no canary/control comparison can
  // see it, only the fleet before/after.
  tx_bytes_ = [this](const std::string&) {
    size_t with = 0;
    for (const std::string& h : hosts_) with += agents_[h]->Param("rpg_time_reset", 300) == 8;
    return with == hosts_.size() ? 6'500'000'000ull : 10'000'000'000ull;
  };
  Run(6);
  auto c = Propose(8);
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_TRUE(Act("approve", c->id(), {"bob", false}).ok());
  Tick();
  absl::Time last_stage_start;
  for (int i = 0; i < 60; ++i) {
    const v1::Change now = Get(c->id());
    if (!InFlightForTest(now.state())) break;
    if (now.state() == v1::STAGE && now.stage() == 2 && last_stage_start == absl::Time()) {
      last_stage_start = clock_.Now();
    }
    Run(1);
  }
  v1::Change now = Get(c->id());
  ASSERT_EQ(now.state(), v1::ROLLED_BACK) << now.DebugString().substr(0, 4000);
  ASSERT_NE(last_stage_start, absl::Time()) << "the loss shows only at the last stage";
  // Decided at the end of the last stage's bake (6 s) plus the partial window.
  EXPECT_LE(clock_.Now() - last_stage_start, absl::Seconds(9));
  const v1::Verdict& v = now.verdicts(now.verdicts_size() - 1);
  EXPECT_EQ(v.outcome(), v1::Verdict::FAIL);
  EXPECT_EQ(v.rule(), "fleet_constraint");
  EXPECT_EQ(v.stage(), 2u);
  const v1::MetricEvidence* m = FleetMetric(v, "fleet_throughput_gbps");
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->outcome(), "fail");
  EXPECT_NEAR(m->ratio(), 0.65, 0.02);
  EXPECT_THAT(m->note(), HasSubstr("baseline 80"));
  EXPECT_THAT(m->note(), HasSubstr("tolerance 0.900"));
  EXPECT_THAT(v.summary(), HasSubstr("now 52"));
  // The earlier steps passed, each with the fleet figures beside the judge's.
  int fleet_passes = 0;
  for (const v1::Verdict& old : now.verdicts()) {
    const v1::MetricEvidence* f = FleetMetric(old, "fleet_throughput_gbps");
    if (old.outcome() == v1::Verdict::PASS && f != nullptr) {
      ++fleet_passes;
      EXPECT_NEAR(f->ratio(), 1.0, 0.01);
    }
  }
  EXPECT_EQ(fleet_passes, 2) << "canary and stage 1";
  // Every host back on its previous value, audited with the reason.
  for (const std::string& h : hosts_) {
    EXPECT_EQ(DesiredValue(h), 300) << h;
    EXPECT_EQ(agents_[h]->Param("rpg_time_reset", 0), 300) << h;
  }
  auto audit = store_->QueryAudit([&] {
    v1::ListAuditRequest r;
    r.set_change_id(c->id());
    r.set_newest_first(true);
    return r;
  }());
  ASSERT_TRUE(audit.ok());
  ASSERT_GT(audit->entries_size(), 0);
  EXPECT_EQ(audit->entries(0).action(), "change_rolled_back");
  EXPECT_THAT(audit->entries(0).reason(), HasSubstr("FAIL (fleet_constraint)"));
  EXPECT_THAT(audit->entries(0).reason(), HasSubstr("throughput_gbps"));
  EXPECT_EQ(audit->entries(0).host_ids_size(), 32);
  EXPECT_EQ(Metric("rocetune_controller_changes_rolled_back_total{reason=fleet_guard,}"), 1);
}

// The last stage leaves no control, so the judge cannot see a p99 that rises
// only once every host runs the change; the fleet guard's own p99 before and
// after does.
TEST_F(RolloutTest, FleetP99RiseAtTheLastStageRollsBackEveryHost) {
  ApplyPolicy(PolicyText());
  factor_ = [this](int64_t) {
    for (const std::string& h : hosts_) {
      if (agents_[h]->Param("rpg_time_reset", 300) != 8) return 1.0;
    }
    return 2.5;
  };
  Run(6);
  auto c = Propose(8);
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_TRUE(Act("approve", c->id(), {"bob", false}).ok());
  Tick();
  bool reached_last_stage = false;
  for (int i = 0; i < 60; ++i) {
    const v1::Change now = Get(c->id());
    if (!InFlightForTest(now.state())) break;
    reached_last_stage |= now.state() == v1::STAGE && now.stage() == 2;
    Run(1);
  }
  const v1::Change now = Get(c->id());
  ASSERT_EQ(now.state(), v1::ROLLED_BACK) << now.DebugString().substr(0, 4000);
  EXPECT_TRUE(reached_last_stage);
  const v1::Verdict& v = now.verdicts(now.verdicts_size() - 1);
  EXPECT_EQ(v.rule(), "fleet_p99") << v.summary();
  EXPECT_EQ(v.stage(), 2u);
  const v1::MetricEvidence* m = FleetMetric(v, "fleet_p99");
  ASSERT_NE(m, nullptr);
  EXPECT_GE(m->ratio(), 1.5);
  for (const std::string& h : hosts_) EXPECT_EQ(agents_[h]->Param("rpg_time_reset", 0), 300) << h;
  EXPECT_EQ(Metric("rocetune_controller_changes_rolled_back_total{reason=fleet_guard,}"), 1);
}

// Issue 25 item 4: a fleet incident that moves control as much as the canary
// HOLDs instead of FAILing. Every host's p99 tail triples from the canary's
// third second on, a neutral change in flight. The judge holds (control
// moved) and the canary's own p99 rose x3, as in a shared-fabric regression;
// but the step's onset (its first 2 s) shows no rise: HOLD "fleet_shift", the
// change is never failed, the HOLD limit aborts it and its values may be
// proposed again without an override.
TEST_F(RolloutTest, AFleetIncidentAfterTheOnsetHoldsANeutralChangeInsteadOfFailingIt) {
  bool incident = false;
  factor_ = [&incident](int64_t) { return incident ? 3.0 : 1.0; };
  auto c = ApprovedChange(310);
  ASSERT_TRUE(c.ok()) << c.status();
  const v1::Change now = IncidentAfterTheOnset(c->id(), &incident);
  EXPECT_EQ(now.state(), v1::ABORTED) << now.DebugString().substr(0, 3000);
  int fleet_shift = 0;
  for (const v1::Verdict& v : now.verdicts()) {
    EXPECT_NE(v.outcome(), v1::Verdict::FAIL) << v.rule() << ": " << v.summary();
    if (v.rule() != "fleet_shift") continue;
    ++fleet_shift;
    const v1::MetricEvidence* onset = nullptr;
    const v1::MetricEvidence* own = nullptr;
    for (const v1::MetricEvidence& m : v.metrics()) {
      if (m.metric() == kCanaryOnsetShiftEvidence) onset = &m;
      if (m.metric() == kCanaryOwnShiftEvidence) own = &m;
    }
    ASSERT_NE(onset, nullptr) << v.summary();
    ASSERT_NE(own, nullptr) << v.summary();
    EXPECT_LT(onset->ratio(), 1.2) << v.summary();
    EXPECT_GE(own->ratio(), 1.5) << v.summary();
  }
  EXPECT_GE(fleet_shift, 2) << now.DebugString().substr(0, 3000);
  // The canary hosts were restored; the others were never pushed to.
  for (const std::string& h : hosts_) EXPECT_EQ(agents_[h]->Param("rpg_time_reset", 300), 300) << h;
  EXPECT_EQ(Metric("rocetune_controller_changes_rolled_back_total{reason=fabric_regression,}"), 0);
  // Aborted, not failed: the same values are not marked rejected.
  // Once the probes are back at their rate (the proposal's check reads the
  // last 30 s), the same values may be proposed again.
  incident = false;
  Run(30);
  auto again = Propose(310);
  EXPECT_TRUE(again.ok()) << again.status();
}

// The same incident at the last stage, where no control is left and the
// fleet guard's p99 (the fleet since the stage began against before the
// canary) is the only p99 evidence: it HOLDs "fleet_shift" rather than
// FAILing "fleet_p99", because the stage's onset had not risen.
// (FleetP99RiseAtTheLastStageRollsBackEveryHost: a rise there from the onset
// still FAILs.)
TEST_F(RolloutTest, AFleetIncidentAtTheLastStageHoldsTheFleetGuardInsteadOfFailingIt) {
  bool incident = false;
  factor_ = [&incident](int64_t) { return incident ? 3.0 : 1.0; };
  auto c = ApprovedChange(310);
  ASSERT_TRUE(c.ok()) << c.status();
  RunUntilStage(c->id(), 2);
  ASSERT_EQ(Get(c->id()).state(), v1::STAGE);
  ASSERT_EQ(Get(c->id()).stage(), 2u);
  Run(3);
  incident = true;
  for (int i = 0; i < 40 && InFlightForTest(Get(c->id()).state()); ++i) Run(1);
  const v1::Change now = Get(c->id());
  EXPECT_EQ(now.state(), v1::ABORTED) << now.DebugString().substr(0, 3000);
  bool held = false;
  for (const v1::Verdict& v : now.verdicts()) {
    EXPECT_NE(v.outcome(), v1::Verdict::FAIL) << v.rule() << ": " << v.summary();
    if (v.stage() != 2 || v.rule() != "fleet_shift") continue;
    held = true;
    const v1::MetricEvidence* m = FleetMetric(v, "fleet_p99");
    ASSERT_NE(m, nullptr);
    EXPECT_GE(m->ratio(), 1.5);
    EXPECT_EQ(m->outcome(), "hold");
    EXPECT_THAT(m->note(), HasSubstr("in the step's first part"));
  }
  EXPECT_TRUE(held) << now.DebugString().substr(0, 3000);
}

TEST_F(RolloutTest, FleetLossAtAStageRollsBackBeforeTheLastStage) {
  ApplyPolicy(PolicyText());
  // Every host loses throughput in proportion to the share of hosts running
  // rpg_time_reset=8: 12% at the canary (within the tolerance and margin),
  // 24% at stage 1 (beyond).
  tx_bytes_ = [this](const std::string&) {
    const double with = static_cast<double>(HostsWith(8));
    return static_cast<uint64_t>(10e9 * (1 - 0.48 * with / static_cast<double>(hosts_.size())));
  };
  Run(6);
  const v1::Change now = RunChange(8);
  ASSERT_EQ(now.state(), v1::ROLLED_BACK) << now.DebugString().substr(0, 4000);
  const v1::Verdict& v = now.verdicts(now.verdicts_size() - 1);
  EXPECT_EQ(v.rule(), "fleet_constraint");
  EXPECT_EQ(v.stage(), 1u);
  // Hosts of the last stage were never changed (no desired state of the change).
  for (const std::string& h : hosts_) {
    EXPECT_NE(DesiredValue(h), 8) << h;
    EXPECT_EQ(agents_[h]->Param("rpg_time_reset", 300), 300) << h;
  }
}

// Issue 25: a change the judge cannot decide is still held to the fleet's
// figures. From the canary's push on, every host sends 35% less and answers
// 50 probes a second (too few for the judge's 1500 per host within the HOLD
// limit: it HOLDs at every look). The fleet guard, run at the final look
// after the judge's HOLD, sees the loss in the step's onset too: its FAIL
// decides, every touched host is restored, and the values are rejected.
// Before, the change sat out the HOLD limit and ended ABORTED, its values
// free to be proposed again (fleet_guard_e2e_test on a loaded machine).
TEST_F(RolloutTest, AChangeTheJudgeHoldsIsRolledBackOnAFleetLossFromItsOnset) {
  ApplyPolicy(PolicyText());
  tx_bytes_ = [this](const std::string&) {
    return HostsWith(8) > 0 ? 6'500'000'000ull : 10'000'000'000ull;
  };
  probes_ = [this](const std::string&) { return HostsWith(8) > 0 ? 50 : kProbesPerWindow; };
  Run(6);
  const v1::Change now = RunChange(8);
  ASSERT_EQ(now.state(), v1::ROLLED_BACK) << now.DebugString().substr(0, 4000);
  ASSERT_GE(now.verdicts_size(), 2);
  const v1::Verdict& judge = now.verdicts(now.verdicts_size() - 2);
  const v1::Verdict& fleet = now.verdicts(now.verdicts_size() - 1);
  EXPECT_EQ(judge.outcome(), v1::Verdict::HOLD) << judge.summary();
  EXPECT_EQ(judge.stage(), 0u);
  EXPECT_EQ(fleet.outcome(), v1::Verdict::FAIL);
  EXPECT_EQ(fleet.rule(), "fleet_constraint") << fleet.summary();
  EXPECT_EQ(fleet.look(), judge.look());
  EXPECT_THAT(fleet.summary(), HasSubstr("the judge held this look; the loss was there"));
  const v1::MetricEvidence* m = FleetMetric(fleet, "fleet_throughput_gbps");
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->outcome(), "fail");
  EXPECT_NEAR(m->ratio(), 0.65, 0.02);
  for (const v1::Verdict& v : now.verdicts()) EXPECT_NE(v.outcome(), v1::Verdict::PASS);
  for (const std::string& h : hosts_) EXPECT_EQ(agents_[h]->Param("rpg_time_reset", 300), 300) << h;
  EXPECT_EQ(NewestAudit(now.id()).action(), "change_rolled_back");
  EXPECT_EQ(Metric("rocetune_controller_changes_rolled_back_total{reason=fleet_guard,}"), 1);
  EXPECT_EQ(Metric("rocetune_controller_changes_rolled_back_total{reason=hold_timeout,}"), 0);
  // One verdict counted per look, the one that decided it: the final look's
  // FAIL, not the judge's HOLD before it.
  ASSERT_LT(now.verdicts_size(), RolloutOptions{}.max_verdicts);  // none dropped from the record
  int holds = 0;
  for (const v1::Verdict& v : now.verdicts()) holds += v.outcome() == v1::Verdict::HOLD;
  EXPECT_EQ(Metric("rocetune_controller_judge_verdicts_total{verdict=FAIL,}"), 1);
  EXPECT_EQ(Metric("rocetune_controller_judge_verdicts_total{verdict=HOLD,}"), holds - 1);
  // Failed, not aborted: the values are refused without an override.
  Run(6);
  auto again = Propose(8);
  EXPECT_EQ(again.status().code(), absl::StatusCode::kFailedPrecondition) << again.status();
  EXPECT_THAT(again.status().message(), HasSubstr(now.id()));
}

// The same HOLD, but the fleet's loss begins 3 s into the canary's bake,
// after the step's onset (its first 2 s), as a fleet incident's does: the
// fleet guard would fail the change, yet the judge's HOLD stays deciding,
// with the guard's figures and why beside it; the HOLD limit aborts the
// change and its values may be proposed again.
TEST_F(RolloutTest, AFleetLossThatBeginsAfterTheOnsetLeavesAHeldChangeToTheHoldLimit) {
  bool incident = false;
  tx_bytes_ = [&incident](const std::string&) {
    return incident ? 6'500'000'000ull : 10'000'000'000ull;
  };
  probes_ = [this](const std::string&) { return HostsWith(310) > 0 ? 50 : kProbesPerWindow; };
  auto c = ApprovedChange(310);
  ASSERT_TRUE(c.ok()) << c.status();
  const v1::Change now = IncidentAfterTheOnset(c->id(), &incident);
  EXPECT_EQ(now.state(), v1::ABORTED) << now.DebugString().substr(0, 4000);
  int guarded_holds = 0;
  for (const v1::Verdict& v : now.verdicts()) {
    EXPECT_NE(v.outcome(), v1::Verdict::FAIL) << v.rule() << ": " << v.summary();
    EXPECT_NE(v.outcome(), v1::Verdict::PASS) << v.rule() << ": " << v.summary();
    const v1::MetricEvidence* m = FleetMetric(v, "fleet_throughput_gbps");
    if (m == nullptr || m->outcome() != "fail") continue;
    ++guarded_holds;
    EXPECT_LT(m->ratio(), 0.818) << v.summary();
    EXPECT_THAT(v.summary(), HasSubstr("began after the change took effect"));
  }
  EXPECT_GE(guarded_holds, 2) << now.DebugString().substr(0, 4000);
  EXPECT_EQ(Metric("rocetune_controller_changes_rolled_back_total{reason=fleet_guard,}"), 0);
  EXPECT_EQ(Metric("rocetune_controller_changes_rolled_back_total{reason=hold_timeout,}"), 1);
  for (const std::string& h : hosts_) EXPECT_EQ(agents_[h]->Param("rpg_time_reset", 300), 300) << h;
  // Once the probes are back at their rate (the proposal's check reads the
  // last 30 s), the same values may be proposed again.
  incident = false;
  Run(30);
  auto again = Propose(310);
  EXPECT_TRUE(again.ok()) << again.status();
}

// Issue 25 item 4: the fleet guard's thresholds come from the fleet's A/A
// spread before the change. Every host loses 15% of its throughput once all
// run rpg_time_reset=8. With 40 s of steady history (8 periods of the 4 s
// baseline, no spread) the margin is its 3% floor and the loss is rolled back
// at the last stage; with 6 s of history (the next test) the spread is not
// measured and the default 10% margin (FAIL below 0.818) lets it through.
class FleetSpreadRolloutTest : public RolloutTest {
 protected:
  // Every host loses 15% of its throughput once all run rpg_time_reset=8;
  // the change is proposed after `history_seconds` of telemetry and run to
  // its end.
  v1::Change LastStageLoss(int history_seconds) {
    ApplyPolicy(PolicyText());
    tx_bytes_ = [this](const std::string&) {
      return HostsWith(8) == hosts_.size() ? 8'500'000'000ull : 10'000'000'000ull;
    };
    Run(history_seconds);
    return RunChange(8);
  }
};

TEST_F(FleetSpreadRolloutTest, TheFleetGuardsMarginComesFromTheFleetsMeasuredSpread) {
  const v1::Change now = LastStageLoss(40);
  ASSERT_EQ(now.state(), v1::ROLLED_BACK) << now.DebugString().substr(0, 4000);
  const v1::Verdict& v = now.verdicts(now.verdicts_size() - 1);
  EXPECT_EQ(v.rule(), "fleet_constraint") << v.summary();
  EXPECT_EQ(v.stage(), 2u);
  const v1::MetricEvidence* m = FleetMetric(v, "fleet_throughput_gbps");
  ASSERT_NE(m, nullptr);
  EXPECT_NEAR(m->ratio(), 0.85, 0.01);
  EXPECT_THAT(m->note(), HasSubstr("noise margin 3.0% (from the fleet's A/A spread: rms ln "
                                   "ratio 0.0000 over 28 pairs of 8 pre-change periods of 4 s)"));
  for (const std::string& h : hosts_) EXPECT_EQ(agents_[h]->Param("rpg_time_reset", 0), 300) << h;
}

// The counterpart: the same loss after 6 s of history passes.
TEST_F(FleetSpreadRolloutTest, WithTooLittleHistoryTheFleetGuardKeepsItsDefaultMargin) {
  const v1::Change now = LastStageLoss(6);
  ASSERT_EQ(now.state(), v1::DONE) << now.DebugString().substr(0, 4000);
  bool last_stage_checked = false;
  for (const v1::Verdict& v : now.verdicts()) {
    const v1::MetricEvidence* m = FleetMetric(v, "fleet_throughput_gbps");
    if (m == nullptr || v.stage() != 2) continue;
    last_stage_checked = true;
    EXPECT_NEAR(m->ratio(), 0.85, 0.01);
    EXPECT_THAT(m->note(), HasSubstr("noise margin 10.0% (default: the fleet's A/A spread not "
                                     "measured"));
  }
  EXPECT_TRUE(last_stage_checked);
}

// Better on the probe and worse for the job is a regression. A policy that
// tunes the probes' p99 holds the job's step time with a step_time_p99
// constraint; a value that slows the job's steps only once every host runs
// it (the job is lockstep: no control is left to see it) passes the canary,
// whose fleet check shows the job's p99 unchanged, and is rolled back at the
// last stage by the fleet guard's check of the job's merged p99.
TEST_F(RolloutTest, AJobStepTimeConstraintRollsBackAtTheLastStageWhatSlowsTheWholeJob) {
  ApplyPolicy(JobHeldPolicy());
  job_tail_factor_ = [this](const std::string&) {
    return HostsWith(8) == hosts_.size() ? 1.4 : 1.0;
  };
  Run(40);
  const v1::Change now = RunChange(8);
  ASSERT_EQ(now.state(), v1::ROLLED_BACK) << now.DebugString().substr(0, 4000);
  const v1::Verdict& v = now.verdicts(now.verdicts_size() - 1);
  EXPECT_EQ(v.rule(), "fleet_constraint") << v.summary();
  EXPECT_EQ(v.stage(), 2u);
  EXPECT_THAT(v.summary(), HasSubstr("fleet step_time_p99 (merged)"));
  const v1::MetricEvidence* m = FleetMetric(v, "fleet_step_time_p99");
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->outcome(), "fail");
  EXPECT_GT(m->ratio(), 1.2);
  // The measured spread of the job's p99 set the margin.
  EXPECT_THAT(m->note(), HasSubstr("from the fleet's A/A spread"));
  // Earlier steps' fleet checks saw the job's p99 unchanged.
  bool canary_checked = false;
  for (const v1::Verdict& e : now.verdicts()) {
    const v1::MetricEvidence* j = FleetMetric(e, "fleet_step_time_p99");
    if (j == nullptr || e.stage() != 0) continue;
    canary_checked = true;
    EXPECT_EQ(j->outcome(), "pass") << j->note();
    EXPECT_NEAR(j->ratio(), 1.0, 0.1);
  }
  EXPECT_TRUE(canary_checked) << now.DebugString().substr(0, 4000);
  for (const std::string& h : hosts_) EXPECT_EQ(agents_[h]->Param("rpg_time_reset", 0), 300) << h;
}

// A trial's canary-versus-control test cannot see a cost that crosses racks:
// here every host's job slows by 40% whenever a trial runs (its ranks sit in
// canary and control racks alike), while the probes' tail falls on the
// canary. The job's DiD is 1; the fleet's job p99 before and during the
// trial is not, so every trial FAILs on the job's constraint, no trial
// improves and nothing is proposed.
TEST_F(RolloutTest, ATrialThatSlowsTheJobFleetWideFailsOnTheJobsConstraint) {
  ApplyPolicy(JobHeldPolicy());
  factor_ = TailShrinksWithTimeReset;
  job_tail_factor_ = [this](const std::string&) { return AnyChangeActive() ? 1.4 : 1.0; };
  Run(40);
  const v1::Campaign now = CampaignRun();
  ASSERT_EQ(now.state(), v1::Campaign::FINISHED) << now.DebugString();
  ASSERT_GE(now.trials_size(), 1);
  double best = 1;
  for (const v1::Trial& tr : now.trials()) {
    EXPECT_NE(tr.outcome(), "improved") << tr.DebugString();
    const v1::Change c = Get(tr.change_id());
    ASSERT_GT(c.verdicts_size(), 0) << c.DebugString();
    const v1::Verdict& v = c.verdicts(c.verdicts_size() - 1);
    EXPECT_EQ(v.outcome(), v1::Verdict::FAIL) << v.summary();
    EXPECT_EQ(v.rule(), "fleet_constraint") << v.summary();
    EXPECT_THAT(v.summary(), HasSubstr("during the trial"));
    const v1::MetricEvidence* m = FleetMetric(v, "fleet_step_time_p99");
    ASSERT_NE(m, nullptr) << v.DebugString();
    EXPECT_GT(m->ratio(), 1.2);
    // The trial keeps the judge's estimate and the fleet's job figure beside it.
    EXPECT_EQ(tr.outcome(), "fail");
    EXPECT_GT(tr.objective_ratio(), 0) << tr.DebugString();
    best = std::min(best, tr.objective_ratio());
    EXPECT_GT(tr.constraints().at("fleet_step_time_p99"), 1.2) << tr.DebugString();
  }
  EXPECT_LT(best, 0.9) << "a trial whose probes' tail fell: " << now.DebugString();
  EXPECT_TRUE(now.promotion_change_id().empty()) << now.DebugString();
}

// Issue 24: a training job that stops reporting for a while (a checkpoint, an
// evaluation) leaves a campaign that holds the job waiting, not stopped: its
// next trial is refused for want of job events, the campaign says so in its
// note and starts the trial once they are back. Only a pause longer than
// RolloutOptions::campaign_trial_wait (60 s here) stops it, saying why.
TEST_F(RolloutTest, ACampaignWaitsOutAPauseOfTheJobSignalAndStopsOnlyPastItsBound) {
  ApplyPolicy(JobHeldPolicy());
  factor_ = TailShrinksWithTimeReset;
  bool paused = false;
  job_tail_factor_ = [&paused](const std::string&) { return paused ? 0.0 : 1.0; };
  Run(40);
  const std::string id = StartApprovedCampaign();
  ASSERT_FALSE(id.empty());
  // Paused while the first trial runs, until the campaign waits for its next.
  v1::Campaign now;
  for (int i = 0; i < 60 && now.trials_size() == 0; ++i) {
    Run(1);
    now = GetCampaign(id);
  }
  ASSERT_GE(now.trials_size(), 1) << now.DebugString();
  paused = true;
  for (int i = 0; i < 120 && !absl::StartsWith(now.note(), "waiting"); ++i) {
    Run(1);
    now = GetCampaign(id);
  }
  ASSERT_EQ(now.state(), v1::Campaign::RUNNING) << now.DebugString();
  ASSERT_THAT(now.note(), StartsWith("waiting to start trial ")) << now.DebugString();
  EXPECT_THAT(now.note(), HasSubstr(" UTC, at most 1m): "));
  EXPECT_THAT(now.note(), HasSubstr("events a second of the job signal's op \"step\""));
  const int waited_for = now.trials_size() + 1;
  // Back after 20 s: once the rate (read over 30 s) suffices, the campaign
  // waits a full baseline of samples (4 s here, and a window), as the trial's
  // baseline is the period before it starts, then starts the trial.
  Run(20);
  paused = false;
  bool said_back = false;
  for (int i = 0; i < 60 && now.trials_size() < waited_for; ++i) {
    Run(1);
    now = GetCampaign(id);
    said_back = said_back || absl::StartsWith(now.note(), "the samples are back after ");
  }
  EXPECT_TRUE(said_back);
  ASSERT_EQ(now.state(), v1::Campaign::RUNNING) << now.DebugString();
  ASSERT_EQ(now.trials_size(), waited_for) << now.DebugString();
  EXPECT_EQ(now.trials(waited_for - 1).outcome(), "running");
  EXPECT_THAT(now.note(),
              StartsWith(absl::StrCat("ready to start trial ", waited_for, " after waiting ")));
  // Its baseline and bake hold the job's steps: it is judged, not held.
  for (int i = 0; i < 60 && now.trials(waited_for - 1).outcome() == "running"; ++i) {
    Run(1);
    now = GetCampaign(id);
  }
  EXPECT_NE(now.trials(waited_for - 1).outcome(), "running");
  EXPECT_NE(now.trials(waited_for - 1).outcome(), "hold") << now.trials(waited_for - 1).note();
  // Paused again, for good: the wait starts afresh and ends at its bound.
  paused = true;
  absl::Time waiting_from = absl::InfinitePast();
  now = RunCampaign(id, [&](const v1::Campaign& t) {
    if (waiting_from == absl::InfinitePast() && absl::StartsWith(t.note(), "waiting")) {
      waiting_from = clock_.Now();
    }
  });
  EXPECT_EQ(now.state(), v1::Campaign::STOPPED) << now.DebugString();
  EXPECT_THAT(now.note(), HasSubstr("could not be built for 1m: "));
  EXPECT_THAT(now.note(), HasSubstr("the step_time_p99 constraint could not be judged"));
  ASSERT_NE(waiting_from, absl::InfinitePast());
  EXPECT_GE(clock_.Now() - waiting_from, absl::Seconds(59));
  EXPECT_LE(clock_.Now() - waiting_from, absl::Seconds(62));
}

// The confirmed winner's proposal waits out a pause of the job signal as a
// trial does. The hosts of five racks of eight stop reporting the job 6 s
// before a one-trial campaign starts (the other three racks give the trial
// and its confirmation the job's steps to judge, guard.min_rack_pairs 3).
// The median host's rate over the last 30 s still fills a baseline when the
// confirmation starts (20 s into the pause), but no longer when the winner is
// proposed (34 s in). Feeds telemetry until the campaign says it waits to
// propose (at most 120 s) and returns it then; `*paused` is the pause.
v1::Campaign RolloutTest::CampaignWaitingToProposeItsWinner(bool* paused) {
  ApplyPolicy(absl::StrReplaceAll(JobHeldPolicy(), {{"trial_budget: 8", "trial_budget: 1"},
                                                    {"min_rack_pairs: 6", "min_rack_pairs: 3"},
                                                    {"max_ratio: 1.05", "max_ratio: 1.5"}}));
  // The one trial (rpg_time_reset 300 -> 600) halves the probes' tail.
  factor_ = [](int64_t v) { return v >= 600 ? 0.5 : 1.0; };
  job_tail_factor_ = [this, paused](const std::string& h) {
    return *paused && rack_of_[h] >= 3 ? 0.0 : 1.0;
  };
  Run(40);
  *paused = true;
  Run(6);
  const std::string id = StartApprovedCampaign();
  v1::Campaign now;
  if (id.empty()) return now;
  for (int i = 0; i < 120; ++i) {
    Run(1);
    now = GetCampaign(id);
    if (now.state() != v1::Campaign::RUNNING ||
        absl::StartsWith(now.note(), "waiting to propose")) {
      break;
    }
  }
  return now;
}

TEST_F(RolloutTest, ACampaignWaitsOutAPauseOfTheJobSignalToProposeItsConfirmedWinner) {
  bool paused = false;
  v1::Campaign now = CampaignWaitingToProposeItsWinner(&paused);
  ASSERT_EQ(now.state(), v1::Campaign::RUNNING) << now.DebugString();
  EXPECT_THAT(now.note(), StartsWith("waiting to propose its confirmed winner (since "));
  EXPECT_THAT(now.note(), HasSubstr(" UTC, at most 1m): "));
  EXPECT_THAT(now.note(), HasSubstr("events a second of the job signal's op \"step\""));
  ASSERT_EQ(now.trials_size(), 2) << now.DebugString();
  EXPECT_EQ(now.trials(1).outcome(), "confirmed") << now.trials(1).DebugString();
  EXPECT_TRUE(now.promotion_change_id().empty());
  // Still waiting 20 s on, and nothing proposed meanwhile.
  Run(20);
  now = GetCampaign(now.id());
  ASSERT_EQ(now.state(), v1::Campaign::RUNNING) << now.DebugString();
  EXPECT_THAT(now.note(), StartsWith("waiting to propose its confirmed winner"));
  // The job reports again: the winner is proposed at the first retry
  // (Campaigns::kWaitRetryEvery, 10 s, while waiting) that finds the rate
  // read over 30 s filling a baseline again, after 3 s of steps (no extra
  // baseline: the promotion takes its own): at most 10 + 3 s after the job is
  // back, and 2 s of slack.
  paused = false;
  const absl::Time back = clock_.Now();
  now = RunCampaign(now.id());
  ASSERT_EQ(now.state(), v1::Campaign::FINISHED) << now.DebugString();
  EXPECT_LE(clock_.Now() - back, absl::Seconds(10 + 3 + 2));
  ASSERT_FALSE(now.promotion_change_id().empty()) << now.DebugString();
  EXPECT_THAT(now.note(), Not(HasSubstr("not proposed"))) << now.note();
  const v1::Change promotion = Get(now.promotion_change_id());
  EXPECT_EQ(promotion.state(), v1::PROPOSED) << promotion.DebugString().substr(0, 2000);
  EXPECT_EQ(promotion.knobs().at("rpg_time_reset"), 600);
}

// The same pause, for good: the campaign finishes at the wait's bound with
// its winner not proposed, saying it waited and why.
TEST_F(RolloutTest, ACampaignWhoseJobStaysPausedFinishesWithoutProposingAtTheWaitsBound) {
  bool paused = false;
  v1::Campaign now = CampaignWaitingToProposeItsWinner(&paused);
  ASSERT_EQ(now.state(), v1::Campaign::RUNNING) << now.DebugString();
  ASSERT_THAT(now.note(), StartsWith("waiting to propose its confirmed winner"));
  const absl::Time waiting_from = clock_.Now();
  now = RunCampaign(now.id());
  ASSERT_EQ(now.state(), v1::Campaign::FINISHED) << now.DebugString();
  EXPECT_GE(clock_.Now() - waiting_from, absl::Seconds(58));
  EXPECT_LE(clock_.Now() - waiting_from, absl::Seconds(62));
  EXPECT_TRUE(now.promotion_change_id().empty()) << now.DebugString();
  EXPECT_THAT(now.note(), HasSubstr("; promotion not proposed after waiting 1m: "));
  EXPECT_THAT(now.note(), HasSubstr("the step_time_p99 constraint could not be judged"));
  const v1::AuditEntry row = CampaignAudit(now.id(), "campaign_finished");
  EXPECT_THAT(row.reason(), HasSubstr("promotion not proposed after waiting 1m"));
  EXPECT_THAT(row.detail(), HasSubstr("nothing proposed")) << row.DebugString();
}

// The same campaign without the job's cost: the fleet check passes each trial
// and its evidence joins the trial's verdict.
TEST_F(RolloutTest, ATrialThatLeavesTheJobAlonePassesItsFleetCheck) {
  ApplyPolicy(JobHeldPolicy());
  factor_ = TailShrinksWithTimeReset;
  job_tail_factor_ = [](const std::string&) { return 1.0; };
  Run(40);
  const v1::Campaign now = CampaignRun();
  ASSERT_EQ(now.state(), v1::Campaign::FINISHED) << now.DebugString();
  int improved = 0;
  for (const v1::Trial& tr : now.trials()) {
    improved += tr.outcome() == "improved" ? 1 : 0;
    const v1::Change c = Get(tr.change_id());
    const v1::Verdict& v = c.verdicts(c.verdicts_size() - 1);
    if (v.outcome() != v1::Verdict::PASS) continue;
    const v1::MetricEvidence* m = FleetMetric(v, "fleet_step_time_p99");
    ASSERT_NE(m, nullptr) << v.DebugString();
    EXPECT_EQ(m->outcome(), "pass") << m->note();
    EXPECT_NEAR(m->ratio(), 1.0, 0.1);
  }
  EXPECT_GE(improved, 1) << now.DebugString();
  EXPECT_FALSE(now.promotion_change_id().empty()) << now.DebugString();
}

// Between the two: every trial slows the whole fleet's job by 12%, beyond the
// constraint's 1.05 but inside its FAIL threshold (1.05 widened by the noise
// margin, x1.155 here), so the fleet check PASSes the trials. A trial the
// judge and the fleet check passed may still cost the job more than the
// policy tolerates: no such trial improves (constraint_exceeded, naming the
// fleet's figure when the canary/control one is within) and nothing is
// proposed. (In an e2e run a winner measured at x1.17 for a 1.1 tolerance
// was confirmed, proposed and rolled back at its promotion's last stage.)
TEST_F(RolloutTest, ATrialWithinTheFleetChecksMarginButBeyondTheToleranceDoesNotWin) {
  ApplyPolicy(JobHeldPolicy());
  factor_ = TailShrinksWithTimeReset;
  job_tail_factor_ = [this](const std::string&) { return AnyChangeActive() ? 1.12 : 1.0; };
  Run(40);
  const v1::Campaign now = CampaignRun();
  ASSERT_EQ(now.state(), v1::Campaign::FINISHED) << now.DebugString();
  int fleet_named = 0;
  double best_exceeded = 1;
  for (const v1::Trial& tr : now.trials()) {
    const v1::Change c = Get(tr.change_id());
    ASSERT_GT(c.verdicts_size(), 0) << c.DebugString();
    const v1::Verdict& v = c.verdicts(c.verdicts_size() - 1);
    const v1::MetricEvidence* m = FleetMetric(v, "fleet_step_time_p99");
    std::printf("trial %u %s objective %.3f fleet job %.3f\n", tr.index(), tr.outcome().c_str(),
                tr.objective_ratio(), m != nullptr ? m->ratio() : 0.0);
    if (v.outcome() != v1::Verdict::PASS || m == nullptr || m->ratio() <= 1.05) continue;
    EXPECT_EQ(m->outcome(), "pass") << m->note();
    EXPECT_EQ(tr.outcome(), "constraint_exceeded") << tr.DebugString();
    EXPECT_THAT(tr.note(), HasSubstr("beyond the tolerated 1.050")) << tr.DebugString();
    if (absl::StartsWith(tr.note(), "fleet step_time_p99 1.")) ++fleet_named;
    best_exceeded = std::min(best_exceeded, tr.objective_ratio());
  }
  EXPECT_GE(fleet_named, 1) << now.DebugString();
  EXPECT_LT(best_exceeded, 0.9) << "a trial the search would have taken: " << now.DebugString();
  EXPECT_TRUE(now.promotion_change_id().empty()) << now.DebugString();
}

TEST_F(RolloutTest, NeutralChangePassesTheFleetGuardAtEveryStepToDone) {
  ApplyPolicy(PolicyText());
  // Throughput varies +-4% per host and window, the same before and after.
  tx_bytes_ = [this](const std::string&) {
    std::uniform_real_distribution<double> u(0.96, 1.04);
    return static_cast<uint64_t>(10e9 * u(rng_));
  };
  Run(6);
  auto c = Propose(100);
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_TRUE(Act("approve", c->id(), {"bob", false}).ok());
  Tick();
  for (int i = 0; i < 60 && InFlightForTest(Get(c->id()).state()); ++i) Run(1);
  v1::Change now = Get(c->id());
  ASSERT_EQ(now.state(), v1::DONE) << now.DebugString().substr(0, 4000);
  // Canary, stage 1 and the final fleet bake at 100% (stage 2, no control
  // left): each final PASS carries the fleet figures.
  std::vector<uint32_t> stages;
  for (const v1::Verdict& v : now.verdicts()) {
    const v1::MetricEvidence* f = FleetMetric(v, "fleet_throughput_gbps");
    if (v.outcome() != v1::Verdict::PASS || f == nullptr) continue;
    stages.push_back(v.stage());
    EXPECT_EQ(f->outcome(), "pass");
    EXPECT_NEAR(f->ratio(), 1.0, 0.03);
    EXPECT_EQ(f->rack_pairs(), 32u) << "every host compared";
  }
  EXPECT_EQ(stages, (std::vector<uint32_t>{0, 1, 2}));
  const v1::Verdict& last = now.verdicts(now.verdicts_size() - 1);
  EXPECT_EQ(last.rule(), "no_control_left");
  for (const std::string& h : hosts_) EXPECT_EQ(DesiredValue(h), 100) << h;
}

TEST_F(RolloutTest, FleetGuardHoldsWithoutFleetDataAndTheHoldLimitAborts) {
  ApplyPolicy(PolicyText(1, 4));
  Run(6);
  auto c = Propose(100);
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_TRUE(Act("approve", c->id(), {"bob", false}).ok());
  Tick();
  for (int i = 0; i < 60; ++i) {
    const v1::Change now = Get(c->id());
    if (now.state() == v1::STAGE && now.stage() == 2) break;
    Run(1);
  }
  ASSERT_EQ(Get(c->id()).stage(), 2u);
  // Half the fleet goes silent: the last stage (no control) cannot be judged
  // by the fleet guard, which never lets it through.
  const std::vector<std::string> all = hosts_;
  hosts_.resize(all.size() / 2);
  for (int i = 0; i < 30 && InFlightForTest(Get(c->id()).state()); ++i) Run(1);
  hosts_ = all;
  v1::Change now = Get(c->id());
  EXPECT_EQ(now.state(), v1::ABORTED) << now.DebugString().substr(0, 3000);
  bool fleet_hold = false;
  for (const v1::Verdict& v : now.verdicts()) {
    fleet_hold |= v.rule() == "fleet_data" && v.outcome() == v1::Verdict::HOLD;
  }
  EXPECT_TRUE(fleet_hold);
  for (const std::string& h : hosts_) EXPECT_EQ(DesiredValue(h), 300) << h;
}

}  // namespace
}  // namespace rocetune::controller
