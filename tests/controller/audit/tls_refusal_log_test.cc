#include "controller/audit/tls_refusal_log.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace rocetune::controller {
namespace {

using ::testing::HasSubstr;

TlsRefusal Refusal(const std::string& reason, const std::string& subject,
                   const std::string& issuer = "CN=ca") {
  return TlsRefusal{reason, subject, issuer, absl::StrCat(subject, " refused: ", reason)};
}

class TlsRefusalLogTest : public ::testing::Test {
 protected:
  TlsRefusalLog MakeLog(size_t max_keys = 32) {
    TlsRefusalLogOptions o;
    o.period = absl::Minutes(1);
    o.max_keys = max_keys;
    return TlsRefusalLog(
        &clock_, [this](const v1::AuditEntry& e) { rows_.push_back(e); },
        [this](const std::string& reason) { counted_.push_back(reason); }, o);
  }

  FakeClock clock_;
  std::vector<v1::AuditEntry> rows_;
  std::vector<std::string> counted_;
};

TEST_F(TlsRefusalLogTest, FirstRefusalIsARowAtOnceWithItsFields) {
  TlsRefusalLog log = MakeLog();
  log.Record(Refusal("expired", "CN=dave", "CN=dev CA"));
  ASSERT_EQ(rows_.size(), 1u);
  const v1::AuditEntry& e = rows_[0];
  EXPECT_EQ(e.action(), "tls_refused");
  EXPECT_EQ(e.actor(), "CN=dave");
  EXPECT_FALSE(e.authenticated());
  EXPECT_EQ(e.subject(), "CN=dev CA");
  EXPECT_EQ(e.reason(), "expired");
  EXPECT_EQ(e.detail(), "count=1: CN=dave refused: expired");
  EXPECT_EQ(e.unix_nanos(), absl::ToUnixNanos(clock_.Now()));
  EXPECT_EQ(counted_, std::vector<std::string>{"expired"});
}

TEST_F(TlsRefusalLogTest, NoCertificateHasAnActorToo) {
  TlsRefusalLog log = MakeLog();
  log.Record(Refusal("no_certificate", "", ""));
  ASSERT_EQ(rows_.size(), 1u);
  EXPECT_EQ(rows_[0].actor(), "(no certificate)");
}

TEST_F(TlsRefusalLogTest, FloodIsOneRowPerKeyPerPeriodCarryingTheCount) {
  TlsRefusalLog log = MakeLog();
  for (int i = 0; i < 1000; ++i) {
    log.Record(Refusal("untrusted", "CN=mallory"));
    clock_.Advance(absl::Milliseconds(10));  // 10 s in all
  }
  EXPECT_EQ(counted_.size(), 1000u);
  ASSERT_EQ(rows_.size(), 1u);
  log.Flush();  // the period has not passed
  EXPECT_EQ(rows_.size(), 1u);
  clock_.Advance(absl::Seconds(50));
  log.Flush();
  ASSERT_EQ(rows_.size(), 2u);
  EXPECT_THAT(rows_[1].detail(), HasSubstr("count=999 since "));
  // Idle for a period: forgotten, nothing written.
  clock_.Advance(absl::Minutes(1));
  log.Flush();
  EXPECT_EQ(rows_.size(), 2u);
  EXPECT_EQ(log.keys(), 0u);
  // Then a new first row.
  log.Record(Refusal("untrusted", "CN=mallory"));
  ASSERT_EQ(rows_.size(), 3u);
  EXPECT_EQ(rows_[2].detail(), "count=1: CN=mallory refused: untrusted");
}

TEST_F(TlsRefusalLogTest, RefusalAfterThePeriodCarriesTheCountWithoutAFlush) {
  TlsRefusalLog log = MakeLog();
  log.Record(Refusal("untrusted", "CN=m"));
  log.Record(Refusal("untrusted", "CN=m"));
  clock_.Advance(absl::Seconds(61));
  log.Record(Refusal("untrusted", "CN=m"));
  ASSERT_EQ(rows_.size(), 2u);
  EXPECT_THAT(rows_[1].detail(), HasSubstr("count=2 since "));
  // Within the new period: counted, not written.
  log.Record(Refusal("untrusted", "CN=m"));
  EXPECT_EQ(rows_.size(), 2u);
}

TEST_F(TlsRefusalLogTest, KeysAreReasonSubjectAndIssuer) {
  TlsRefusalLog log = MakeLog();
  log.Record(Refusal("untrusted", "CN=a", "CN=x"));
  log.Record(Refusal("untrusted", "CN=a", "CN=y"));
  log.Record(Refusal("expired", "CN=a", "CN=x"));
  log.Record(Refusal("untrusted", "CN=b", "CN=x"));
  log.Record(Refusal("untrusted", "CN=a", "CN=x"));
  EXPECT_EQ(rows_.size(), 4u);
  EXPECT_EQ(log.keys(), 4u);
}

TEST_F(TlsRefusalLogTest, ManySubjectsOverflowIntoOneKeyPerReason) {
  TlsRefusalLog log = MakeLog(/*max_keys=*/4);
  for (int i = 0; i < 100; ++i) log.Record(Refusal("untrusted", absl::StrCat("CN=u", i)));
  for (int i = 0; i < 10; ++i) log.Record(Refusal("expired", absl::StrCat("CN=e", i)));
  // Four named keys, then one overflow key for each reason.
  EXPECT_EQ(log.keys(), 6u);
  ASSERT_EQ(rows_.size(), 6u);
  EXPECT_EQ(rows_[4].actor(), "(others)");
  EXPECT_EQ(rows_[4].reason(), "untrusted");
  EXPECT_EQ(rows_[5].actor(), "(others)");
  EXPECT_EQ(rows_[5].reason(), "expired");
  clock_.Advance(absl::Minutes(1));
  log.Flush();
  ASSERT_EQ(rows_.size(), 8u);
  int64_t counted = 0;
  for (const v1::AuditEntry& e : rows_) {
    counted += std::stoll(e.detail().substr(6, e.detail().find_first_of(" :", 6) - 6));
  }
  EXPECT_EQ(counted, 110);
  // Once the named keys are idle and forgotten, new subjects get their own again.
  clock_.Advance(absl::Minutes(1));
  log.Flush();
  EXPECT_EQ(log.keys(), 0u);
  log.Record(Refusal("untrusted", "CN=new"));
  EXPECT_EQ(rows_.back().actor(), "CN=new");
}

TEST_F(TlsRefusalLogTest, CloseWritesPendingCountsThenIgnoresRefusals) {
  TlsRefusalLog log = MakeLog();
  log.Record(Refusal("untrusted", "CN=m"));
  log.Record(Refusal("untrusted", "CN=m"));
  log.Record(Refusal("untrusted", "CN=m"));
  log.Close();
  ASSERT_EQ(rows_.size(), 2u);
  EXPECT_THAT(rows_[1].detail(), HasSubstr("count=2 since "));
  log.Record(Refusal("untrusted", "CN=m"));
  log.Flush();
  log.Close();
  EXPECT_EQ(rows_.size(), 2u);
  EXPECT_EQ(counted_.size(), 3u);
}

}  // namespace
}  // namespace rocetune::controller
