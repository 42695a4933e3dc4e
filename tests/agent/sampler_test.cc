#include "agent/sampler.h"

#include <map>
#include <string>
#include <vector>

#include "daemon/clock.h"
#include "daemon/logging.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace rocetune {
namespace {

using ::testing::HasSubstr;

CounterValue V(const std::string& name, uint64_t value, uint8_t width = 64, int32_t prio = -1) {
  CounterValue v;
  v.key.device = "mlx5_0";
  v.key.port = 1;
  v.key.priority = prio;
  v.key.name = name;
  v.value = value;
  v.width_bits = width;
  return v;
}

// A CounterSource fake that returns scripted snapshots.
class ScriptedSource : public CounterSource {
 public:
  std::vector<std::vector<CounterValue>> snapshots;
  size_t next = 0;
  absl::Status fail;
  std::string name() const override { return "scripted"; }
  absl::Status Collect(std::vector<CounterValue>* out) override {
    if (!fail.ok()) return fail;
    const std::vector<CounterValue>& s = snapshots.at(next++);
    out->insert(out->end(), s.begin(), s.end());
    return absl::OkStatus();
  }
};

// A CounterSource that fills the sampler's buffer in place, as the sysfs and
// ethtool sources do: every slot it gets back still holds an older key.
class InPlaceSource : public CounterSource {
 public:
  std::vector<std::vector<CounterValue>> snapshots;
  size_t next = 0;
  std::string name() const override { return "in_place"; }
  absl::Status Collect(std::vector<CounterValue>* out) override {
    const std::vector<CounterValue>& s = snapshots.at(next++);
    out->insert(out->end(), s.begin(), s.end());
    return absl::OkStatus();
  }
  absl::Status CollectInto(CounterBuffer* out) override {
    for (const CounterValue& v : snapshots.at(next++)) {
      CounterValue& slot = out->Append();
      slot.key.device = v.key.device;
      slot.key.port = v.key.port;
      slot.key.priority = v.key.priority;
      slot.key.name = v.key.name;
      slot.value = v.value;
      slot.width_bits = v.width_bits;
      slot.kind = v.kind;
    }
    return absl::OkStatus();
  }
};

// A CounterSource that fills the buffer as the sysfs source does: through
// CounterBuffer::AppendKeyed with key ids. A snapshot whose keys are those of
// the previous one keeps their ids unless `new_ids_every_round` (a relist); any
// other snapshot gets new ones. With `mixed`, every other value of odd rounds
// goes through plain Append (no id), as a group of keyed and unkeyed members
// would fill the slots.
class KeyedSource : public CounterSource {
 public:
  std::vector<std::vector<CounterValue>> snapshots;
  size_t next = 0;
  bool new_ids_every_round = false;
  bool mixed = false;
  std::string name() const override { return "keyed"; }
  absl::Status Collect(std::vector<CounterValue>* out) override {
    const std::vector<CounterValue>& s = snapshots.at(next++);
    out->insert(out->end(), s.begin(), s.end());
    return absl::OkStatus();
  }
  absl::Status CollectInto(CounterBuffer* out) override {
    const size_t round = next;
    const std::vector<CounterValue>& s = snapshots.at(next++);
    std::vector<CounterKey> keys;
    for (const CounterValue& v : s) keys.push_back(v.key);
    if (new_ids_every_round || keys != last_keys_) {
      ids_.clear();
      for (size_t i = 0; i < keys.size(); ++i) ids_.push_back(next_id_++);
      last_keys_ = keys;
    }
    for (size_t i = 0; i < s.size(); ++i) {
      CounterValue* slot;
      if (mixed && round % 2 == 1 && i % 2 == 0) {
        slot = &out->Append();
        slot->key = s[i].key;
      } else {
        slot = &out->AppendKeyed(ids_[i], s[i].key);
      }
      EXPECT_EQ(slot->key, s[i].key);
      slot->value = s[i].value;
      slot->width_bits = s[i].width_bits;
      slot->kind = s[i].kind;
    }
    return absl::OkStatus();
  }

