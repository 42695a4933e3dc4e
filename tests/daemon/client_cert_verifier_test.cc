// ClientCertVerifier against certificates made by openssl at run time
// (make_verifier_certs.sh).
#include "daemon/client_cert_verifier.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/test_support.h"

namespace rocetune {
namespace {

using ::testing::HasSubstr;

std::string Read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void Write(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
}

class ClientCertVerifierTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    // A directory of its own: two copies of this test (two build trees) may run at once.
    dir_ = new std::string(testing::MakeTempDir("client-cert-verifier"));
    const std::string cmd = absl::StrCat(
        ROCETUNE_SOURCE_DIR, "/tests/daemon/make_verifier_certs.sh ", *dir_, " >/dev/null");
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  }
  static void TearDownTestSuite() {
    std::filesystem::remove_all(*dir_);
    delete dir_;
  }

  void SetUp() override {
    ca_file_ = absl::StrCat(
        *dir_, "/bundle-", ::testing::UnitTest::GetInstance()->current_test_info()->name(), ".pem");
    Write(ca_file_, Cert("ca"));
  }
  void TearDown() override { std::filesystem::remove(ca_file_); }

  static std::string Cert(const std::string& name) { return Read(*dir_ + "/" + name + ".pem"); }

  static std::string* dir_;
  std::string ca_file_;
};

std::string* ClientCertVerifierTest::dir_ = nullptr;

TEST_F(ClientCertVerifierTest, CertificateOfTheCaIsAccepted) {
  ClientCertVerifier v(ca_file_);
  TlsRefusal r;
  EXPECT_TRUE(v.Verify(Cert("good"), "", &r).ok()) << r.message;
  // The leaf repeated in the chain (as a client's chain may be) is fine too.
  EXPECT_TRUE(v.Verify(Cert("good"), Cert("good") + Cert("ca"), &r).ok()) << r.message;
  // Only a chain, no separate leaf: its first certificate is the leaf.
  EXPECT_TRUE(v.Verify("", Cert("good"), &r).ok()) << r.message;
}

TEST_F(ClientCertVerifierTest, IntermediateFromThePeerIsUsedButNotTrusted) {
  ClientCertVerifier v(ca_file_);
  TlsRefusal r;
  EXPECT_TRUE(v.Verify(Cert("via-int"), Cert("int"), &r).ok()) << r.message;
  absl::Status s = v.Verify(Cert("via-int"), "", &r);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(r.reason, kRefusedUntrusted);
  // A peer cannot make its own CA a trust anchor by sending it.
  s = v.Verify(Cert("other"), Cert("other-ca"), &r);
  EXPECT_EQ(r.reason, kRefusedUntrusted) << s;
}

TEST_F(ClientCertVerifierTest, IntermediateAloneInTheBundleIsATrustAnchor) {
  Write(ca_file_, Cert("int"));
  ClientCertVerifier v(ca_file_);
  TlsRefusal r;
  EXPECT_TRUE(v.Verify(Cert("via-int"), "", &r).ok()) << r.message;
  // Not the root's other children.
  EXPECT_FALSE(v.Verify(Cert("good"), "", &r).ok());
  EXPECT_EQ(r.reason, kRefusedUntrusted);
}

TEST_F(ClientCertVerifierTest, CertificateOfAnotherCaIsRefused) {
  ClientCertVerifier v(ca_file_);
  TlsRefusal r;
  absl::Status s = v.Verify(Cert("other"), "", &r);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(r.reason, kRefusedUntrusted);
  EXPECT_EQ(r.subject, "CN=other-client");
  EXPECT_EQ(r.issuer, "CN=other CA");
  EXPECT_THAT(s.message(), HasSubstr("client certificate CN=other-client issued by CN=other CA: "
                                     "not signed by the configured CA"));
  EXPECT_EQ(r.message, s.message());
}

TEST_F(ClientCertVerifierTest, ExpiredAndNotYetValidAreRefused) {
  ClientCertVerifier v(ca_file_);
  TlsRefusal r;
  absl::Status s = v.Verify(Cert("expired"), "", &r);
  EXPECT_EQ(r.reason, kRefusedExpired) << s;
  EXPECT_THAT(s.message(),
              HasSubstr("certificate has expired (notAfter Jan  2 00:00:00 2020 GMT)"));
  s = v.Verify(Cert("future"), "", &r);
  EXPECT_EQ(r.reason, kRefusedNotYetValid) << s;
  EXPECT_THAT(s.message(), HasSubstr("notBefore Jan  1 00:00:00 2099 GMT"));
}

