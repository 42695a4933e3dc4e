#include "controller/telemetry/report_decoder.h"

#include <cmath>
#include <limits>
#include <random>
#include <string>

#include "google/protobuf/stubs/logging.h"
#include "gtest/gtest.h"
#include "rocetune/v1/agent.pb.h"

namespace rocetune::controller {
namespace {

v1::Report SampleReport(int counters, uint32_t seed) {
  std::mt19937 rng(seed);
  v1::Report r;
  r.set_seq(rng());
  r.set_start_unix_nanos(1'700'000'000'000'000'000 + rng());
  r.set_end_unix_nanos(r.start_unix_nanos() + 1'000'000'000);
  for (int i = 0; i < counters; ++i) {
    v1::CounterSample* c = r.add_counters();
    c->set_device(i % 3 == 0 ? "" : "mlx5_" + std::to_string(i % 4));
    c->set_port(i % 5);
    c->set_priority(i % 7 == 0 ? -1 : i % 8);  // negative: a 10-byte varint
    c->set_name(i == 0 ? "cnp_sent" : "counter_" + std::to_string(i));
    c->set_delta(i == 1 ? std::numeric_limits<uint64_t>::max() : rng());
    c->set_rate_per_second(i == 2 ? -0.0 : rng() / 7.0);
  }
  v1::LatencyWindow* w = r.add_latency();
  w->set_peer_class("intra_tor");
  w->set_probes_sent(200);
  w->mutable_network_rtt_seconds()->set_relative_accuracy(0.01);
  r.add_latency()->set_peer_class("inter_tor");
  r.add_guard_events()->set_detail("pfc pause ratio 0.2 above 0.1");
  if (seed % 2 == 0) r.set_held_nanos(static_cast<int64_t>(rng()) * 1000);  // a held report
  if (seed % 2 == 1) {                                                      // the job signal
    for (const char* op : {"allreduce", "step"}) {
      v1::JobTiming* j = r.add_jobs();
      j->set_job("llama/run3");
      j->set_op(op);
      j->set_bytes(rng());
      j->mutable_seconds()->set_relative_accuracy(0.01);
      j->mutable_seconds()->add_counts(rng() % 50);
      j->mutable_seconds()->set_max(0.002);
    }
  }
  return r;
}

std::string AsAgentMessage(const v1::Report& r) {
  v1::AgentMessage m;
  *m.mutable_report() = r;
  return m.SerializeAsString();
}

// What protobuf makes of `bytes`, with the counters moved out of the Report.
void ExpectSameAsProtobuf(const ReportDecoder& d, const std::string& bytes) {
  v1::AgentMessage m;
  ASSERT_TRUE(m.ParseFromString(bytes));
  ASSERT_TRUE(m.has_report());
  v1::Report head = m.report();
  head.clear_counters();
  EXPECT_EQ(d.head().SerializeAsString(), head.SerializeAsString());
  ASSERT_EQ(d.counters().size(), static_cast<size_t>(m.report().counters_size()));
  for (int i = 0; i < m.report().counters_size(); ++i) {
    const v1::CounterSample& c = m.report().counters(i);
    EXPECT_EQ(d.counters()[i].name, c.name()) << i;
    EXPECT_EQ(d.counters()[i].delta, c.delta()) << i;
    EXPECT_EQ(d.counters()[i].priority, c.priority()) << i;
    // Bit for bit (-0.0 and NaN included).
    EXPECT_EQ(std::signbit(d.counters()[i].rate_per_second), std::signbit(c.rate_per_second()));
    EXPECT_TRUE(d.counters()[i].rate_per_second == c.rate_per_second() ||
                (std::isnan(d.counters()[i].rate_per_second) && std::isnan(c.rate_per_second())))
        << i;
  }
}

TEST(ReportDecoderTest, DecodesWhatProtobufParses) {
  ReportDecoder d;
  for (int n : {0, 1, 64, 416}) {
    const std::string bytes = AsAgentMessage(SampleReport(n, n + 1));
    ASSERT_TRUE(d.Decode(bytes)) << n;
    ExpectSameAsProtobuf(d, bytes);
  }
}

TEST(ReportDecoderTest, ReusedAcrossReportsKeepsNothingOfThePreviousOne) {
  ReportDecoder d;
  ASSERT_TRUE(d.Decode(AsAgentMessage(SampleReport(64, 1))));
  v1::Report small;
  small.set_seq(7);
  const std::string bytes = AsAgentMessage(small);
  ASSERT_TRUE(d.Decode(bytes));
  ExpectSameAsProtobuf(d, bytes);
  EXPECT_TRUE(d.counters().empty());
  EXPECT_EQ(d.head().latency_size(), 0);
}

TEST(ReportDecoderTest, NaNInfinityAndRepeatedFieldsAsProtobuf) {
  v1::Report r = SampleReport(3, 9);
  r.mutable_counters(0)->set_rate_per_second(std::nan(""));
  r.mutable_counters(1)->set_rate_per_second(std::numeric_limits<double>::infinity());
  std::string bytes = AsAgentMessage(r);
  ReportDecoder d;
  ASSERT_TRUE(d.Decode(bytes));
  ExpectSameAsProtobuf(d, bytes);
  // A field given twice inside a Report: the last one wins, as in protobuf.
  v1::Report again;
  again.set_seq(99);
  again.set_end_unix_nanos(5);
  const std::string report_bytes = r.SerializeAsString() + again.SerializeAsString();
  std::string msg;
  msg.push_back(static_cast<char>((v1::AgentMessage::kReportFieldNumber << 3) | 2));
  // Lengths here are below 2^14: two varint bytes at most.
  size_t len = report_bytes.size();
  while (len >= 0x80) {
    msg.push_back(static_cast<char>((len & 0x7f) | 0x80));
    len >>= 7;
  }
  msg.push_back(static_cast<char>(len));
  msg += report_bytes;
  ASSERT_TRUE(d.Decode(msg));
  ExpectSameAsProtobuf(d, msg);
  EXPECT_EQ(d.head().seq(), 99u);
}

TEST(ReportDecoderTest, LeavesEverythingElseToProtobuf) {
  ReportDecoder d;
  v1::AgentMessage hello;
  hello.mutable_hello()->set_host_id("h1");
  EXPECT_FALSE(d.Decode(hello.SerializeAsString()));
  v1::AgentMessage ack;
  ack.mutable_ack()->set_version("v1");
  EXPECT_FALSE(d.Decode(ack.SerializeAsString()));
  EXPECT_FALSE(d.Decode(""));  // an empty AgentMessage: protobuf's verdict
  EXPECT_FALSE(d.Decode("\xff\xff\xff"));

  const std::string good = AsAgentMessage(SampleReport(8, 3));
  // Every truncation.
  for (size_t n = 0; n < good.size(); ++n) {
    EXPECT_FALSE(d.Decode(good.substr(0, n))) << n;
  }
  // Something after the report: another top-level field (protobuf merges or
  // switches the oneof).
  EXPECT_FALSE(d.Decode(good + hello.SerializeAsString()));
  EXPECT_FALSE(d.Decode(good + good));

  // Non-ASCII text in a counter (protobuf checks UTF-8).
  v1::Report r = SampleReport(2, 4);
  r.mutable_counters(1)->set_name("r\xc3\xa9seau");
  EXPECT_FALSE(d.Decode(AsAgentMessage(r)));
  r = SampleReport(2, 4);
  r.mutable_counters(0)->set_device("\xff");
  EXPECT_FALSE(d.Decode(AsAgentMessage(r)));
}

TEST(ReportDecoderTest, UnknownFieldsAndWireTypeMismatchesGoToProtobuf) {
  ReportDecoder d;
  v1::Report r = SampleReport(2, 5);
  // An unknown field (number 15, varint) appended to the first CounterSample.
  v1::Report with_unknown = r;
  with_unknown.mutable_counters(0)
      ->GetReflection()
      ->MutableUnknownFields(with_unknown.mutable_counters(0))
      ->AddVarint(15, 1);
  EXPECT_FALSE(d.Decode(AsAgentMessage(with_unknown)));
  // ... and to the Report.
  with_unknown = r;
  with_unknown.GetReflection()->MutableUnknownFields(&with_unknown)->AddVarint(15, 1);
  EXPECT_FALSE(d.Decode(AsAgentMessage(with_unknown)));
  // CounterSample.delta (field 5) sent as length-delimited: protobuf keeps it
  // as an unknown field.
  v1::Report mismatch = r;
  mismatch.mutable_counters(0)
      ->GetReflection()
      ->MutableUnknownFields(mismatch.mutable_counters(0))
      ->AddLengthDelimited(5, "x");
  EXPECT_FALSE(d.Decode(AsAgentMessage(mismatch)));
  // Report.seq as fixed64.
  mismatch = r;
  mismatch.GetReflection()->MutableUnknownFields(&mismatch)->AddFixed64(1, 3);
  EXPECT_FALSE(d.Decode(AsAgentMessage(mismatch)));
}

TEST(ReportDecoderTest, RandomBytesNeverDecodeToSomethingProtobufRefuses) {
  google::protobuf::LogSilencer quiet;  // protobuf logs each invalid UTF-8 string it refuses
  std::mt19937 rng(42);
  const std::string good = AsAgentMessage(SampleReport(4, 6));
  ReportDecoder d;
  int decoded = 0;
  for (int i = 0; i < 20000; ++i) {
    std::string bytes = good;
    const int flips = 1 + static_cast<int>(rng() % 3);
    for (int k = 0; k < flips; ++k) bytes[rng() % bytes.size()] = static_cast<char>(rng());
    if (!d.Decode(bytes)) continue;
    ++decoded;
    ExpectSameAsProtobuf(d, bytes);
    if (::testing::Test::HasFailure()) return;
  }
  EXPECT_GT(decoded, 1000);  // most single-byte flips land in values
}

}  // namespace
}  // namespace rocetune::controller
