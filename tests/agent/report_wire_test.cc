#include "agent/report_wire.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

#include "absl/strings/str_cat.h"
#include "google/protobuf/descriptor.h"
#include "gtest/gtest.h"
#include "rocetune/v1/agent.pb.h"

namespace rocetune {
namespace {

// What protobuf's own serializer makes of AgentMessage{report}.
std::string ProtobufBytes(const v1::Report& report) {
  v1::AgentMessage msg;
  *msg.mutable_report() = report;
  std::string bytes;
  EXPECT_TRUE(msg.SerializeToString(&bytes));
  return bytes;
}

void ExpectSameAsProtobuf(ReportWireEncoder& encoder, const v1::Report& report) {
  const std::string want = ProtobufBytes(report);
  const std::string got(encoder.Encode(report));
  EXPECT_EQ(got, want);
  v1::AgentMessage parsed;
  ASSERT_TRUE(parsed.ParseFromString(got));
  ASSERT_TRUE(parsed.has_report());
  EXPECT_EQ(parsed.report().SerializeAsString(), report.SerializeAsString());
}

v1::CounterSample* AddSample(v1::Report* r, const std::string& device, uint32_t port,
                             int32_t priority, const std::string& name, uint64_t delta,
                             double rate) {
  v1::CounterSample* c = r->add_counters();
  c->set_device(device);
  c->set_port(port);
  c->set_priority(priority);
  c->set_name(name);
  c->set_delta(delta);
  c->set_rate_per_second(rate);
  return c;
}

// The encoder writes the fields it knows by number. A field added to these
// messages must be added to it too: this test fails until it is.
TEST(ReportWireEncoderTest, KnowsEveryFieldOfTheMessagesItEncodes) {
  const google::protobuf::Descriptor* report = v1::Report::descriptor();
  ASSERT_EQ(report->field_count(), 9) << "a new Report field: teach ReportWireEncoder";
  EXPECT_EQ(report->FindFieldByName("seq")->number(), 1);
  EXPECT_EQ(report->FindFieldByName("start_unix_nanos")->number(), 2);
  EXPECT_EQ(report->FindFieldByName("end_unix_nanos")->number(), 3);
  EXPECT_EQ(report->FindFieldByName("counters")->number(), 4);
  EXPECT_EQ(report->FindFieldByName("latency")->number(), 5);
  EXPECT_EQ(report->FindFieldByName("guard_events")->number(), 6);
  EXPECT_EQ(report->FindFieldByName("levels")->number(), 7);
  EXPECT_EQ(report->FindFieldByName("held_nanos")->number(), 8);
  EXPECT_EQ(report->FindFieldByName("jobs")->number(), 9);
  const google::protobuf::Descriptor* sample = v1::CounterSample::descriptor();
  ASSERT_EQ(sample->field_count(), 6) << "a new CounterSample field: teach ReportWireEncoder";
  EXPECT_EQ(sample->FindFieldByName("device")->number(), 1);
  EXPECT_EQ(sample->FindFieldByName("port")->number(), 2);
  EXPECT_EQ(sample->FindFieldByName("priority")->number(), 3);
  EXPECT_EQ(sample->FindFieldByName("name")->number(), 4);
  EXPECT_EQ(sample->FindFieldByName("delta")->number(), 5);
  EXPECT_EQ(sample->FindFieldByName("rate_per_second")->number(), 6);
  const google::protobuf::Descriptor* level = v1::LevelSample::descriptor();
  ASSERT_EQ(level->field_count(), 5) << "a new LevelSample field: teach ReportWireEncoder";
  EXPECT_EQ(level->FindFieldByName("device")->number(), 1);
  EXPECT_EQ(level->FindFieldByName("port")->number(), 2);
  EXPECT_EQ(level->FindFieldByName("priority")->number(), 3);
  EXPECT_EQ(level->FindFieldByName("name")->number(), 4);
  EXPECT_EQ(level->FindFieldByName("value")->number(), 5);
  EXPECT_EQ(v1::AgentMessage::descriptor()->FindFieldByName("report")->number(), 2);
}

TEST(ReportWireEncoderTest, EmptyReport) {
  ReportWireEncoder encoder;
  ExpectSameAsProtobuf(encoder, v1::Report());
}

TEST(ReportWireEncoderTest, ScalarsAndCountersMatchProtobufByteForByte) {
  ReportWireEncoder encoder;
  v1::Report r;
  r.set_seq(7);
  r.set_start_unix_nanos(1764495000123456789);
  r.set_end_unix_nanos(1764495001123456789);
  AddSample(&r, "mlx5_0", 1, -1, "cnp_sent", 12345, 12345.0);
  AddSample(&r, "mlx5_0", 1, 3, "rx_pfc_pause_frames", 0, 0.0);  // proto3 defaults
  AddSample(&r, "", 0, 0, "", 0, 0.0);                           // all defaults
  AddSample(&r, "mlx5_1", 65535, std::numeric_limits<int32_t>::min(), "x",
            std::numeric_limits<uint64_t>::max(), -0.0);  // -0.0 is not default
  AddSample(&r, "bnxt_re0", 2, 7, std::string(300, 'n'), uint64_t{1} << 63,
            std::numeric_limits<double>::infinity());
  AddSample(&r, "d", 1, -1, "nan", 1, std::nan(""));
  ExpectSameAsProtobuf(encoder, r);
}

TEST(ReportWireEncoderTest, NegativeTimesAndLargeSeq) {
  ReportWireEncoder encoder;
  v1::Report r;
  r.set_seq(std::numeric_limits<uint64_t>::max());
  r.set_start_unix_nanos(-1);
  r.set_end_unix_nanos(std::numeric_limits<int64_t>::min());
  ExpectSameAsProtobuf(encoder, r);
}

TEST(ReportWireEncoderTest, LatencyWindowsAndGuardEvents) {
  ReportWireEncoder encoder;
  v1::Report r;
  r.set_seq(1);
  AddSample(&r, "mlx5_0", 1, -1, "cnp_sent", 5, 5.0);
  v1::LatencyWindow* w = r.add_latency();
  w->set_peer_class("intra_tor");
  w->set_probes_sent(100);
  w->set_probes_lost(2);
  w->set_clock("monotonic");
  w->mutable_network_rtt_seconds()->set_relative_accuracy(0.01);
  w->mutable_network_rtt_seconds()->set_bucket_offset(-40);
  for (uint64_t i = 0; i < 50; ++i) w->mutable_network_rtt_seconds()->add_counts(i * 300);
  r.add_latency()->set_peer_class("inter_tor");
  v1::GuardEvent* g = r.add_guard_events();
  g->set_unix_nanos(1764495001123456789);
  g->set_kind("pfc_pause_guard");
  g->set_detail("pause time 40% over 5s");
  g->set_restored_version("v12");
  ExpectSameAsProtobuf(encoder, r);
}

v1::LevelSample* AddLevel(v1::Report* r, const std::string& device, uint32_t port, int32_t priority,
                          const std::string& name, uint64_t value) {
  v1::LevelSample* l = r->add_levels();
  l->set_device(device);
  l->set_port(port);
  l->set_priority(priority);
  l->set_name(name);
  l->set_value(value);
  return l;
}

// Levels come last (field 7), after guard events, as protobuf writes them.
TEST(ReportWireEncoderTest, LevelsMatchProtobufByteForByte) {
  ReportWireEncoder encoder;
  v1::Report r;
  r.set_seq(3);
  AddSample(&r, "Ethernet0", 3, -1, "queue_bytes", 4096, 4096.0);
  r.add_guard_events()->set_kind("drift");
  AddLevel(&r, "Ethernet0", 3, -1, "queue_occupancy_bytes", 123456);
  AddLevel(&r, "Ethernet0", 4, -1, "pfcwd_stormed", 0);  // proto3 default value
  AddLevel(&r, "", 0, 0, "", 0);                         // all defaults
  AddLevel(&r, "Ethernet124", 65535, std::numeric_limits<int32_t>::min(), std::string(200, 'w'),
           std::numeric_limits<uint64_t>::max());
  ExpectSameAsProtobuf(encoder, r);
  // Levels alone, then many of them (a 64-port switch: 1536), into the same buffer.
  v1::Report only;
  AddLevel(&only, "Ethernet0", 1, -1, "queue_watermark_bytes", 1);
  ExpectSameAsProtobuf(encoder, only);
  v1::Report many;
  for (int i = 0; i < 1536; ++i) {
    AddLevel(&many, absl::StrCat("Ethernet", 4 * (i / 24)), static_cast<uint32_t>(i % 8), -1,
             i % 3 == 0 ? "queue_occupancy_bytes" : "queue_watermark_bytes",
             static_cast<uint64_t>(i) * 7919);
  }
  ExpectSameAsProtobuf(encoder, many);
}

// A Report above 2^14 bytes (a 3-byte length) and more, encoded round after
// round into the same buffer, shrinking and growing.
TEST(ReportWireEncoderTest, BufferReusedAcrossSizes) {
  ReportWireEncoder encoder;
  for (int n : {440, 3, 5000, 0, 1, 440}) {
    SCOPED_TRACE(n);
    v1::Report r;
    r.set_seq(static_cast<uint64_t>(n) + 1);
    r.set_start_unix_nanos(1000);
    r.set_end_unix_nanos(2000);
    for (int i = 0; i < n; ++i) {
      AddSample(&r, absl::StrCat("mlx5_", i % 8), 1, i % 9 - 1, absl::StrCat("counter_", i),
                static_cast<uint64_t>(i) * 1000003, static_cast<double>(i) * 0.5);
    }
    ExpectSameAsProtobuf(encoder, r);
  }
}

void AddJob(v1::Report* r, const std::string& job, const std::string& op, uint64_t bytes) {
  v1::JobTiming* j = r->add_jobs();
  j->set_job(job);
  j->set_op(op);
  j->set_bytes(bytes);
  j->mutable_seconds()->set_relative_accuracy(0.01);
  j->mutable_seconds()->set_bucket_offset(-700);
  for (uint64_t i = 0; i < 20; ++i) j->mutable_seconds()->add_counts(i * 3);
  j->mutable_seconds()->set_min(1e-4);
  j->mutable_seconds()->set_max(0.25);
}

// Job timings (field 9) come last, after held_nanos, as protobuf writes them.
TEST(ReportWireEncoderTest, JobTimingsMatchProtobufByteForByte) {
  ReportWireEncoder encoder;
  v1::Report r;
  r.set_seq(4);
  AddSample(&r, "mlx5_0", 1, -1, "cnp_sent", 5, 5.0);
  r.add_latency()->set_peer_class("intra_tor");
  AddJob(&r, "llama-70b/run3", "allreduce", 1ull << 40);
  AddJob(&r, "llama-70b/run3", "step", 0);
  r.add_jobs();  // all defaults
  ExpectSameAsProtobuf(encoder, r);
  r.set_held_nanos(1);
  ExpectSameAsProtobuf(encoder, r);
}

TEST(ReportWireEncoderTest, HeldNanosMatchesProtobuf) {
  ReportWireEncoder encoder;
  v1::Report r;
  r.set_seq(3);
  r.set_end_unix_nanos(5);
  AddSample(&r, "mlx5_0", 1, -1, "cnp_sent", 5, 5.0);
  r.set_held_nanos(2'500'000'000);
  ExpectSameAsProtobuf(encoder, r);
}

// A report encoded when taken and sent later with how long it was held: the
// bytes are protobuf's for the same report with held_nanos set.
TEST(ReportWireEncoderTest, WithHeldReframesAStoredEncoding) {
  ReportWireEncoder encoder;
  for (int n : {0, 1, 440, 5000}) {
    SCOPED_TRACE(n);
    v1::Report r;
    r.set_seq(static_cast<uint64_t>(n) + 1);
    r.set_start_unix_nanos(1000);
    r.set_end_unix_nanos(2000);
    for (int i = 0; i < n; ++i) {
      AddSample(&r, "mlx5_0", 1, i % 9 - 1, absl::StrCat("counter_", i),
                static_cast<uint64_t>(i) * 7, 0.5);
    }
    const std::string stored(encoder.Encode(r));
    for (int64_t held :
         {int64_t{0}, int64_t{1}, int64_t{127}, int64_t{128}, int64_t{3'600'000'000'000}}) {
      SCOPED_TRACE(held);
      std::string out;
      ASSERT_TRUE(ReportWireEncoder::WithHeld(stored, held, &out));
      v1::Report want = r;
      want.set_held_nanos(held);
      v1::AgentMessage msg;
      *msg.mutable_report() = want;
      EXPECT_EQ(out, msg.SerializeAsString());
    }
  }
  // With job timings (field 9) held_nanos (8) follows them: the same message
  // once parsed.
  v1::Report r;
  r.set_seq(9);
  AddSample(&r, "mlx5_0", 1, -1, "cnp_sent", 5, 5.0);
  AddJob(&r, "run3", "allreduce", 4096);
  const std::string stored(encoder.Encode(r));
  std::string out;
  ASSERT_TRUE(ReportWireEncoder::WithHeld(stored, 3'000'000'000, &out));
  v1::AgentMessage parsed;
  ASSERT_TRUE(parsed.ParseFromString(out));
  v1::Report want = r;
  want.set_held_nanos(3'000'000'000);
  EXPECT_EQ(parsed.report().SerializeAsString(), want.SerializeAsString());
  EXPECT_FALSE(ReportWireEncoder::WithHeld("", 1, &out));
  EXPECT_FALSE(ReportWireEncoder::WithHeld(std::string("\x12\x05"
                                                       "ab",
                                                       4),
                                           1, &out));
}

}  // namespace
}  // namespace rocetune