 private:
  std::vector<CounterKey> last_keys_;
  std::vector<uint64_t> ids_;
  uint64_t next_id_ = 1000;
};

// (name, priority) -> delta, failing on a duplicate sample.
std::map<std::pair<std::string, int>, uint64_t> Deltas(const SampleBatch& b) {
  std::map<std::pair<std::string, int>, uint64_t> m;
  for (const v1::CounterSample& s : b.samples) {
    EXPECT_EQ(s.device(), "mlx5_0");
    EXPECT_EQ(s.port(), 1u);
    EXPECT_TRUE(m.emplace(std::make_pair(s.name(), s.priority()), s.delta()).second) << s.name();
  }
  return m;
}

CounterValue Level(const std::string& name, uint64_t value) {
  CounterValue v = V(name, value);
  v.kind = CounterKind::kLevel;
  return v;
}

// name -> value of the batch's levels.
std::map<std::string, uint64_t> Levels(const SampleBatch& b) {
  std::map<std::string, uint64_t> m;
  for (const v1::LevelSample& l : b.levels) {
    EXPECT_EQ(l.device(), "mlx5_0");
    EXPECT_EQ(l.port(), 1u);
    EXPECT_EQ(l.priority(), -1);
    EXPECT_TRUE(m.emplace(l.name(), l.value()).second) << l.name();
  }
  return m;
}

std::map<std::string, v1::CounterSample> ByName(const SampleBatch& b) {
  std::map<std::string, v1::CounterSample> m;
  for (const v1::CounterSample& s : b.samples) m[s.name()] = s;
  return m;
}

std::unique_ptr<Sampler> MakeSampler(CounterSource* src, Clock* clock,
                                     absl::Duration interval = absl::Seconds(1)) {
  absl::StatusOr<std::unique_ptr<Sampler>> s = Sampler::Create(src, clock, interval);
  EXPECT_TRUE(s.ok()) << s.status();
  return *std::move(s);
}

TEST(SamplerTest, FirstSightIsBaselineThenDeltasAndMeasuredRates) {
  ScriptedSource src;
  FakeClock clock;
  src.snapshots = {{V("cnp_sent", 100), V("rx_pfc_pause_frames", 7, 64, 3)},
                   {V("cnp_sent", 400), V("rx_pfc_pause_frames", 7, 64, 3)}};
  auto sampler = MakeSampler(&src, &clock);
  absl::StatusOr<SampleBatch> first = sampler->SampleOnce();
  ASSERT_TRUE(first.ok());
  EXPECT_TRUE(first->samples.empty());
  // The loop ran late: 1.5 s passed although the interval is 1 s.
  clock.Advance(absl::Milliseconds(1500));
  absl::StatusOr<SampleBatch> second = sampler->SampleOnce();
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(second->measured_interval, absl::Milliseconds(1500));
  EXPECT_EQ(second->end - second->start, absl::Milliseconds(1500));
  auto m = ByName(*second);
  ASSERT_EQ(m.size(), 2u);
  EXPECT_EQ(m["cnp_sent"].delta(), 300u);
  EXPECT_DOUBLE_EQ(m["cnp_sent"].rate_per_second(), 200.0);
  EXPECT_EQ(m["cnp_sent"].device(), "mlx5_0");
  EXPECT_EQ(m["cnp_sent"].port(), 1u);
  EXPECT_EQ(m["cnp_sent"].priority(), -1);
  EXPECT_EQ(m["rx_pfc_pause_frames"].delta(), 0u);
  EXPECT_EQ(m["rx_pfc_pause_frames"].priority(), 3);
}

// A level is reported as read, from the first round on, down as well as up:
// never a delta, never a reset, never among the counters.
TEST(SamplerTest, LevelsAreReportedAsReadEveryRound) {
  ScriptedSource src;
  FakeClock clock;
  src.snapshots = {{V("cnp_sent", 100), Level("queue_occupancy_bytes", 5000)},
                   {V("cnp_sent", 150), Level("queue_occupancy_bytes", 1200)},
                   {V("cnp_sent", 150), Level("queue_occupancy_bytes", 0)},
                   {V("cnp_sent", 170), Level("queue_occupancy_bytes", 9000)}};
  auto sampler = MakeSampler(&src, &clock);
  const uint64_t want[] = {5000, 1200, 0, 9000};
  const uint64_t want_cnp[] = {0, 50, 0, 20};
  for (int round = 0; round < 4; ++round) {
    SCOPED_TRACE(round);
    absl::StatusOr<SampleBatch> b = sampler->SampleOnce();
    ASSERT_TRUE(b.ok());
    EXPECT_EQ(Levels(*b),
              (std::map<std::string, uint64_t>{{"queue_occupancy_bytes", want[round]}}));
    auto m = Deltas(*b);
    EXPECT_EQ(m.count({"queue_occupancy_bytes", -1}), 0u);
    if (round == 0) {
      EXPECT_TRUE(m.empty());
    } else {
      EXPECT_EQ(
          m,
          (std::map<std::pair<std::string, int>, uint64_t>{{{"cnp_sent", -1}, want_cnp[round]}}));
    }
    EXPECT_EQ(b->values.size(), static_cast<size_t>(b->samples.size()));
    clock.Advance(absl::Seconds(1));
  }
  EXPECT_EQ(sampler->resets(), 0u);
  EXPECT_EQ(sampler->wraps(), 0u);
}

// Levels in buffers refilled in place (keyed and not) keep the counters'
// position matching right, and a level that vanishes is no longer reported.
TEST(SamplerTest, LevelsBesideCountersInReusedBuffers) {
  for (bool keyed : {false, true}) {
    SCOPED_TRACE(keyed);
    InPlaceSource in_place;
    KeyedSource keyed_src;
    std::vector<std::vector<CounterValue>> snapshots = {
        {Level("queue_watermark_bytes", 70), V("a", 1), Level("pfcwd_stormed", 1), V("b", 10)},
        {Level("queue_watermark_bytes", 30), V("a", 4), Level("pfcwd_stormed", 0), V("b", 12)},
        {V("a", 9), V("b", 13)},
        {Level("queue_watermark_bytes", 50), V("a", 10), V("b", 20)}};
    in_place.snapshots = snapshots;
    keyed_src.snapshots = snapshots;
    FakeClock clock;
    auto sampler = MakeSampler(keyed ? static_cast<CounterSource*>(&keyed_src) : &in_place, &clock);
    SampleBatch batch;
    ASSERT_TRUE(sampler->SampleOnce(&batch).ok());
    EXPECT_EQ(Levels(batch), (std::map<std::string, uint64_t>{{"queue_watermark_bytes", 70},
                                                              {"pfcwd_stormed", 1}}));
    clock.Advance(absl::Seconds(1));
    ASSERT_TRUE(sampler->SampleOnce(&batch).ok());
    EXPECT_EQ(Levels(batch), (std::map<std::string, uint64_t>{{"queue_watermark_bytes", 30},
                                                              {"pfcwd_stormed", 0}}));
    EXPECT_EQ(Deltas(batch),
              (std::map<std::pair<std::string, int>, uint64_t>{{{"a", -1}, 3}, {{"b", -1}, 2}}));
    clock.Advance(absl::Seconds(1));
    ASSERT_TRUE(sampler->SampleOnce(&batch).ok());
    EXPECT_TRUE(batch.levels.empty());
    EXPECT_EQ(Deltas(batch),
              (std::map<std::pair<std::string, int>, uint64_t>{{{"a", -1}, 5}, {{"b", -1}, 1}}));
    clock.Advance(absl::Seconds(1));
    ASSERT_TRUE(sampler->SampleOnce(&batch).ok());
    EXPECT_EQ(Levels(batch), (std::map<std::string, uint64_t>{{"queue_watermark_bytes", 50}}));
    EXPECT_EQ(Deltas(batch),
              (std::map<std::pair<std::string, int>, uint64_t>{{{"a", -1}, 1}, {{"b", -1}, 7}}));
    EXPECT_EQ(sampler->resets(), 0u);
  }
}

TEST(SamplerTest, ThirtyTwoBitCounterWraps) {
  ScriptedSource src;
  FakeClock clock;
  auto sampler = MakeSampler(&src, &clock);
  sampler->Ingest({V("out_of_sequence", 0xFFFFFF00u, 32)}, absl::Seconds(1), absl::Now());
  SampleBatch b = sampler->Ingest({V("out_of_sequence", 0x100, 32)}, absl::Seconds(2), absl::Now());
  ASSERT_EQ(b.samples.size(), 1);
  EXPECT_EQ(b.samples[0].delta(), 0x200u);
  EXPECT_DOUBLE_EQ(b.samples[0].rate_per_second(), 512.0);
  EXPECT_EQ(sampler->wraps(), 1u);
  EXPECT_EQ(sampler->resets(), 0u);
}

TEST(SamplerTest, DecreasesThatAreNotWrapsAreResets) {
  ScriptedSource src;
  FakeClock clock;
  auto sampler = MakeSampler(&src, &clock);
  std::string log;
  SetLogSinkForTest(&log);
  sampler->Ingest({V("cnp_sent", 5'000'000'000), V("out_of_sequence", 1000, 32)}, absl::Seconds(1),
                  absl::Now());
  // Driver reload: the 64-bit counter restarts; the 32-bit one drops by far
  // less than a wrap would need.
  SampleBatch b = sampler->Ingest({V("cnp_sent", 40), V("out_of_sequence", 5, 32)},
                                  absl::Seconds(2), absl::Now());
  auto m = ByName(b);
  EXPECT_EQ(m["cnp_sent"].delta(), 40u);
  EXPECT_EQ(m["out_of_sequence"].delta(), 5u);
  EXPECT_EQ(sampler->resets(), 2u);
  EXPECT_EQ(sampler->wraps(), 0u);
  // A second reset of the same counter is counted but not logged again.
  sampler->Ingest({V("cnp_sent", 100), V("out_of_sequence", 10, 32)}, absl::Seconds(3),
                  absl::Now());
  b = sampler->Ingest({V("cnp_sent", 1), V("out_of_sequence", 11, 32)}, absl::Seconds(4),
                      absl::Now());
  SetLogSinkForTest(nullptr);
  EXPECT_EQ(ByName(b)["cnp_sent"].delta(), 1u);
  EXPECT_EQ(sampler->resets(), 3u);
  EXPECT_THAT(log, HasSubstr("reset"));
  const std::string needle = "counter=cnp_sent";
  EXPECT_NE(log.find(needle), std::string::npos);
  EXPECT_EQ(log.find(needle), log.rfind(needle));
}

TEST(SamplerTest, ThirtyTwoBitWidthDoesNotApplyToValuesAbove32Bits) {
  ScriptedSource src;
  FakeClock clock;
  auto sampler = MakeSampler(&src, &clock);
  sampler->Ingest({V("x", uint64_t{1} << 40, 32)}, absl::Seconds(1), absl::Now());
  SampleBatch b = sampler->Ingest({V("x", 3, 32)}, absl::Seconds(2), absl::Now());
  EXPECT_EQ(b.samples[0].delta(), 3u);
  EXPECT_EQ(sampler->resets(), 1u);
}

TEST(SamplerTest, NewAndVanishedCounters) {
  ScriptedSource src;
  FakeClock clock;
  auto sampler = MakeSampler(&src, &clock);
  sampler->Ingest({V("a", 1)}, absl::Seconds(1), absl::Now());
  SampleBatch b = sampler->Ingest({V("a", 2), V("b", 50)}, absl::Seconds(2), absl::Now());
  auto m = ByName(b);
  EXPECT_EQ(m.size(), 1u);  // b is new: baseline only
  EXPECT_EQ(m["a"].delta(), 1u);
  b = sampler->Ingest({V("b", 60)}, absl::Seconds(3), absl::Now());  // a vanished
  m = ByName(b);
  EXPECT_EQ(m.size(), 1u);
  EXPECT_EQ(m["b"].delta(), 10u);
  b = sampler->Ingest({V("a", 9), V("b", 60)}, absl::Seconds(4), absl::Now());
  EXPECT_EQ(ByName(b).count("a"), 0u);  // came back: baseline again, no bogus delta
}

TEST(SamplerTest, SameNameDifferentPriorityAreDistinct) {
  ScriptedSource src;
  FakeClock clock;
  auto sampler = MakeSampler(&src, &clock);
  sampler->Ingest({V("p", 10, 64, 3), V("p", 100, 64, 4)}, absl::Seconds(1), absl::Now());
  SampleBatch b =
      sampler->Ingest({V("p", 11, 64, 3), V("p", 200, 64, 4)}, absl::Seconds(2), absl::Now());
  ASSERT_EQ(b.samples.size(), 2);
  for (const v1::CounterSample& s : b.samples) {
    EXPECT_EQ(s.delta(), s.priority() == 3 ? 1u : 100u);
  }
}

// The in-place path: one batch and the sampler's two snapshot buffers reused
// every round while the key set grows, shrinks, reorders and changes key
// lengths. Every round's deltas must be those of a fresh computation.
TEST(SamplerTest, ReusedBuffersFollowKeySetChanges) {
  InPlaceSource src;
  FakeClock clock;
  const std::string long_name = "a_counter_name_far_longer_than_the_small_string_buffer";
  src.snapshots = {
      {V("a", 1), V("b", 10), V("c", 100)},                          // baseline
      {V("a", 2), V("b", 12), V("c", 103)},                          // steady
      {V("a", 5), V("b", 20), V("c", 110), V("d", 7)},               // d appears (at the end)
      {V("a", 6), V("c", 111), V("d", 9)},                           // b disappears
      {V("d", 10), V("c", 115), V("a", 6)},                          // order reversed
      {V("d", 12), V(long_name, 1), V("a", 8)},                      // c replaced by a long key
      {V("d", 13), V(long_name, 4), V("a", 9), V("b", 30)},          // b comes back: baseline
      {V("d", 13, 64, 2), V(long_name, 5), V("a", 10), V("b", 31)},  // d now per priority
      {V("d", 14, 64, 2), V(long_name, 6), V("a", 10), V("b", 35)},  // steady again
      {V("x", 1, 64, 5), V("b", 36)},                                // shrinks to two
  };
  auto sampler = MakeSampler(&src, &clock);
  SampleBatch batch;
  using Want = std::map<std::pair<std::string, int>, uint64_t>;
  const std::vector<Want> want = {
      {},
      {{{"a", -1}, 1}, {{"b", -1}, 2}, {{"c", -1}, 3}},
      {{{"a", -1}, 3}, {{"b", -1}, 8}, {{"c", -1}, 7}},
      {{{"a", -1}, 1}, {{"c", -1}, 1}, {{"d", -1}, 2}},
      {{{"d", -1}, 1}, {{"c", -1}, 4}, {{"a", -1}, 0}},
      {{{"d", -1}, 2}, {{"a", -1}, 2}},
      {{{"d", -1}, 1}, {{long_name, -1}, 3}, {{"a", -1}, 1}},
      {{{long_name, -1}, 1}, {{"a", -1}, 1}, {{"b", -1}, 1}},
      {{{"d", 2}, 1}, {{long_name, -1}, 1}, {{"a", -1}, 0}, {{"b", -1}, 4}},
      {{{"b", -1}, 1}},
  };
  for (size_t round = 0; round < want.size(); ++round) {
    SCOPED_TRACE(round);
    ASSERT_TRUE(sampler->SampleOnce(&batch).ok());
    EXPECT_EQ(Deltas(batch), want[round]);
    EXPECT_EQ(batch.samples.size(), static_cast<int>(want[round].size()));
    clock.Advance(absl::Seconds(1));
  }
  EXPECT_EQ(sampler->resets(), 0u);
  // The same script through a source that sets key ids (matched by id where
  // they agree, by key where not), with ids kept across steady rounds, renewed
  // every round, and mixed with id-less slots.
  for (int variant = 0; variant < 3; ++variant) {
    SCOPED_TRACE(variant);
    KeyedSource keyed;
    keyed.snapshots = src.snapshots;
    keyed.new_ids_every_round = variant == 1;
    keyed.mixed = variant == 2;
    auto by_id = MakeSampler(&keyed, &clock);
    SampleBatch kept;
    for (size_t round = 0; round < want.size(); ++round) {
      SCOPED_TRACE(round);
      ASSERT_TRUE(by_id->SampleOnce(&kept).ok());
      EXPECT_EQ(Deltas(kept), want[round]);
      clock.Advance(absl::Seconds(1));
    }
    EXPECT_EQ(by_id->resets(), 0u);
  }
  // The same script through fresh batches and the default (copying)
  // CollectInto gives the same deltas.
  ScriptedSource copy;
  copy.snapshots = src.snapshots;
  auto fresh = MakeSampler(&copy, &clock);
  for (size_t round = 0; round < want.size(); ++round) {
    SCOPED_TRACE(round);
    absl::StatusOr<SampleBatch> b = fresh->SampleOnce();
    ASSERT_TRUE(b.ok());
    EXPECT_EQ(Deltas(*b), want[round]);
  }
}

// A steady round refills the same sample messages and key strings: nothing is
// reallocated (the pointers stay put), also after the batch was lent to a
// Report and taken back as SamplingLoop does.
TEST(SamplerTest, SteadyRoundsReuseMessagesAndStrings) {
  InPlaceSource src;
  FakeClock clock;
  const std::string name = "np_ecn_marked_roce_packets_and_then_some";
  for (uint64_t i = 0; i < 4; ++i) src.snapshots.push_back({V(name, 100 * i), V("x", i, 64, 3)});
  auto sampler = MakeSampler(&src, &clock);
  SampleBatch batch;
  ASSERT_TRUE(sampler->SampleOnce(&batch).ok());
  clock.Advance(absl::Seconds(1));
  ASSERT_TRUE(sampler->SampleOnce(&batch).ok());
  ASSERT_EQ(batch.samples.size(), 2);
  const v1::CounterSample* first = &batch.samples[0];
  const char* first_name = batch.samples[0].name().data();
  for (int round = 0; round < 2; ++round) {
    v1::Report report;
    report.mutable_counters()->Swap(&batch.samples);
    EXPECT_EQ(&report.counters(0), first);
    batch.samples.Swap(report.mutable_counters());
    clock.Advance(absl::Seconds(1));
    ASSERT_TRUE(sampler->SampleOnce(&batch).ok());
    ASSERT_EQ(batch.samples.size(), 2);
    EXPECT_EQ(&batch.samples[0], first);
    EXPECT_EQ(batch.samples[0].name().data(), first_name);
    EXPECT_EQ(batch.samples[0].name(), name);
    EXPECT_EQ(batch.samples[0].delta(), 100u);
    EXPECT_EQ(batch.samples[1].name(), "x");
    EXPECT_EQ(batch.samples[1].priority(), 3);
    EXPECT_EQ(batch.samples[1].delta(), 1u);
  }
}

TEST(CounterBufferTest, ClearKeepsElementsAndTheirStorage) {
  CounterBuffer buf;
  EXPECT_TRUE(buf.empty());
  buf.Append(V("a_long_counter_name_beyond_the_small_string_size", 1));
  buf.Append(V("b", 2));
  ASSERT_EQ(buf.size(), 2u);
  const char* storage = buf[0].key.name.data();
  buf.Clear();
  EXPECT_TRUE(buf.empty());
  EXPECT_EQ(buf.begin(), buf.end());
  CounterValue& slot = buf.Append();
  EXPECT_EQ(slot.key.name, "a_long_counter_name_beyond_the_small_string_size");  // stale
  slot.key.name = "a_long_counter_name_beyond_the_small_string_size";
  EXPECT_EQ(buf[0].key.name.data(), storage);
  EXPECT_EQ(buf.size(), 1u);
  buf.Append(V("c", 3));
  buf.Append(V("d", 4));  // grows past the kept elements
  ASSERT_EQ(buf.size(), 3u);
  EXPECT_EQ(buf[2].key.name, "d");
  CounterBuffer other;
  other.swap(buf);
  EXPECT_EQ(other.size(), 3u);
  EXPECT_TRUE(buf.empty());
}

// AppendKeyed leaves a kept slot's key alone when the slot holds the same id,
// and sets key and id otherwise; Append clears the id.
TEST(CounterBufferTest, AppendKeyedComparesIdsNotKeys) {
  CounterBuffer buf;
  CounterKey a;
  a.device = "mlx5_0";
  a.name = "a_long_counter_name_beyond_the_small_string_size";
  CounterKey b = a;
  b.name = "b";
  CounterValue& first = buf.AppendKeyed(7, a);
  EXPECT_EQ(first.key, a);
  EXPECT_EQ(first.key_id, 7u);
  const char* storage = first.key.name.data();
  buf.Clear();
  CounterValue& again = buf.AppendKeyed(7, a);
  EXPECT_EQ(again.key.name.data(), storage);
  EXPECT_EQ(again.key, a);
  buf.Clear();
  CounterValue& other = buf.AppendKeyed(8, b);  // another id: key assigned
  EXPECT_EQ(other.key, b);
  EXPECT_EQ(other.key_id, 8u);
  buf.Clear();
  CounterValue& plain = buf.Append();  // id cleared, key stale
  EXPECT_EQ(plain.key_id, 0u);
  EXPECT_EQ(plain.key, b);
  buf.Clear();
  CounterValue& no_id = buf.AppendKeyed(0, a);  // id 0: always assigned
  EXPECT_EQ(no_id.key, a);
  EXPECT_EQ(no_id.key_id, 0u);
  buf.Clear();
  EXPECT_EQ(buf.AppendKeyed(0, b).key, b);
}

// A kept slot that held a level is a counter again unless the source says
// otherwise: Append and AppendKeyed reset the kind.
TEST(CounterBufferTest, AppendResetsTheKind) {
  CounterBuffer buf;
  buf.Append(Level("queue_occupancy_bytes", 1));
  buf.AppendKeyed(9, V("b", 1).key).kind = CounterKind::kLevel;
  ASSERT_EQ(buf[0].kind, CounterKind::kLevel);
  buf.Clear();
  EXPECT_EQ(buf.Append().kind, CounterKind::kCounter);
  EXPECT_EQ(buf.AppendKeyed(9, V("b", 1).key).kind, CounterKind::kCounter);
}

TEST(SamplerTest, IntervalBounds) {
  ScriptedSource src;
  FakeClock clock;
  absl::StatusOr<std::unique_ptr<Sampler>> s = Sampler::Create(&src, &clock, absl::Milliseconds(9));
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.status().message(), HasSubstr("10ms"));
  s = Sampler::Create(&src, &clock, absl::Milliseconds(10));
  ASSERT_TRUE(s.ok());
  EXPECT_EQ((*s)->interval(), absl::Milliseconds(10));
  s = Sampler::Create(&src, &clock);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ((*s)->interval(), absl::Seconds(1));
  EXPECT_EQ(Sampler::Create(nullptr, &clock).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(SamplerTest, FailedCollectKeepsTheBaseline) {
  ScriptedSource src;
  FakeClock clock;
  src.snapshots = {{V("a", 10)}, {V("a", 30)}};
  auto sampler = MakeSampler(&src, &clock);
  ASSERT_TRUE(sampler->SampleOnce().ok());
  clock.Advance(absl::Seconds(1));
  src.fail = absl::UnavailableError("device gone");
  EXPECT_EQ(sampler->SampleOnce().status().code(), absl::StatusCode::kUnavailable);
  clock.Advance(absl::Seconds(1));
  src.fail = absl::OkStatus();
  absl::StatusOr<SampleBatch> b = sampler->SampleOnce();
  ASSERT_TRUE(b.ok());
  ASSERT_EQ(b->samples.size(), 1);
  EXPECT_EQ(b->samples[0].delta(), 20u);
  EXPECT_EQ(b->measured_interval, absl::Seconds(2));
  EXPECT_DOUBLE_EQ(b->samples[0].rate_per_second(), 10.0);
}

TEST(SamplerTest, WaitForNextSleepsUntilOneIntervalAfterTheLastSnapshot) {
  ScriptedSource src;
  FakeClock clock;
  src.snapshots = {{V("a", 1)}};
  auto sampler = MakeSampler(&src, &clock, absl::Milliseconds(250));
  const absl::Duration t0 = clock.Monotonic();
  ASSERT_TRUE(sampler->SampleOnce().ok());
  clock.Advance(absl::Milliseconds(100));
  sampler->WaitForNext();
  EXPECT_EQ(clock.Monotonic() - t0, absl::Milliseconds(250));
  clock.Advance(absl::Seconds(1));  // already late: no sleep
  const absl::Duration late = clock.Monotonic();
  sampler->WaitForNext();
  EXPECT_EQ(clock.Monotonic(), late);
}

}  // namespace
}  // namespace rocetune
