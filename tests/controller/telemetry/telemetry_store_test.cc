#include "controller/telemetry/telemetry_store.h"

#include <cmath>
#include <limits>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace rocetune::controller {
namespace {

using ::testing::HasSubstr;

const absl::Time kT0 = absl::FromUnixSeconds(1'700'000'000);  // window-aligned for 10 s

v1::Report Report(uint64_t cnp, double rtt, int samples = 10) {
  v1::Report r;
  r.set_start_unix_nanos(0);
  r.set_end_unix_nanos(2'000'000'000);  // 2 s
  auto* c = r.add_counters();
  c->set_name("cnp_sent");
  c->set_delta(cnp);
  auto* p = r.add_counters();
  p->set_name("rx_pfc_pause_frames");
  p->set_delta(cnp / 2);
  auto* w = r.add_latency();
  w->set_peer_class("intra_tor");
  QuantileSketch s;
  s.Insert(rtt, samples);
  s.ToProto(w->mutable_network_rtt_seconds());
  w->set_probes_sent(samples);
  return r;
}

// `r` with one more job-signal entry: `events` events of `seconds` each.
v1::Report WithJob(v1::Report r, const std::string& job, const std::string& op, double seconds,
                   int events, uint64_t bytes = 0) {
  v1::JobTiming* j = r.add_jobs();
  j->set_job(job);
  j->set_op(op);
  QuantileSketch s;
  s.Insert(seconds, events);
  s.ToProto(j->mutable_seconds());
  j->set_bytes(bytes);
  return r;
}

TEST(TelemetryStoreTest, RatesAreDeltasOverCoveredTime) {
  TelemetryStore store(TelemetryOptions{});
  auto h = store.ForHost("h");
  ASSERT_TRUE(h->AddReport(Report(200, 1e-5), kT0).ok());
  ASSERT_TRUE(h->AddReport(Report(100, 1e-5), kT0 + absl::Seconds(2)).ok());
  TelemetrySummary s = store.Summarize({"h"}, kT0, kT0 + absl::Seconds(10));
  EXPECT_EQ(s.hosts, 1);
  EXPECT_EQ(s.reports, 2u);
  EXPECT_DOUBLE_EQ(s.cnp_rate_per_second, 300.0 / 4.0);
  EXPECT_DOUBLE_EQ(s.pfc_pause_rate_per_second, 150.0 / 4.0);
  EXPECT_EQ(s.network_rtt.count(), 20u);
}

TEST(TelemetryStoreTest, WindowsSplitByReceiptTimeAndRetentionPrunes) {
  TelemetryOptions opt;
  opt.window = absl::Seconds(10);
  opt.retention = absl::Seconds(30);
  TelemetryStore store(opt);
  auto h = store.ForHost("h");
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(h->AddReport(Report(10, 1e-5), kT0 + absl::Seconds(10 * i + 1)).ok());
  }
  // Only the last three windows (30 s) are kept.
  auto w = h->Windows();
  ASSERT_EQ(w.size(), 3u);
  EXPECT_EQ(w.front().index, store.WindowIndex(kT0 + absl::Seconds(20)));
  TelemetrySummary last = store.Summarize({"h"}, kT0 + absl::Seconds(40), kT0 + absl::Seconds(50));
  EXPECT_EQ(last.reports, 1u);
  store.Prune(kT0 + absl::Seconds(100));
  EXPECT_TRUE(h->Windows().empty());
}

// The footprint Prune reports follows the windows held: it grows with hosts
// and windows, a wide RTT spread costs more sketch buckets, and retention
// brings it back down.
TEST(TelemetryStoreTest, FootprintCountsWindowsAndTheirMemory) {
  TelemetryOptions opt;
  opt.window = absl::Seconds(10);
  opt.retention = absl::Seconds(60);
  TelemetryStore store(opt);
  store.Prune(kT0);
  EXPECT_EQ(store.footprint().windows, 0u);
  EXPECT_EQ(store.footprint().bytes, 0u);
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(store.ForHost("a")->AddReport(Report(10, 1e-5), kT0 + absl::Seconds(10 * i)).ok());
  }
  store.Prune(kT0 + absl::Seconds(25));
  const TelemetryStore::Footprint three = store.footprint();
  EXPECT_EQ(three.hosts, 1u);
  EXPECT_EQ(three.windows, 3u);
  EXPECT_GT(three.bytes, 3 * sizeof(WindowAggregate));
  // A second host whose RTTs span 10 us .. 10 ms holds more per window.
  v1::Report wide = Report(10, 1e-5);
  QuantileSketch spread;
  spread.Insert(1e-5);
  spread.Insert(1e-2);
  spread.ToProto(wide.mutable_latency(0)->mutable_network_rtt_seconds());
  ASSERT_TRUE(store.ForHost("b")->AddReport(wide, kT0 + absl::Seconds(20)).ok());
  store.Prune(kT0 + absl::Seconds(25));
  const TelemetryStore::Footprint four = store.footprint();
  EXPECT_EQ(four.hosts, 2u);
  EXPECT_EQ(four.windows, 4u);
  EXPECT_GT(four.bytes - three.bytes, three.bytes / 3 + 2000);  // ~345 more dense buckets
  store.Prune(kT0 + absl::Seconds(200));
  EXPECT_EQ(store.footprint().windows, 0u);
  EXPECT_EQ(store.footprint().bytes, 0u);
}

// A window packs its sketches when the next one opens: far less memory, and
// summaries over packed and open windows are what they were.
TEST(TelemetryStoreTest, ClosedWindowsArePackedAndStillSummarized) {
  TelemetryStore store(TelemetryOptions{});
  auto h = store.ForHost("h");
  // Window 0: RTTs over 10 us .. 10 ms (hundreds of dense buckets).
  v1::Report wide = Report(100, 1e-5, 0);
  QuantileSketch spread;
  for (int i = 0; i < 1000; ++i) spread.Insert(1e-5 * std::pow(1000.0, i / 999.0));
  spread.ToProto(wide.mutable_latency(0)->mutable_network_rtt_seconds());
  ASSERT_TRUE(h->AddReport(wide, kT0).ok());
  store.Prune(kT0);
  const size_t open_bytes = store.footprint().bytes;
  // Window 1 opens: window 0 is packed.
  ASSERT_TRUE(h->AddReport(Report(100, 2e-5, 10), kT0 + absl::Seconds(10)).ok());
  std::vector<WindowAggregate> w = h->Windows();
  ASSERT_EQ(w.size(), 2u);
  EXPECT_TRUE(w[0].latency.at("intra_tor").packed);
  EXPECT_FALSE(w[1].latency.at("intra_tor").packed);
  EXPECT_LT(w[0].ApproxBytes(), open_bytes / 3) << "packing saved too little";
  EXPECT_EQ(w[0].latency.at("intra_tor").NetworkRtt().count(), 1000u);
  // The summary over both windows equals the merge of what went in.
  TelemetrySummary s = store.Summarize({"h"}, kT0, kT0 + absl::Seconds(20));
  EXPECT_EQ(s.network_rtt.count(), 1010u);
  QuantileSketch want = spread;
  want.Insert(2e-5, 10);
  for (double q : {0.01, 0.5, 0.99, 1.0}) {
    EXPECT_DOUBLE_EQ(s.network_rtt.Quantile(q), want.Quantile(q)) << "q=" << q;
  }
  EXPECT_DOUBLE_EQ(s.cnp_rate_per_second, 200.0 / 4.0);
}

// Counter sums survive packing exactly: ids with gaps, zero and 64-bit sums.
TEST(TelemetryStoreTest, PackedCounterSumsRoundTrip) {
  WindowAggregate w;
  std::vector<std::pair<int32_t, uint64_t>> want = {
      {0, 0}, {1, 1}, {2, 127}, {3, 128}, {200, 1ull << 35}, {4095, ~0ull}, {4096, 300}};
  for (auto it = want.rbegin(); it != want.rend(); ++it) w.AddCounter(it->first, it->second);
  w.AddCounter(3, 2);  // sums add up before packing
  want[3].second += 2;
  const size_t before = w.ApproxBytes();
  w.Compact();
  EXPECT_TRUE(w.counter_deltas.empty());
  EXPECT_FALSE(w.packed_counter_deltas.empty());
  EXPECT_LT(w.ApproxBytes(), before);
  std::vector<std::pair<int32_t, uint64_t>> got;
  w.ForEachCounter([&](int32_t id, uint64_t sum) { got.emplace_back(id, sum); });
  EXPECT_EQ(got, want);
}

TEST(TelemetryStoreTest, GroupMergeCombinesSketchesAcrossHosts) {
  TelemetryStore store(TelemetryOptions{});
  ASSERT_TRUE(store.ForHost("a")->AddReport(Report(10, 1e-5, 99), kT0).ok());
  ASSERT_TRUE(store.ForHost("b")->AddReport(Report(30, 1e-3, 1), kT0).ok());
  ASSERT_TRUE(store.ForHost("c")->AddReport(Report(50, 1.0, 1000), kT0).ok());
  TelemetrySummary s = store.Summarize({"a", "b"}, kT0, kT0 + absl::Seconds(10));
  EXPECT_EQ(s.hosts, 2);
  EXPECT_EQ(s.network_rtt.count(), 100u);
  EXPECT_NEAR(s.network_rtt.Quantile(0.5), 1e-5, 1e-5 * 0.02);
  EXPECT_NEAR(s.network_rtt.Quantile(1.0), 1e-3, 1e-3 * 0.02);
  EXPECT_DOUBLE_EQ(s.cnp_rate_per_second, 5.0 + 15.0);
  // Peer-class filter.
  EXPECT_EQ(store.Summarize({"a"}, kT0, kT0 + absl::Seconds(10), "inter_tor").network_rtt.count(),
            0u);
}

// The job signal is kept per window like probe RTT: merged per (job, op)
// over a period for one host (the judge's input), over hosts for a group
// (each (job, op) counts the hosts that reported it), the same once its
// window is packed; ops and jobs stay apart.
TEST(TelemetryStoreTest, JobSignalIsKeptPerWindowLikeProbeRtt) {
  TelemetryStore store(TelemetryOptions{});
  auto a = store.ForHost("a");
  auto b = store.ForHost("b");
  ASSERT_TRUE(a->AddReport(WithJob(WithJob(Report(1, 1e-5), "run3", "allreduce", 1e-3, 90, 900),
                                   "run3", "step", 0.5, 1),
                           kT0)
                  .ok());
  ASSERT_TRUE(a->AddReport(WithJob(Report(1, 1e-5), "run3", "allreduce", 4e-3, 10, 100),
                           kT0 + absl::Seconds(2))
                  .ok());
  ASSERT_TRUE(b->AddReport(WithJob(Report(1, 1e-5), "run3", "allreduce", 2e-3, 100), kT0).ok());
  // The next window opens on both hosts: the first is packed.
  ASSERT_TRUE(
      a->AddReport(WithJob(Report(1, 1e-5), "other", "allreduce", 1.0, 5), kT0 + absl::Seconds(10))
          .ok());
  ASSERT_TRUE(b->AddReport(Report(1, 1e-5), kT0 + absl::Seconds(10)).ok());
  ASSERT_TRUE(a->Windows()[0].jobs.at({"run3", "allreduce"}).packed);

  // One host over the first window.
  PeriodAggregate first = a->Aggregate(kT0, kT0 + absl::Seconds(10), "");
  ASSERT_EQ(first.jobs.size(), 2u);
  const JobPeriod& ar = first.jobs.at({"run3", "allreduce"});
  EXPECT_EQ(ar.seconds.count(), 100u);
  EXPECT_EQ(ar.bytes, 1000u);
  EXPECT_NEAR(ar.seconds.Quantile(0.5), 1e-3, 1e-3 * 0.02);
  EXPECT_NEAR(ar.seconds.Quantile(0.95), 4e-3, 4e-3 * 0.02);
  EXPECT_EQ(first.jobs.at({"run3", "step"}).seconds.count(), 1u);
  // A peer class filters probes, not the job signal.
  EXPECT_EQ(a->Aggregate(kT0, kT0 + absl::Seconds(10), "inter_tor").jobs.size(), 2u);
  // Both windows, both hosts.
  TelemetrySummary s = store.Summarize({"a", "b"}, kT0, kT0 + absl::Seconds(20));
  ASSERT_EQ(s.jobs.size(), 3u);
  const JobPeriod& fleet = s.jobs.at({"run3", "allreduce"});
  EXPECT_EQ(fleet.hosts, 2);
  EXPECT_EQ(fleet.seconds.count(), 200u);
  EXPECT_NEAR(fleet.seconds.Quantile(0.5), 2e-3, 2e-3 * 0.02);
  EXPECT_EQ(s.jobs.at({"other", "allreduce"}).hosts, 1);
  EXPECT_EQ(s.jobs.begin()->first, (JobKey{"other", "allreduce"})) << "ordered by job, then op";
  // A window without the job signal has none.
  EXPECT_TRUE(
      store.Summarize({"b"}, kT0 + absl::Seconds(10), kT0 + absl::Seconds(20)).jobs.empty());
}

// A window keeps at most max_job_series_per_window (job, op) pairs; further
// pairs are skipped, the pairs it has keep growing; an entry without events
// takes no slot.
TEST(TelemetryStoreTest, JobSeriesPerWindowAreCapped) {
  TelemetryOptions opt;
  opt.max_job_series_per_window = 2;
  TelemetryStore store(opt);
  auto h = store.ForHost("h");
  ASSERT_TRUE(h->AddReport(WithJob(WithJob(WithJob(Report(1, 1e-5), "empty", "step", 1e-3, 0), "a",
                                           "step", 1e-3, 1),
                                   "b", "step", 1e-3, 1),
                           kT0)
                  .ok());
  ASSERT_TRUE(
      h->AddReport(WithJob(WithJob(Report(1, 1e-5), "c", "step", 1e-3, 1), "a", "step", 1e-3, 1),
                   kT0 + absl::Seconds(1))
          .ok());
  PeriodAggregate p = h->Aggregate(kT0, kT0 + absl::Seconds(10), "");
  ASSERT_EQ(p.jobs.size(), 2u);
  EXPECT_EQ(p.jobs.at({"a", "step"}).seconds.count(), 2u);
  EXPECT_EQ(p.jobs.count({"c", "step"}), 0u);
  EXPECT_EQ(p.jobs.count({"empty", "step"}), 0u);
}

TEST(TelemetryStoreTest, InvalidReportsChangeNothing) {
  TelemetryStore store(TelemetryOptions{});
  auto h = store.ForHost("h");
  v1::Report bad_rate = Report(1, 1e-5);
  bad_rate.mutable_counters(0)->set_rate_per_second(std::numeric_limits<double>::quiet_NaN());
  v1::Report no_name = Report(1, 1e-5);
  no_name.mutable_counters(1)->clear_name();
  v1::Report backwards = Report(1, 1e-5);
  backwards.set_start_unix_nanos(5'000'000'000);
  v1::Report bad_sketch = Report(1, 1e-5);
  bad_sketch.mutable_latency(0)->mutable_network_rtt_seconds()->set_min(5);
  bad_sketch.mutable_latency(0)->mutable_network_rtt_seconds()->set_max(1);
  v1::Report no_class = Report(1, 1e-5);
  no_class.mutable_latency(0)->clear_peer_class();
  v1::Report bad_job = WithJob(Report(1, 1e-5), "run 3", "allreduce", 1e-3, 10);
  v1::Report bad_op = WithJob(Report(1, 1e-5), "run3", "AllReduce", 1e-3, 10);
  v1::Report bad_job_sketch = WithJob(Report(1, 1e-5), "run3", "allreduce", 1e-3, 10);
  QuantileSketch coarse(0.05);
  coarse.Insert(1e-3);
  coarse.ToProto(bad_job_sketch.mutable_jobs(0)->mutable_seconds());
  v1::Report negative_job = WithJob(Report(1, 1e-5), "run3", "allreduce", 1e-3, 10);
  negative_job.mutable_jobs(0)->mutable_seconds()->set_min(-1);
  v1::Report too_many_jobs = Report(1, 1e-5);
  for (int i = 0; i < 65; ++i) too_many_jobs = WithJob(too_many_jobs, "run3", "step", 1e-3, 1);

  struct Case {
    v1::Report report;
    const char* needle;
  };
  for (const Case& c : {Case{bad_rate, "rate_per_second"}, Case{no_name, "counters[1].name"},
                        Case{backwards, "before start"}, Case{bad_sketch, "network_rtt_seconds"},
                        Case{no_class, "peer_class"}, Case{bad_job, "jobs[0].job: only letters"},
                        Case{bad_op, "jobs[0].op: only a-z"},
                        Case{bad_job_sketch, "jobs[0].seconds: relative_accuracy"},
                        Case{negative_job, "jobs[0].seconds"},
                        Case{too_many_jobs, "report.jobs has 65 entries (limit 64)"}}) {
    absl::Status s = h->AddReport(c.report, kT0);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.needle;
    EXPECT_THAT(std::string(s.message()), HasSubstr(c.needle));
  }
  EXPECT_TRUE(h->Windows().empty());
  EXPECT_EQ(h->reports(), 0u);
  EXPECT_EQ(store.names().size(), 0);
}

v1::Report Held(v1::Report r, absl::Duration held) {
  r.set_held_nanos(absl::ToInt64Nanoseconds(held));
  return r;
}

// Reports an agent held while disconnected go to the window of their time
// (receipt - held): a missing window is created in its place, a closed one is
// reopened and packed again; live reports are unaffected.
TEST(TelemetryStoreTest, HeldReportsAreFiledInTheWindowOfTheirTime) {
  TelemetryOptions opt;
  opt.window = absl::Seconds(10);
  opt.retention = absl::Seconds(60);
  TelemetryStore store(opt);
  auto h = store.ForHost("h");
  ReportFiling filing = ReportFiling::kHeldDiscarded;
  // Live reports in windows 0 and 4.
  ASSERT_TRUE(h->AddReport(Report(100, 1e-5), kT0 + absl::Seconds(1), &filing).ok());
  EXPECT_EQ(filing, ReportFiling::kLive);
  ASSERT_TRUE(h->AddReport(Report(1, 1e-5), kT0 + absl::Seconds(41)).ok());
  // Received at 42 s, held 20 s: window 2, which the host did not report in.
  ASSERT_TRUE(
      h->AddReport(Held(Report(20, 2e-5), absl::Seconds(20)), kT0 + absl::Seconds(42), &filing)
          .ok());
  EXPECT_EQ(filing, ReportFiling::kHeld);
  // Held 41.5 s: window 0, closed (packed) since window 4 opened.
  ASSERT_TRUE(h->AddReport(Held(Report(50, 1e-5), absl::Milliseconds(41'500)),
                           kT0 + absl::Seconds(43), &filing)
                  .ok());
  EXPECT_EQ(filing, ReportFiling::kHeld);
  std::vector<WindowAggregate> w = h->Windows();
  ASSERT_EQ(w.size(), 3u);
  EXPECT_EQ(w[0].index, store.WindowIndex(kT0));
  EXPECT_EQ(w[1].index, store.WindowIndex(kT0 + absl::Seconds(20)));
  EXPECT_EQ(w[2].index, store.WindowIndex(kT0 + absl::Seconds(40)));
  EXPECT_EQ(w[0].reports, 2u);
  EXPECT_EQ(w[1].reports, 1u);
  EXPECT_EQ(w[2].reports, 1u);
  // The older windows are packed again, with the held report's counts in.
  EXPECT_TRUE(w[0].counter_deltas.empty());
  EXPECT_FALSE(w[0].packed_counter_deltas.empty());
  EXPECT_TRUE(w[0].latency.at("intra_tor").packed);
  TelemetrySummary first = store.Summarize({"h"}, kT0, kT0 + absl::Seconds(10));
  EXPECT_DOUBLE_EQ(first.cnp_rate_per_second, 150.0 / 4.0);
  EXPECT_EQ(first.network_rtt.count(), 20u);
  TelemetrySummary third = store.Summarize({"h"}, kT0 + absl::Seconds(20), kT0 + absl::Seconds(30));
  EXPECT_DOUBLE_EQ(third.cnp_rate_per_second, 20.0 / 2.0);
  // The newest window is still the live one.
  TelemetrySummary last = store.Summarize({"h"}, kT0 + absl::Seconds(40), kT0 + absl::Seconds(50));
  EXPECT_DOUBLE_EQ(last.cnp_rate_per_second, 1.0 / 2.0);
  // The closed windows' memory is kept in step: once only the newest window
  // is left, the footprint is that window's alone (no wrapped-around count).
  store.Prune(kT0 + absl::Seconds(95));
  ASSERT_EQ(h->Windows().size(), 1u);
  EXPECT_GT(store.footprint().bytes, sizeof(WindowAggregate));
  EXPECT_LT(store.footprint().bytes, 64u << 10);
  // A live report stamped late (a clock step) still lands in the newest window.
  ASSERT_TRUE(h->AddReport(Report(2, 1e-5), kT0 + absl::Seconds(12), &filing).ok());
  EXPECT_EQ(filing, ReportFiling::kLive);
  EXPECT_EQ(h->Windows().back().reports, 2u);
  EXPECT_EQ(h->Windows().size(), 1u);
}

TEST(TelemetryStoreTest, HeldReportsPastTheRetentionAreDiscarded) {
  TelemetryOptions opt;
  opt.window = absl::Seconds(10);
  opt.retention = absl::Seconds(30);
  TelemetryStore store(opt);
  auto h = store.ForHost("h");
  ReportFiling filing = ReportFiling::kLive;
  ASSERT_TRUE(
      h->AddReport(Held(Report(5, 1e-5), absl::Seconds(35)), kT0 + absl::Seconds(61), &filing)
          .ok());
  EXPECT_EQ(filing, ReportFiling::kHeldDiscarded);
  EXPECT_TRUE(h->Windows().empty());
  EXPECT_EQ(h->reports(), 1u);
  // With no live window yet, a held report within the retention opens one.
  ASSERT_TRUE(
      h->AddReport(Held(Report(5, 1e-5), absl::Seconds(20)), kT0 + absl::Seconds(61), &filing)
          .ok());
  EXPECT_EQ(filing, ReportFiling::kHeld);
  ASSERT_EQ(h->Windows().size(), 1u);
  EXPECT_EQ(h->Windows()[0].index, store.WindowIndex(kT0 + absl::Seconds(41)));
  // A negative hold is refused and changes nothing.
  absl::Status bad =
      h->AddReport(Held(Report(5, 1e-5), absl::Seconds(-1)), kT0 + absl::Seconds(62));
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.message(), HasSubstr("held_nanos"));
  EXPECT_EQ(h->Windows().size(), 1u);
}

TEST(TelemetryStoreTest, CounterNameTableIsBounded) {
  TelemetryOptions opt;
  opt.max_counter_names = 3;
  TelemetryStore store(opt);
  v1::Report r;
  r.set_end_unix_nanos(1'000'000'000);
  for (int i = 0; i < 5; ++i) {
    auto* c = r.add_counters();
    c->set_name(absl::StrCat("c", i));
    c->set_delta(1);
  }
  ASSERT_TRUE(store.ForHost("h")->AddReport(r, kT0).ok());
  EXPECT_EQ(store.names().size(), 3);
  EXPECT_EQ(store.names().overflowed(), 2u);
  EXPECT_EQ(store.Summarize({"h"}, kT0, kT0 + absl::Seconds(10)).counter_rates.size(), 3u);
}

}  // namespace
}  // namespace rocetune::controller
