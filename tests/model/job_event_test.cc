// The job signal's wire format (model/job_event.h): what parses, what is
// refused and why.
#include "model/job_event.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace rocetune {
namespace {

using ::testing::HasSubstr;

TEST(JobEventTest, ParsesEveryFieldInAnyOrder) {
  ParsedJobEvent p =
      ParseJobEvent("RTJ1 op=allreduce us=1250.5 job=llama-7b/run:3 rank=12 bytes=4096\n");
  ASSERT_EQ(p.error, JobEventError::kOk) << p.reason;
  EXPECT_EQ(p.event.job, "llama-7b/run:3");
  EXPECT_EQ(p.event.op, "allreduce");
  EXPECT_DOUBLE_EQ(p.event.seconds, 1250.5e-6);
  EXPECT_EQ(p.event.rank, 12);
  EXPECT_EQ(p.event.bytes, 4096u);
}

TEST(JobEventTest, TheLimitsThemselvesAreAllowed) {
  const std::string line = "RTJ1 job=" + std::string(64, 'j') + " op=" + std::string(32, 'o') +
                           " us=3600000000 rank=16777215 bytes=1125899906842624";
  ParsedJobEvent p = ParseJobEvent(line);
  ASSERT_EQ(p.error, JobEventError::kOk) << p.reason;
  EXPECT_EQ(p.event.rank, 16777215);
  EXPECT_EQ(p.event.bytes, uint64_t{1} << 50);
  EXPECT_DOUBLE_EQ(p.event.seconds, 3600);
}

TEST(JobEventTest, RankAndBytesAreOptional) {
  ParsedJobEvent p = ParseJobEvent("RTJ1 job=j op=step us=0");
  ASSERT_EQ(p.error, JobEventError::kOk) << p.reason;
  EXPECT_EQ(p.event.rank, -1);
  EXPECT_EQ(p.event.bytes, 0u);
  EXPECT_EQ(p.event.seconds, 0);
}

TEST(JobEventTest, FormatParsesBack) {
  JobEvent e;
  e.job = "job.1";
  e.op = "alltoall";
  e.seconds = 0.0123456;
  e.rank = 3;
  e.bytes = 1 << 20;
  ParsedJobEvent p = ParseJobEvent(FormatJobEvent(e));
  ASSERT_EQ(p.error, JobEventError::kOk) << p.reason;
  EXPECT_EQ(p.event.job, e.job);
  EXPECT_EQ(p.event.op, e.op);
  EXPECT_NEAR(p.event.seconds, e.seconds, 1e-9);
  EXPECT_EQ(p.event.rank, 3);
  EXPECT_EQ(p.event.bytes, e.bytes);
}

TEST(JobEventTest, RefusesWithTheReason) {
  struct Case {
    std::string datagram;
    JobEventError error;
    std::string reason;
  };
  const Case cases[] = {
      {std::string(513, 'x'), JobEventError::kOversized, "513 bytes"},
      {"RTJ2 job=j op=step us=1", JobEventError::kVersion, "want RTJ1"},
      {"hello", JobEventError::kVersion, "want RTJ1"},
      {"", JobEventError::kVersion, "want RTJ1"},
      {"RTJ1", JobEventError::kMalformed, "no fields"},
      {"RTJ1 job=j op=step", JobEventError::kMalformed, "us: missing"},
      {"RTJ1 op=step us=1", JobEventError::kMalformed, "job: missing"},
      {"RTJ1 job=j us=1", JobEventError::kMalformed, "op: missing"},
      {"RTJ1 job=j op=step us=1 us=2", JobEventError::kMalformed, "us: given twice"},
      {"RTJ1 job=j op=step us=abc", JobEventError::kMalformed, "us: not a number"},
      {"RTJ1 job=j op=step us=nan", JobEventError::kMalformed, "us: not a number"},
      {"RTJ1 job=j op=step us=-1", JobEventError::kMalformed, "outside"},
      {"RTJ1 job=j op=step us=4e9", JobEventError::kMalformed, "outside"},
      {"RTJ1 job=j op=Step us=1", JobEventError::kMalformed, "op: only"},
      {"RTJ1 job=a b op=step us=1", JobEventError::kMalformed, "want key=value"},
      {"RTJ1 job=j;rm op=step us=1", JobEventError::kMalformed, "job: only"},
      {"RTJ1 job=" + std::string(65, 'a') + " op=step us=1", JobEventError::kMalformed,
       "job: 1-64"},
      {"RTJ1 job=j op=step us=1 rank=-2", JobEventError::kMalformed, "rank:"},
      {"RTJ1 job=j op=step us=1 rank=16777216", JobEventError::kMalformed, "rank:"},
      {"RTJ1 job=j op=step us=1 bytes=x", JobEventError::kMalformed, "bytes:"},
      {"RTJ1 job=j op=step us=1 colour=red", JobEventError::kMalformed, "unknown key"},
      {"RTJ1  job=j op=step us=1", JobEventError::kMalformed, "want key=value"},
      {std::string("RTJ1 job=j\0 op=step us=1", 24), JobEventError::kMalformed, "job: only"},
      {"RTJ1 job= op=step us=1", JobEventError::kMalformed, "job: 1-64"},
      {"RTJ1 job=j op=" + std::string(33, 'a') + " us=1", JobEventError::kMalformed, "op: 1-32"},
      {"RTJ1 job=j op=step us=1 bytes=1125899906842625", JobEventError::kMalformed, "bytes:"},
      {"RTJ1 job=j op=step us=inf", JobEventError::kMalformed, "us: not a number"},
      {"RTJ1 job=j op=step us=1\n\n", JobEventError::kMalformed, "us: not a number"},
      {"RTJ1 job=j op=step us=1\r", JobEventError::kMalformed, "us: not a number"},
      {"RTJ1 job=j op=step us=1 rank=\t3", JobEventError::kMalformed, "rank:"},
  };
  for (const Case& c : cases) {
    ParsedJobEvent p = ParseJobEvent(c.datagram);
    EXPECT_EQ(p.error, c.error) << c.datagram;
    EXPECT_THAT(p.reason, HasSubstr(c.reason)) << c.datagram;
  }
}

TEST(JobEventTest, ErrorNamesAreTheMetricLabels) {
  EXPECT_STREQ(JobEventErrorName(JobEventError::kOk), "ok");
  EXPECT_STREQ(JobEventErrorName(JobEventError::kOversized), "oversized");
  EXPECT_STREQ(JobEventErrorName(JobEventError::kVersion), "version");
  EXPECT_STREQ(JobEventErrorName(JobEventError::kMalformed), "malformed");
}

}  // namespace
}  // namespace rocetune
