#include "agent/apply/nic_owner.h"

#include <stdlib.h>

#include <atomic>
#include <filesystem>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "agent/host/cc_param_store.h"
#include "daemon/logging.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace rocetune {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;

// An in-memory DCQCN store of one device. Thread-safe. Counts overlapping
// callers: the owner must never let two of them in at once.
class MemoryCcStore : public CcParamStore {
 public:
  std::string layout() const override { return "memory"; }
  absl::StatusOr<v1::DeviceParameters> Read(const std::string& device) override {
    Enter();
    absl::MutexLock lock(&mu_);
    v1::DeviceParameters d;
    d.set_device(device);
    for (const auto& [k, v] : values_) (*d.mutable_dcqcn())[k] = v;
    Leave();
    return d;
  }
  absl::Status Write(const std::string&, const std::string& name, int64_t value) override {
    Enter();
    {
      absl::MutexLock lock(&mu_);
      values_[name] = value;
    }
    Leave();
    return absl::OkStatus();
  }
  // An out-of-band write (an operator, a script): not through the owner.
  void Poke(const std::string& name, int64_t value) {
    absl::MutexLock lock(&mu_);
    values_[name] = value;
  }
  int64_t Get(const std::string& name) {
    absl::MutexLock lock(&mu_);
    return values_[name];
  }
  int max_inside() const { return max_inside_.load(); }

 private:
  void Enter() {
    int n = ++inside_;
    int m = max_inside_.load();
    while (n > m && !max_inside_.compare_exchange_weak(m, n)) {
    }
  }
  void Leave() { --inside_; }
  absl::Mutex mu_;
  std::map<std::string, int64_t> values_ ABSL_GUARDED_BY(mu_) = {{"rpg_ai_rate", 5},
                                                                 {"rpg_hai_rate", 50}};
  std::atomic<int> inside_{0};
  std::atomic<int> max_inside_{0};
};

v1::ParameterSet AiRate(int64_t v) {
  v1::ParameterSet set;
  v1::DeviceParameters* d = set.add_devices();
  d->set_device("mlx5_0");
  (*d->mutable_dcqcn())["rpg_ai_rate"] = v;
  return set;
}

google::protobuf::RepeatedPtrField<v1::CounterSample> CnpStorm() {
  google::protobuf::RepeatedPtrField<v1::CounterSample> round;
  v1::CounterSample* s = round.Add();
  s->set_device("mlx5_0");
  s->set_port(1);
  s->set_priority(-1);
  s->set_name("cnp_handled");
  s->set_rate_per_second(1e9);
  return round;
}

