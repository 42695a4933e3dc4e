// The rollout manager with switch knobs, in process and deterministic: a fake
// clock, a real Fleet, TelemetryStore, Store, policy loader and judge; 8 racks
// of 4 hosts, each rack under a fake ToR switch agent (role=switch, tor=<N>).
// The hosts' probe RTT tail follows their ToR's ECN Kmin, so a change on the
// canary ToRs shows in the hosts below them (the judge's rack-level design:
// no rack holds both canary and control hosts).
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
#include "absl/synchronization/mutex.h"
#include "controller/rollout/rollout_manager.h"
#include "controller/rollout/switch_plan.h"
#include "daemon/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/controller/controller_test_util.h"
#include "tests/controller/fake_agent.h"

namespace rocetune::controller {
namespace {

using ::testing::HasSubstr;

constexpr int kRacks = 8;
constexpr int kHostsPerRack = 4;
constexpr int kProbesPerWindow = 1000;
constexpr char kKmin[] = "ecn.AZURE_LOSSLESS.green_min_threshold";
constexpr char kKmax[] = "ecn.AZURE_LOSSLESS.green_max_threshold";

using testing::FakeAgent;

std::string SwitchPolicy() {
  return R"pb(
    name: "tor-ecn"
    selector { match_labels { key: "role" value: "switch" } }
    objective { metric: PROBE_RTT_P99 }
    knobs { parameter: "ecn.AZURE_LOSSLESS.green_min_threshold" min: 50000 max: 800000 step: 50000 }
    tuner { kind: COORDINATE_DESCENT trial_budget: 4 min_improvement: 0.03 }
    rollout {
      canary_fraction: 0.25
      min_canary_hosts: 8
      bake_seconds: 6
      stages: [ 0.5, 1.0 ]
      rack_label: "tor"
      baseline_seconds: 4
      looks: 3
    }
    guard {
      max_p99_regression: 0.05
      pass_max_ucb_regression: 0.2
      confidence: 0.995
      min_samples: 1500
      min_rack_pairs: 6
      max_hold_seconds: 12
      local_guard_rounds: 3
    }
  )pb";
}

class RolloutSwitchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::MakeTempDir();
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
    manager_ = std::make_unique<RolloutManager>(fleet_.get(), telemetry_.get(), store_.get(),
                                                nullptr, &clock_, ropt);
    ASSERT_TRUE(manager_->Load().ok());
    manager_->Start();
    for (int r = 0; r < kRacks; ++r) {
      ConnectSwitch(r);
      for (int i = 0; i < kHostsPerRack; ++i) ConnectHost(r, i);
    }
    v1::ApplyPolicyRequest req;
    req.set_text(SwitchPolicy());
    req.set_file_name("tor-ecn.textproto");
    auto applied = OnExec<absl::StatusOr<v1::ApplyPolicyResponse>>([&] {
      return manager_->ApplyPolicy(req, Identity{"alice", false});
    });
    ASSERT_TRUE(applied.ok()) << applied.status();
  }
  void TearDown() override {
    manager_->Stop();
    manager_.reset();
    agents_.clear();
    fleet_.reset();
  }

  void ConnectSwitch(int rack) {
    v1::Hello h;
    h.set_host_id(absl::StrCat("sim-tor", rack));
    (*h.mutable_labels())["tor"] = absl::StrCat(rack);
    h.add_capabilities("switch.sim");
    v1::NicDevice* d = h.add_devices();
    d->set_name("switch");
    d->set_switch_buffer_bytes(16000000);
    v1::DeviceParameters* p = h.mutable_current_parameters()->add_devices();
    p->set_device("switch");
    (*p->mutable_dcqcn())[kKmin] = 400000;
    (*p->mutable_dcqcn())[kKmax] = 1600000;
    Register(h, rack);
    switches_.push_back(h.host_id());
  }
  void ConnectHost(int rack, int i) {
    v1::Hello h;
    h.set_host_id(absl::StrCat("h", rack, "-", i));
    (*h.mutable_labels())["tor"] = absl::StrCat(rack);
    (*h.mutable_labels())["role"] = "trainer";
    v1::NicDevice* d = h.add_devices();
    d->set_name("mlx5_0");
    d->set_cc_param_layout("ofed_sysfs");
    d->add_ports()->set_speed_mbps(100000);
    v1::DeviceParameters* p = h.mutable_current_parameters()->add_devices();
    p->set_device("mlx5_0");
    (*p->mutable_dcqcn())["rpg_time_reset"] = 300;
    Register(h, rack);
    hosts_.push_back(h.host_id());
  }
  void Register(const v1::Hello& h, int rack) {
    auto agent =
        std::make_shared<FakeAgent>(++stream_, fleet_.get(), h.host_id(), h.current_parameters());
    agents_[h.host_id()] = agent;
    rack_of_[h.host_id()] = rack;
    auto reg = fleet_->Register(h, agent);
    ASSERT_TRUE(reg.ok()) << reg.status();
    telem_[h.host_id()] = reg->telemetry;
  }

  // One window of host telemetry per second; a host's RTT tail scales with
  // factor_(its ToR's Kmin). Switches report no probes.
  void Run(int seconds) {
    for (int s = 0; s < seconds; ++s) {
      const absl::Time start = clock_.Now();
      for (const std::string& id : hosts_) {
        if (silent_.contains(id)) continue;
        const int64_t kmin = agents_[absl::StrCat("sim-tor", rack_of_[id])]->Param(kKmin);
        const double factor = factor_(kmin);
        v1::Report r;
        r.set_seq(++seq_);
        r.set_start_unix_nanos(absl::ToUnixNanos(start));
        r.set_end_unix_nanos(absl::ToUnixNanos(start + absl::Seconds(1)));
        QuantileSketch sk;
        std::lognormal_distribution<double> body(std::log(10e-6), 0.25);
        std::lognormal_distribution<double> tail(std::log(30e-6), 0.5);
        std::uniform_real_distribution<double> u(0, 1);
        for (int i = 0; i < kProbesPerWindow; ++i) {
          sk.Insert(u(rng_) < 0.03 ? tail(rng_) * factor : body(rng_));
        }
        v1::LatencyWindow* w = r.add_latency();
        w->set_peer_class("intra_tor");
        sk.ToProto(w->mutable_network_rtt_seconds());
        w->set_probes_sent(kProbesPerWindow);
        v1::CounterSample* c = r.add_counters();
        c->set_device("mlx5_0");
        c->set_port(1);
        c->set_priority(-1);
        c->set_name("tx_bytes");
        c->set_delta(10'000'000'000ull);
        c->set_rate_per_second(1e10);
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
  absl::StatusOr<v1::Change> Propose(int64_t kmin) {
    return OnExec<absl::StatusOr<v1::Change>>([&] {
      v1::ProposeChangeRequest req;
      req.set_policy_name("tor-ecn");
      (*req.mutable_knobs())[kKmin] = kmin;
      req.set_reason("test");
      return manager_->Propose(req, Identity{"alice", false});
    });
  }
  absl::StatusOr<v1::Change> Act(const std::string& what, const std::string& id) {
    return OnExec<absl::StatusOr<v1::Change>>([&] {
      v1::ChangeActionRequest req;
      req.set_id(id);
      req.set_reason(absl::StrCat(what, " in test"));
      if (what == "approve") return manager_->Approve(req, Identity{"bob", false});
      return manager_->Rollback(req, Identity{"bob", false});
    });
  }
  v1::Change Get(const std::string& id) {
    auto c = OnExec<absl::StatusOr<v1::Change>>([&] { return manager_->GetChange(id); });
    EXPECT_TRUE(c.ok()) << c.status();
    return c.ok() ? *c : v1::Change();
  }
  int HostPushes() {
    int n = 0;
    for (const std::string& h : hosts_) n += agents_[h]->pushes();
    return n;
  }

  FakeClock clock_{absl::FromUnixSeconds(1'700'000'000)};
  std::string dir_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<TelemetryStore> telemetry_;
  std::unique_ptr<Fleet> fleet_;
  std::unique_ptr<RolloutManager> manager_;
  std::vector<std::string> hosts_, switches_;
  std::map<std::string, int> rack_of_;
  std::set<std::string> silent_;  // hosts that never report
  std::map<std::string, std::shared_ptr<FakeAgent>> agents_;
  std::map<std::string, std::shared_ptr<HostTelemetry>> telem_;
  uint64_t stream_ = 0;
  uint64_t seq_ = 0;
  std::mt19937_64 rng_{7};
  // Lower Kmin, shorter tail: the change helps.
  std::function<double(int64_t)> factor_ = [](int64_t kmin) { return kmin < 400000 ? 0.7 : 1.0; };
};

TEST_F(RolloutSwitchTest, SwitchChangeCanariesTorsThenStagesToDoneAndRollsBack) {
  Run(6);
  auto c = Propose(100000);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->hosts_size(), kRacks * (kHostsPerRack + 1)) << "switches and the hosts below";
  for (const v1::HostTarget& t : c->hosts()) {
    if (!t.has_target()) continue;  // measured hosts carry no set
    EXPECT_EQ(t.target().local_guard().rounds_over(), 3u)
        << "the policy's guard rounds reach " << t.host_id();
  }
  ASSERT_TRUE(Act("approve", c->id()).ok());
  Tick();
  v1::Change now = Get(c->id());
  ASSERT_EQ(now.state(), v1::CANARY);
  int canary_tors = 0;
  for (const v1::HostTarget& t : now.hosts()) {
    if (!IsSwitchTarget(t)) continue;
    const bool canary = t.role() == v1::HostTarget::CANARY;
    canary_tors += canary;
    EXPECT_EQ(agents_[t.host_id()]->Param(kKmin), canary ? 100000 : 400000) << t.host_id();
  }
  EXPECT_EQ(canary_tors, 2);
  EXPECT_EQ(HostPushes(), 0) << "a switch change never pushes to the hosts it measures";
  // A ToR and a measured host of an active change take no manual push.
  for (const std::string& member : {std::string("sim-tor0"), std::string("h0-0")}) {
    auto push = OnExec<absl::StatusOr<v1::SetDesiredStateResponse>>([&] {
      v1::SetDesiredStateRequest req;
      req.set_host_id(member);
      return manager_->SetDesiredState(req, Identity{"carol", false});
    });
    EXPECT_EQ(push.status().code(), absl::StatusCode::kFailedPrecondition) << member;
    EXPECT_THAT(push.status().message(), HasSubstr(c->id())) << member;
  }
  Run(40);
  now = Get(c->id());
  ASSERT_EQ(now.state(), v1::DONE) << now.DebugString().substr(0, 4000);
  bool stage = false, rack_level = false;
  for (const auto& t : now.transitions()) stage |= t.to() == v1::STAGE;
  for (const auto& v : now.verdicts()) {
    for (const auto& m : v.metrics()) rack_level |= absl::StrContains(m.note(), "rack-level");
  }
  EXPECT_TRUE(stage);
  EXPECT_TRUE(rack_level) << "canary and control are whole racks";
  for (const std::string& s : switches_) EXPECT_EQ(agents_[s]->Param(kKmin), 100000) << s;
  EXPECT_EQ(HostPushes(), 0);

  // Rolling back the finished change returns every ToR to its previous set.
  auto rolled = Act("rollback", c->id());
  ASSERT_TRUE(rolled.ok()) << rolled.status();
  EXPECT_EQ(rolled->state(), v1::ROLLED_BACK);
  for (const std::string& s : switches_) {
    EXPECT_EQ(agents_[s]->Param(kKmin), 400000) << s;
    EXPECT_EQ(agents_[s]->Param(kKmax), 1600000) << s;
  }
  EXPECT_EQ(HostPushes(), 0);
  auto chain = store_->VerifyAudit();
  ASSERT_TRUE(chain.ok());
  EXPECT_TRUE(chain->ok()) << chain->problem();
}

// The fleet guard's coverage rule (data from 80% of the change's hosts) counts
// the hosts a switch change measures, not its switches, which report no
// throughput: one silent host of 32 must not hold the change.
TEST_F(RolloutSwitchTest, FleetGuardCoverageCountsHostsNotSwitches) {
  silent_.insert("h3-1");
  Run(6);
  auto c = Propose(100000);
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_TRUE(Act("approve", c->id()).ok());
  Run(40);
  const v1::Change now = Get(c->id());
  ASSERT_EQ(now.state(), v1::DONE) << now.DebugString().substr(0, 4000);
  bool fleet_evidence = false;
  for (const v1::Verdict& v : now.verdicts()) {
    EXPECT_NE(v.rule(), "fleet_data") << v.summary();
    for (const v1::GroupEvidence& g : v.groups()) {
      if (g.group() != "fleet") continue;
      fleet_evidence = true;
      EXPECT_EQ(g.hosts(), static_cast<uint32_t>(kRacks * kHostsPerRack - 1));
    }
  }
  EXPECT_TRUE(fleet_evidence) << "the fleet guard judged the last stage";
}

TEST_F(RolloutSwitchTest, RegressionOnCanaryTorsRollsTheSwitchesBack) {
  factor_ = [](int64_t kmin) { return kmin > 400000 ? 1.8 : 1.0; };
  Run(6);
  auto c = Propose(800000);
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_TRUE(Act("approve", c->id()).ok());
  Tick();
  for (int i = 0; i < 15 && Get(c->id()).state() == v1::CANARY; ++i) Run(1);
  v1::Change now = Get(c->id());
  ASSERT_EQ(now.state(), v1::ROLLED_BACK) << now.DebugString().substr(0, 4000);
  EXPECT_EQ(now.verdicts(now.verdicts_size() - 1).outcome(), v1::Verdict::FAIL);
  for (const std::string& s : switches_) EXPECT_EQ(agents_[s]->Param(kKmin), 400000) << s;
  for (const v1::HostTarget& t : now.hosts()) {
    if (IsSwitchTarget(t) && t.role() == v1::HostTarget::CANARY) {
      EXPECT_FALSE(t.pushed_version().empty()) << t.host_id();
    }
    if (!IsSwitchTarget(t)) {
      EXPECT_TRUE(t.pushed_version().empty()) << t.host_id();
    }
  }
  // The racks are free again: a new change may take them.
  EXPECT_TRUE(Propose(200000).ok());
}

TEST_F(RolloutSwitchTest, CampaignTrialsChangeOnlyTheCanaryTors) {
  Run(6);
  auto t = OnExec<absl::StatusOr<v1::Campaign>>([&] {
    v1::StartCampaignRequest req;
    req.set_policy_name("tor-ecn");
    req.set_trial_budget(2);
    return manager_->campaigns().Start(req, Identity{"alice", false});
  });
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->start().at(kKmin), 400000) << "start values read from the switches";
  auto approved = OnExec<absl::StatusOr<v1::Campaign>>([&] {
    v1::ChangeActionRequest req;
    req.set_id(t->id());
    return manager_->campaigns().Approve(req, Identity{"bob", false});
  });
  ASSERT_TRUE(approved.ok()) << approved.status();
  Tick();
  auto running =
      OnExec<absl::StatusOr<v1::Campaign>>([&] { return manager_->campaigns().Get(t->id()); });
  ASSERT_TRUE(running.ok());
  ASSERT_EQ(running->trials_size(), 1);
  Tick();
  v1::Change trial = Get(running->trials(0).change_id());
  ASSERT_EQ(trial.state(), v1::CANARY) << trial.DebugString().substr(0, 2000);
  EXPECT_TRUE(trial.canary_only());
  const int64_t value = running->trials(0).knobs().at(kKmin);
  for (const v1::HostTarget& h : trial.hosts()) {
    if (!IsSwitchTarget(h)) continue;
    EXPECT_EQ(agents_[h.host_id()]->Param(kKmin),
              h.role() == v1::HostTarget::CANARY ? value : 400000)
        << h.host_id();
  }
  for (int i = 0; i < 40 && (trial.state() == v1::CANARY || trial.state() == v1::STAGE); ++i) {
    Run(1);
    trial = Get(trial.id());
  }
  EXPECT_TRUE(trial.state() == v1::DONE || trial.state() == v1::ROLLED_BACK)
      << v1::ChangeState_Name(trial.state());
  for (const auto& x : trial.transitions()) EXPECT_NE(x.to(), v1::STAGE) << "a trial stays canary";
  for (const std::string& s : switches_) EXPECT_EQ(agents_[s]->Param(kKmin), 400000) << s;
  EXPECT_EQ(HostPushes(), 0);
}

}  // namespace
}  // namespace rocetune::controller