TEST_F(ClientCertVerifierTest, ServerOnlyCertificateIsRefused) {
  ClientCertVerifier v(ca_file_);
  TlsRefusal r;
  absl::Status s = v.Verify(Cert("server-only"), "", &r);
  EXPECT_EQ(r.reason, kRefusedWrongPurpose) << s;
  EXPECT_THAT(s.message(), HasSubstr("not usable for TLS client authentication"));
}

TEST_F(ClientCertVerifierTest, MissingOrGarbledCertificateIsRefused) {
  ClientCertVerifier v(ca_file_);
  TlsRefusal r;
  absl::Status s = v.Verify("", "", &r);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(r.reason, kRefusedNoCertificate);
  EXPECT_EQ(r.subject, "");
  std::string garbled = Cert("good");
  // A changed signature byte (near the end of the base64 text).
  const size_t end = garbled.find("\n-----END");
  ASSERT_NE(end, std::string::npos);
  garbled[end - 6] = garbled[end - 6] == 'A' ? 'B' : 'A';
  s = v.Verify(garbled, "", &r);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnauthenticated);
  EXPECT_TRUE(r.reason == kRefusedBadCertificate || r.reason == kRefusedUntrusted) << r.message;
  s = v.Verify("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n", "", &r);
  EXPECT_EQ(r.reason, kRefusedBadCertificate) << s;
}

TEST_F(ClientCertVerifierTest, RotatedCaFileTakesEffectAtTheNextCall) {
  ClientCertVerifier v(ca_file_);
  ASSERT_TRUE(v.Verify(Cert("good"), "").ok());
  ASSERT_FALSE(v.Verify(Cert("other"), "").ok());
  Write(ca_file_, Cert("ca") + Cert("other-ca"));  // both trusted
  EXPECT_TRUE(v.Verify(Cert("good"), "").ok());
  EXPECT_TRUE(v.Verify(Cert("other"), "").ok());
  // Replaced by rename (a new inode), trusting only the other CA.
  const std::string next = ca_file_ + ".next";
  Write(next, Cert("other-ca"));
  std::filesystem::rename(next, ca_file_);
  TlsRefusal r;
  EXPECT_FALSE(v.Verify(Cert("good"), "", &r).ok());
  EXPECT_EQ(r.reason, kRefusedUntrusted);
  EXPECT_TRUE(v.Verify(Cert("other"), "").ok());
}

TEST_F(ClientCertVerifierTest, BrokenCaFileRefusesEverything) {
  ClientCertVerifier v(ca_file_);
  ASSERT_TRUE(v.Verify(Cert("good"), "").ok());
  TlsRefusal r;
  std::filesystem::remove(ca_file_);
  absl::Status s = v.Verify(Cert("good"), "", &r);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(r.reason, kRefusedCaUnavailable);
  EXPECT_THAT(s.message(), HasSubstr(ca_file_));
  EXPECT_EQ(r.subject, "CN=good-client");
  Write(ca_file_, "not a certificate\n");
  s = v.Verify(Cert("good"), "", &r);
  EXPECT_EQ(r.reason, kRefusedCaUnavailable) << s;
  EXPECT_THAT(s.message(), HasSubstr("no PEM certificate"));
  Write(ca_file_, "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n");
  s = v.Verify(Cert("good"), "", &r);
  EXPECT_EQ(r.reason, kRefusedCaUnavailable) << s;
  EXPECT_THAT(s.message(), HasSubstr("not a PEM certificate bundle"));
  if (geteuid() != 0) {  // root reads any file
    Write(ca_file_, Cert("ca"));
    std::filesystem::permissions(ca_file_, std::filesystem::perms::none);
    s = v.Verify(Cert("good"), "", &r);
    EXPECT_EQ(r.reason, kRefusedCaUnavailable) << s;
    EXPECT_THAT(s.message(), HasSubstr("cannot be read"));
    std::filesystem::permissions(
        ca_file_, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  }
  // Repaired: accepted again.
  Write(ca_file_, Cert("ca") + "\n");
  EXPECT_TRUE(v.Verify(Cert("good"), "").ok());
}

TEST(ClientCertVerifierReasonsTest, ReasonsAreDistinct) {
  std::vector<std::string> reasons = TlsRefusalReasons();
  std::sort(reasons.begin(), reasons.end());
  EXPECT_EQ(std::unique(reasons.begin(), reasons.end()), reasons.end());
  EXPECT_EQ(reasons.size(), 8u);
}

}  // namespace
}  // namespace rocetune