class NicOwnerTest : public ::testing::Test {
 protected:
  NicOwnerTest() {
    dir_ = absl::StrCat(::testing::TempDir(), "/nic_owner_", getpid(), "_",
                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    journal_ = std::make_unique<LkgJournal>(dir_);
    LocalGuardOptions o;
    o.window = absl::Seconds(10);
    o.max_cnp_rate_per_second = 1000;
    o.max_pfc_pause_ratio = 0;
    o.rounds_over = 1;
    guard_ = std::make_unique<LocalGuard>(o, &clock_, &applier_, journal_.get());
    owner_ = std::make_unique<NicOwner>(&applier_, journal_.get(), guard_.get(), nullptr, "h7");
    v1::ParameterSet base = applier_.ReadCurrent();
    EXPECT_TRUE(journal_->Save("baseline", base).ok());
    owner_->SetExpected("baseline", base);
  }
  ~NicOwnerTest() override { std::filesystem::remove_all(dir_); }

  std::string dir_;
  MemoryCcStore store_;
  Applier applier_{{{"mlx5_0", {&store_, nullptr, ""}}}};
  FakeClock clock_;
  std::unique_ptr<LkgJournal> journal_;
  std::unique_ptr<LocalGuard> guard_;
  std::unique_ptr<NicOwner> owner_;
};

TEST_F(NicOwnerTest, OutOfBandWriteIsDriftUntilReapplied) {
  ASSERT_TRUE(owner_->Apply("12", AiRate(33)).ok());
  EXPECT_THAT(owner_->CheckDrift(), IsEmpty());
  store_.Poke("rpg_ai_rate", 5);
  v1::ParameterSet current;
  std::vector<DriftItem> drift = owner_->CheckDrift(&current);
  ASSERT_EQ(drift.size(), 1u);
  EXPECT_EQ(drift[0].Text(), "mlx5_0/rpg_ai_rate: expected 33, found 5");
  EXPECT_EQ(current.devices(0).dcqcn().at("rpg_ai_rate"), 5);
  // Re-applying the same version corrects it.
  ASSERT_TRUE(owner_->Apply("12", AiRate(33)).ok());
  EXPECT_THAT(owner_->CheckDrift(), IsEmpty());
  EXPECT_EQ(store_.Get("rpg_ai_rate"), 33);
}

// Issue 28 item 1: re-applying a set that names only rpg_ai_rate took the
// whole device's read-back as the new expected state, so an out-of-band write
// to another parameter of that device (here rpg_hai_rate) was absorbed by the
// next re-push and never reported again. It stays drift now.
TEST_F(NicOwnerTest, ReapplyingASetDoesNotAbsorbAnOutOfBandWriteToAnotherParameter) {
  ASSERT_TRUE(owner_->Apply("12", AiRate(33)).ok());
  store_.Poke("rpg_hai_rate", 777);
  ASSERT_EQ(owner_->CheckDrift().size(), 1u);
  ASSERT_TRUE(owner_->Apply("12", AiRate(33)).ok());  // the controller's re-push
  std::vector<DriftItem> drift = owner_->CheckDrift();
  ASSERT_EQ(drift.size(), 1u);
  EXPECT_EQ(drift[0].Text(), "mlx5_0/rpg_hai_rate: expected 50, found 777");
  // A set that names it writes it back and it is expected as written.
  v1::ParameterSet both = AiRate(33);
  (*both.mutable_devices(0)->mutable_dcqcn())["rpg_hai_rate"] = 50;
  ASSERT_TRUE(owner_->Apply("13", both).ok());
  EXPECT_THAT(owner_->CheckDrift(), IsEmpty());
  EXPECT_EQ(store_.Get("rpg_hai_rate"), 50);
}

TEST(NicOwnerMergeTest, NamedFromTheReadBackOthersKeptNewTakenAsRead) {
  v1::ParameterSet expected;
  v1::DeviceParameters* e0 = expected.add_devices();
  e0->set_device("mlx5_0");
  (*e0->mutable_dcqcn())["rpg_ai_rate"] = 5;
  (*e0->mutable_dcqcn())["rpg_hai_rate"] = 50;
  e0->mutable_pfc()->set_enable_mask(0x08);
  v1::DeviceParameters* e1 = expected.add_devices();
  e1->set_device("mlx5_1");
  (*e1->mutable_dcqcn())["rpg_time_reset"] = 300;
  v1::ParameterSet set = AiRate(33);
  v1::ParameterSet back;
  v1::DeviceParameters* b0 = back.add_devices();
  b0->set_device("mlx5_0");
  (*b0->mutable_dcqcn())["rpg_ai_rate"] = 33;
  (*b0->mutable_dcqcn())["rpg_hai_rate"] = 777;  // written by someone else
  (*b0->mutable_dcqcn())["rpg_gd"] = 11;         // not expected before
  v1::ParameterSet next = NicOwner::MergeExpected(expected, set, back);
  ASSERT_EQ(next.devices_size(), 2);
  EXPECT_EQ(next.devices(0).dcqcn().at("rpg_ai_rate"), 33);
  EXPECT_EQ(next.devices(0).dcqcn().at("rpg_hai_rate"), 50);
  EXPECT_EQ(next.devices(0).dcqcn().at("rpg_gd"), 11);
  EXPECT_EQ(next.devices(0).pfc().enable_mask(), 0x08u);
  EXPECT_EQ(next.devices(1).dcqcn().at("rpg_time_reset"), 300);
}

TEST_F(NicOwnerTest, GuardRestoreBecomesTheExpectedState) {
  ASSERT_TRUE(owner_->Apply("7", AiRate(40)).ok());
  std::optional<v1::GuardEvent> ev =
      owner_->Observe(CnpStorm(), clock_.Monotonic(), clock_.Monotonic());
  ASSERT_TRUE(ev.has_value());
  EXPECT_EQ(ev->restored_version(), "baseline");
  EXPECT_EQ(owner_->expected_version(), "baseline");
  EXPECT_EQ(store_.Get("rpg_ai_rate"), 5);
  EXPECT_THAT(owner_->CheckDrift(), IsEmpty());
}

TEST_F(NicOwnerTest, TheSetNamesHowManyRoundsTheGuardWaits) {
  v1::ParameterSet set = AiRate(40);
  set.mutable_local_guard()->set_rounds_over(3);
  ASSERT_TRUE(owner_->Apply("8", set).ok());
  const absl::Duration t = clock_.Monotonic();
  EXPECT_FALSE(owner_->Observe(CnpStorm(), t, t).has_value());
  EXPECT_FALSE(owner_->Observe(CnpStorm(), t, t).has_value());
  std::optional<v1::GuardEvent> ev = owner_->Observe(CnpStorm(), t, t);
  ASSERT_TRUE(ev.has_value());
  EXPECT_EQ(ev->judged_version(), "8");
  EXPECT_THAT(ev->detail(), HasSubstr("over in 3 of the last 3 rounds"));
  EXPECT_EQ(owner_->expected_version(), "baseline");
}

// Issue 25 item 2: an agent that loses its controller for longer than the
// lease of a provisional set restores last-known-good by itself.
TEST_F(NicOwnerTest, AProvisionalSetIsRestoredOnlyOnceItsLeaseRunsOutWithoutTheController) {
  ASSERT_TRUE(owner_->Apply("9", AiRate(40), /*lease_seconds=*/30).ok());
  EXPECT_EQ(owner_->lease(), absl::Seconds(30));
  EXPECT_FALSE(owner_->ExpireLease(absl::ZeroDuration()).has_value());
  EXPECT_FALSE(owner_->ExpireLease(absl::Seconds(29)).has_value());
  EXPECT_EQ(store_.Get("rpg_ai_rate"), 40);
  std::string log;
  SetLogSinkForTest(&log);
  std::optional<v1::GuardEvent> ev = owner_->ExpireLease(absl::Seconds(31));
  SetLogSinkForTest(nullptr);
  // The log line names the host: simulated agents share one log.
  EXPECT_THAT(log, HasSubstr("msg=\"provisional lease expired without the controller\" host=h7"));
  ASSERT_TRUE(ev.has_value());
  EXPECT_EQ(ev->kind(), "lease_expired");
  EXPECT_EQ(ev->judged_version(), "9");
  EXPECT_EQ(ev->restored_version(), "baseline");
  EXPECT_EQ(ev->restored_parameters().devices(0).dcqcn().at("rpg_ai_rate"), 5);
  EXPECT_THAT(ev->detail(), HasSubstr("no stream to the controller for 31s"));
  EXPECT_EQ(store_.Get("rpg_ai_rate"), 5);
  EXPECT_EQ(owner_->expected_version(), "baseline");
  EXPECT_EQ(owner_->lease(), absl::ZeroDuration());
  EXPECT_THAT(owner_->CheckDrift(), IsEmpty());
  EXPECT_FALSE(guard_->armed());
  // Once: the set restored is final.
  EXPECT_FALSE(owner_->ExpireLease(absl::Hours(1)).has_value());
}

TEST_F(NicOwnerTest, ALeaseOnTheLastKnownGoodSetItselfGivesNothingUp) {
  ASSERT_TRUE(owner_->Apply("9", AiRate(40)).ok());
  ASSERT_TRUE(journal_->Save("9", owner_->expected()).ok());
  // A later step pushes the host the set it holds, provisional.
  ASSERT_TRUE(owner_->Apply("9", AiRate(40), 30).ok());
  EXPECT_FALSE(owner_->ExpireLease(absl::Minutes(5)).has_value());
  EXPECT_EQ(owner_->expected_version(), "9");
  EXPECT_EQ(owner_->lease(), absl::ZeroDuration());
  EXPECT_EQ(store_.Get("rpg_ai_rate"), 40);
}

TEST_F(NicOwnerTest, AProvisionalApplyThatFailsLeavesTheRecordAsTheHostIs) {
  ASSERT_TRUE(owner_->Apply("9", AiRate(40), 30).ok());
  v1::ParameterSet bad = AiRate(41);
  bad.mutable_devices(0)->set_device("mlx5_9");  // no such device: refused, nothing written
  EXPECT_FALSE(owner_->Apply("10", bad, 60).ok());
  auto record = journal_->LoadProvisional();
  ASSERT_TRUE(record.ok() && record->has_value());
  EXPECT_EQ((*record)->version(), "9");
  EXPECT_EQ((*record)->provisional_lease_seconds(), 30u);
  ASSERT_TRUE(owner_->Apply("11", AiRate(42)).ok());
  EXPECT_FALSE(owner_->Apply("12", bad, 60).ok());
  record = journal_->LoadProvisional();
  ASSERT_TRUE(record.ok());
  EXPECT_FALSE(record->has_value()) << "the host holds a final set";
}

TEST_F(NicOwnerTest, AFinalOrConfirmedSetHasNoLease) {
  ASSERT_TRUE(owner_->Apply("9", AiRate(40)).ok());
  EXPECT_FALSE(owner_->ExpireLease(absl::Hours(1)).has_value());
  ASSERT_TRUE(owner_->Apply("10", AiRate(41), 30).ok());
  ASSERT_TRUE(owner_->Apply("10", AiRate(41), 0).ok());  // the controller's confirmation
  EXPECT_FALSE(owner_->ExpireLease(absl::Hours(1)).has_value());
  EXPECT_EQ(store_.Get("rpg_ai_rate"), 41);
  auto record = journal_->LoadProvisional();
  ASSERT_TRUE(record.ok());
  EXPECT_FALSE(record->has_value()) << "a confirmed set leaves no provisional record";
}

TEST_F(NicOwnerTest, ARestartedAgentResumesTheLeaseOfTheProvisionalSetTheNicStillHolds) {
  ASSERT_TRUE(owner_->Apply("9", AiRate(40), 30).ok());
  auto record = journal_->LoadProvisional();
  ASSERT_TRUE(record.ok()) << record.status();
  ASSERT_TRUE(record->has_value());
  EXPECT_EQ((*record)->version(), "9");
  EXPECT_EQ((*record)->provisional_lease_seconds(), 30u);
  // A new process: the expected state starts from the journal, then the record.
  LocalGuard guard({}, &clock_, &applier_, journal_.get());
  NicOwner restarted(&applier_, journal_.get(), &guard);
  restarted.SetExpected("baseline", AiRate(5));
  ASSERT_TRUE(restarted.ResumeProvisional(**record));
  EXPECT_EQ(restarted.expected_version(), "9");
  EXPECT_TRUE(guard.armed()) << "judged again, as provisional";
  std::optional<v1::GuardEvent> ev = restarted.ExpireLease(absl::Seconds(30));
  ASSERT_TRUE(ev.has_value());
  EXPECT_EQ(ev->judged_version(), "9");
  EXPECT_EQ(store_.Get("rpg_ai_rate"), 5);
  // A record whose values the NIC no longer holds is dropped.
  ASSERT_TRUE(owner_->Apply("11", AiRate(42), 30).ok());
  record = journal_->LoadProvisional();
  ASSERT_TRUE(record.ok() && record->has_value());
  store_.Poke("rpg_ai_rate", 7);
  NicOwner again(&applier_, journal_.get(), &guard);
  again.SetExpected("baseline", AiRate(5));
  EXPECT_FALSE(again.ResumeProvisional(**record));
  EXPECT_EQ(again.lease(), absl::ZeroDuration());
  record = journal_->LoadProvisional();
  ASSERT_TRUE(record.ok());
  EXPECT_FALSE(record->has_value());
  // A record of the set that is last-known-good (confirmed, then the process
  // ended before the record went) is dropped too.
  ASSERT_TRUE(journal_->SaveProvisional("13", 30, AiRate(7)).ok());
  ASSERT_TRUE(journal_->Save("13", AiRate(7)).ok());
  record = journal_->LoadProvisional();
  ASSERT_TRUE(record.ok() && record->has_value());
  EXPECT_FALSE(again.ResumeProvisional(**record));
}

TEST(NicOwnerCompareTest, NamesMissingDevicesAndPfc) {
  v1::ParameterSet want = AiRate(10);
  v1::PfcSettings* pfc = want.mutable_devices(0)->mutable_pfc();
  pfc->set_enable_mask(0x08);
  v1::ParameterSet have;
  std::vector<DriftItem> d = NicOwner::Compare(want, have);
  ASSERT_EQ(d.size(), 2u);
  EXPECT_EQ(d[0].Text(), "mlx5_0/rpg_ai_rate: expected 10, found nothing");
  EXPECT_EQ(d[1].Text(), "mlx5_0/pfc.enable_mask: expected 8, found nothing");
}

// Applies in flight on one thread while the guard fires on another, and a
// third checks for drift, many times. With one owner the NIC always holds
// the expected set (no drift is ever seen), no two store calls overlap, and
// the journal only ever holds a version with the values of that version.
TEST_F(NicOwnerTest, GuardFiringDuringAppliesNeverDisagrees) {
  // At least this many applies and guard trips, whichever takes longer.
  constexpr int kApplies = 500;
  constexpr int kTrips = 100;
  std::atomic<bool> done{false};
  std::atomic<int> trips{0};
  std::atomic<int> drift_seen{0};
  std::atomic<int> journal_bad{0};
  auto value_of = [](const std::string& version) -> int64_t {
    return version == "baseline" ? 5 : 100 + std::stoll(version);
  };
  std::thread applies([&]() {
    const absl::Time deadline = absl::Now() + absl::Seconds(20);
    for (int i = 1; (i <= kApplies || trips.load() < kTrips) && absl::Now() < deadline; ++i) {
      const std::string v = absl::StrCat(i);
      absl::StatusOr<ApplyResult> r = owner_->Apply(v, AiRate(value_of(v)));
      ASSERT_TRUE(r.ok()) << r.status();
      EXPECT_EQ(r->applied.devices(0).dcqcn().at("rpg_ai_rate"), value_of(v));
      std::this_thread::yield();
    }
    done = true;
  });
  std::thread guard([&]() {
    int n = 0;
    while (!done.load()) {
      // Alternate a storm with a calm round, every fourth one after the
      // window: trips and promotions both race the applies. (The calm rounds
      // also keep the host's pre-apply rate low, so a storm is a rise.)
      if (++n % 2 == 0) {
        if (n % 8 == 0) clock_.Advance(absl::Seconds(11));
        google::protobuf::RepeatedPtrField<v1::CounterSample> calm = CnpStorm();
        calm[0].set_rate_per_second(0);
        (void)owner_->Observe(calm, clock_.Monotonic(), clock_.Monotonic());
      } else if (owner_->Observe(CnpStorm(), clock_.Monotonic(), clock_.Monotonic()).has_value()) {
        ++trips;
      }
      std::optional<LkgEntry> lkg = journal_->Get();
      if (lkg.has_value() && lkg->parameters.devices_size() > 0 &&
          lkg->parameters.devices(0).dcqcn().at("rpg_ai_rate") != value_of(lkg->version)) {
        ++journal_bad;
      }
    }
  });
  std::thread drift([&]() {
    while (!done.load()) {
      if (!owner_->CheckDrift().empty()) ++drift_seen;
    }
  });
  applies.join();
  guard.join();
  drift.join();
  EXPECT_GE(trips.load(), kTrips) << "the guard seldom fired; the test raced too little";
  EXPECT_EQ(drift_seen.load(), 0);
  EXPECT_EQ(journal_bad.load(), 0);
  EXPECT_EQ(store_.max_inside(), 1) << "two callers were inside the store at once";
  EXPECT_EQ(store_.Get("rpg_ai_rate"), value_of(owner_->expected_version()));
  EXPECT_THAT(owner_->CheckDrift(), IsEmpty());
}

}  // namespace
}  // namespace rocetune
