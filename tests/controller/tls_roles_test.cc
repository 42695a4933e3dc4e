// Mutual TLS and roles end to end on loopback: certificates made at run time
// by deploy/pki/make-dev-pki.sh; a controller started in process.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "controller/controller.h"
#include "daemon/grpc_log.h"
#include "daemon/logging.h"
#include "daemon/tls.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/security/tls_certificate_provider.h"
#include "grpcpp/security/tls_credentials_options.h"
#include "gtest/gtest.h"
#include "prometheus/registry.h"
#include "rocetune/v1/admin.grpc.pb.h"
#include "rocetune/v1/agent.grpc.pb.h"
#include "tests/controller/controller_test_util.h"
#include "tests/controller/fake_agent.h"

namespace rocetune::controller {
namespace {

using ::testing::HasSubstr;

// Runs the dev PKI script; false when it failed.
bool MakePki(const std::string& dir, const std::string& args) {
  const std::string cmd = absl::StrCat(ROCETUNE_SOURCE_DIR, "/deploy/pki/make-dev-pki.sh -o ", dir,
                                       " ", args, " >/dev/null");
  return std::system(cmd.c_str()) == 0;
}

using testing::FakeAgent;

class TlsRolesTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    pki_ = new std::string(testing::MakeTempDir());
    other_ = new std::string(testing::MakeTempDir());
    ASSERT_TRUE(MakePki(*pki_,
                        "-a host-01 -a host-02 -u alice:operator -u alice:approver "
                        "-u bob:approver -u carol:viewer -u olga:operator -x dave:viewer"));
    ASSERT_TRUE(MakePki(*other_, "-c other-ca -u carol:viewer -u mallory:operator"));
  }
  static void TearDownTestSuite() {
    delete pki_;
    delete other_;
  }

  // A controller on a fresh state dir with the certificates and roles of
  // `pki` (the suite's by default).
  static ControllerOptions Options(const std::string& pki = *pki_) {
    ControllerOptions opt;
    opt.listen = "127.0.0.1:0";
    opt.metrics_address = "";
    opt.state_dir = testing::MakeTempDir();
    opt.tls.cert_file = pki + "/controller.pem";
    opt.tls.key_file = pki + "/controller.key";
    opt.tls.ca_file = pki + "/ca.pem";
    opt.roles_file = pki + "/roles.textproto";
    opt.tick_interval = absl::ZeroDuration();
    opt.rollout_tick = absl::ZeroDuration();
    return opt;
  }

  void SetUp() override {
    auto c = Controller::Start(Options());
    ASSERT_TRUE(c.ok()) << c.status();
    controller_ = *std::move(c);
    target_ = absl::StrCat("127.0.0.1:", controller_->grpc_port());
  }

  // A channel presenting `name`'s certificate from `dir` ("user-alice", ...).
  std::shared_ptr<grpc::Channel> Channel(const std::string& dir, const std::string& name) {
    TlsOptions tls;
    tls.cert_file = absl::StrCat(dir, "/", name, ".pem");
    tls.key_file = absl::StrCat(dir, "/", name, ".key");
    tls.ca_file = *pki_ + "/ca.pem";
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    auto creds = MakeChannelCredentials(tls, &args);
    EXPECT_TRUE(creds.ok()) << creds.status();
    return grpc::CreateCustomChannel(target_, *creds, args);
  }
  // A channel built straight from gRPC's TLS options, bypassing the local
  // checks of daemon/tls (to present what a careless or hostile client would).
  std::shared_ptr<grpc::Channel> RawChannel(const std::string& cert, const std::string& key) {
    grpc::experimental::TlsChannelCredentialsOptions o;
    o.set_certificate_provider(std::make_shared<grpc::experimental::FileWatcherCertificateProvider>(
        key, cert, *pki_ + "/ca.pem", 1));
    o.watch_root_certs();
    if (!cert.empty()) o.watch_identity_key_cert_pairs();
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    return grpc::CreateCustomChannel(target_, grpc::experimental::TlsCredentials(o), args);
  }

  static std::unique_ptr<grpc::ClientContext> Ctx() {
    auto ctx = std::make_unique<grpc::ClientContext>();
    ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    ctx->AddMetadata(kActorMetadataKey, "admin");  // must be ignored under mTLS
    return ctx;
  }

  grpc::Status ListHosts(const std::shared_ptr<grpc::Channel>& ch) {
    auto stub = v1::AdminService::NewStub(ch);
    v1::ListHostsResponse resp;
    return stub->ListHosts(Ctx().get(), v1::ListHostsRequest(), &resp);
  }

  // The audit rows, oldest first (read as an operator).
  std::vector<v1::AuditEntry> Audit() {
    auto stub = v1::AdminService::NewStub(Channel(*pki_, "user-carol"));
    v1::ListAuditRequest req;
    req.set_limit(1000);
    v1::ListAuditResponse resp;
    grpc::Status s = stub->ListAudit(Ctx().get(), req, &resp);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return {resp.entries().begin(), resp.entries().end()};
  }
  bool Audited(const std::string& actor, const std::string& action, const std::string& subject) {
    return testing::Eventually([&] {
      for (const v1::AuditEntry& e : Audit()) {
        if (e.actor() == actor && e.action() == action && e.subject() == subject &&
            e.authenticated()) {
          return true;
        }
      }
      return false;
    });
  }

  // The tls_refused rows of `reason`, oldest first.
  std::vector<v1::AuditEntry> Refusals(const std::string& reason) {
    std::vector<v1::AuditEntry> out;
    for (const v1::AuditEntry& e : Audit()) {
      if (e.action() == "tls_refused" && e.reason() == reason) out.push_back(e);
    }
    return out;
  }
  // Waits for a tls_refused row of `reason` by `actor` and returns its detail
  // ("" when none came).
  std::string RefusalAudited(const std::string& reason, const std::string& actor) {
    std::string detail;
    testing::Eventually([&] {
      for (const v1::AuditEntry& e : Refusals(reason)) {
        if (e.actor() == actor && !e.authenticated()) {
          detail = e.detail();
          return true;
        }
      }
      return false;
    });
    return detail;
  }

  // Opens a Connect stream as `cert` sending a Hello for `host_id`; returns
  // the status the controller ends it with (OK when still open after 1 s).
  grpc::Status HelloAs(const std::shared_ptr<grpc::Channel>& ch, const std::string& host_id) {
    auto stub = v1::AgentService::NewStub(ch);
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(1));
    auto stream = stub->Connect(&ctx);
    v1::AgentMessage m;
    m.mutable_hello()->set_host_id(host_id);
    stream->Write(m);
    v1::ControllerMessage in;
    while (stream->Read(&in)) {
    }
    return stream->Finish();
  }

  static std::string* pki_;
  static std::string* other_;
  std::unique_ptr<Controller> controller_;
  std::string target_;
};

std::string* TlsRolesTest::pki_ = nullptr;
std::string* TlsRolesTest::other_ = nullptr;

TEST_F(TlsRolesTest, ViewerReadsAndIsAuditedUnderItsCertificateName) {
  grpc::Status s = ListHosts(Channel(*pki_, "user-carol"));
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_TRUE(Audited("carol", "admin_call", "ListHosts"));
  for (const v1::AuditEntry& e : Audit()) EXPECT_NE(e.actor(), "admin");
}

TEST_F(TlsRolesTest, NoCertificateIsRefusedInTheHandshakeAndAudited) {
  grpc::Status s = ListHosts(RawChannel("", ""));
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE) << s.error_message();
  EXPECT_THAT(RefusalAudited("no_certificate", "(no certificate)"),
              HasSubstr("count=1: no client certificate presented"));
}

TEST_F(TlsRolesTest, CertificateOfAnotherCaIsRefused) {
  grpc::Status s =
      ListHosts(RawChannel(*other_ + "/user-mallory.pem", *other_ + "/user-mallory.key"));
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE) << s.error_message();
  // The same name from the wrong CA is no better.
  s = ListHosts(RawChannel(*other_ + "/user-carol.pem", *other_ + "/user-carol.key"));
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE) << s.error_message();
  const std::string detail = RefusalAudited("untrusted", "CN=mallory");
  EXPECT_THAT(detail, HasSubstr("client certificate CN=mallory issued by CN=other-ca: not signed "
                                "by the configured CA"));
  EXPECT_THAT(RefusalAudited("untrusted", "CN=carol"), HasSubstr("CN=other-ca"));
  for (const v1::AuditEntry& e : Refusals("untrusted")) EXPECT_EQ(e.subject(), "CN=other-ca");
  // No identity was established, so no call of carol's was audited.
  for (const v1::AuditEntry& e : Audit()) {
    EXPECT_FALSE(e.actor() == "carol" && e.subject() == "ListHosts") << e.ShortDebugString();
  }
}

TEST_F(TlsRolesTest, ExpiredCertificateIsRefusedByServerAndLocally) {
  grpc::Status s = ListHosts(RawChannel(*pki_ + "/user-dave.pem", *pki_ + "/user-dave.key"));
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE) << s.error_message();
  const std::string detail = RefusalAudited("expired", "CN=dave");
  EXPECT_THAT(detail, HasSubstr("certificate has expired"));
  EXPECT_THAT(detail, HasSubstr("notAfter Jan  2 00:00:00 2020 GMT"));
  TlsOptions tls;
  tls.cert_file = *pki_ + "/user-dave.pem";
  tls.key_file = *pki_ + "/user-dave.key";
  tls.ca_file = *pki_ + "/ca.pem";
  absl::Status local = CheckTlsOptions(tls);
  EXPECT_EQ(local.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(local.message(), HasSubstr("expired"));
}

TEST_F(TlsRolesTest, RocetunectlExplainsARefusedHandshake) {
  const std::string cmd =
      absl::StrCat(ROCETUNE_BINARY_DIR, "/cli/rocetunectl --controller=", target_,
                   " --tls_cert=", *other_, "/user-carol.pem --tls_key=", *other_,
                   "/user-carol.key --tls_ca=", *pki_, "/ca.pem hosts 2>&1");
  FILE* p = popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string out;
  char buf[512];
  while (size_t n = fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  EXPECT_NE(pclose(p), 0) << out;
  EXPECT_THAT(out, HasSubstr("UNAVAILABLE"));
  EXPECT_THAT(out, HasSubstr("the controller probably refused the TLS handshake: check that "
                             "--tls_cert is signed by the CA the controller trusts"));
  // A controller that is not there gets no such hint.
  const std::string down = absl::StrCat(
      ROCETUNE_BINARY_DIR, "/cli/rocetunectl --controller=127.0.0.1:1 --tls_cert=", *pki_,
      "/user-carol.pem --tls_key=", *pki_, "/user-carol.key --tls_ca=", *pki_,
      "/ca.pem hosts 2>&1");
  p = popen(down.c_str(), "r");
  ASSERT_NE(p, nullptr);
  out.clear();
  while (size_t n = fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  EXPECT_NE(pclose(p), 0) << out;
  EXPECT_THAT(out, HasSubstr("UNAVAILABLE"));
  EXPECT_THAT(out, ::testing::Not(HasSubstr("TLS handshake")));
}

TEST_F(TlsRolesTest, ViewerApprovingIsDeniedAndAudited) {
  auto stub = v1::AdminService::NewStub(Channel(*pki_, "user-carol"));
  v1::ChangeActionRequest req;
  req.set_id("c-1");
  v1::Change resp;
  grpc::Status s = stub->Approve(Ctx().get(), req, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(s.error_message(), HasSubstr("carol"));
  EXPECT_THAT(s.error_message(), HasSubstr("approver"));
  EXPECT_TRUE(Audited("carol", "admin_denied", "Approve"));
}

TEST_F(TlsRolesTest, OperatorCannotApproveAndApproverCannotPush) {
  v1::ChangeActionRequest req;
  req.set_id("c-1");
  v1::Change resp;
  grpc::Status s =
      v1::AdminService::NewStub(Channel(*pki_, "user-olga"))->Approve(Ctx().get(), req, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  v1::SetDesiredStateRequest push;
  push.set_host_id("host-01");
  v1::SetDesiredStateResponse pushed;
  s = v1::AdminService::NewStub(Channel(*pki_, "user-bob"))
          ->SetDesiredState(Ctx().get(), push, &pushed);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_TRUE(Audited("olga", "admin_denied", "Approve"));
  EXPECT_TRUE(Audited("bob", "admin_denied", "SetDesiredState"));
}

TEST_F(TlsRolesTest, OperatorApprovingItsOwnChangeIsDeniedAndAudited) {
  // Hosts the policy selects, registered in process.
  for (int i = 0; i < 16; ++i) {
    v1::Hello h;
    h.set_host_id(absl::StrCat("h", i));
    (*h.mutable_labels())["rack"] = absl::StrCat("r", i % 4);
    (*h.mutable_labels())["role"] = "trainer";
    v1::NicDevice* d = h.add_devices();
    d->set_name("mlx5_0");
    d->set_cc_param_layout("ofed_sysfs");
    d->add_ports()->set_speed_mbps(100000);
    v1::DeviceParameters* p = h.mutable_current_parameters()->add_devices();
    p->set_device("mlx5_0");
    (*p->mutable_dcqcn())["rpg_time_reset"] = 300;
    ASSERT_TRUE(controller_->fleet().Register(h, std::make_shared<FakeAgent>(1000 + i)).ok());
  }
  auto alice = v1::AdminService::NewStub(Channel(*pki_, "user-alice"));
  v1::ApplyPolicyRequest apply;
  apply.set_file_name("p.textproto");
  apply.set_text(R"pb(
    name: "p"
    selector { match_labels { key: "role" value: "trainer" } }
    objective { metric: PROBE_RTT_P99 }
    knobs { parameter: "rpg_time_reset" min: 2 max: 600 step: 2 }
    tuner { kind: COORDINATE_DESCENT trial_budget: 8 min_improvement: 0.03 }
    rollout {
      canary_fraction: 0.25
      min_canary_hosts: 4
      bake_seconds: 6
      stages: [ 1.0 ]
      rack_label: "rack"
      baseline_seconds: 4
      looks: 3
    }
    guard { min_rack_pairs: 4 }  # the fleet here has 4 racks
  )pb");
  v1::ApplyPolicyResponse applied;
  grpc::Status s = alice->ApplyPolicy(Ctx().get(), apply, &applied);
  ASSERT_TRUE(s.ok()) << s.error_message();
  v1::ProposeChangeRequest propose;
  propose.set_policy_name("p");
  (*propose.mutable_knobs())["rpg_time_reset"] = 100;
  v1::Change change;
  s = alice->ProposeChange(Ctx().get(), propose, &change);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(change.proposer(), "alice");
  EXPECT_TRUE(change.proposer_authenticated());
  v1::ChangeActionRequest approve;
  approve.set_id(change.id());
  v1::Change after;
  s = alice->Approve(Ctx().get(), approve, &after);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED) << s.error_message();
  EXPECT_THAT(s.error_message(), HasSubstr("proposer"));
  EXPECT_TRUE(Audited("alice", "admin_denied", "Approve"));
  // Someone else may.
  s = v1::AdminService::NewStub(Channel(*pki_, "user-bob"))->Approve(Ctx().get(), approve, &after);
  EXPECT_TRUE(s.ok()) << s.error_message();
}

TEST_F(TlsRolesTest, AgentReportsOnlyAsItself) {
  grpc::Status s = HelloAs(Channel(*pki_, "agent-host-01"), "host-02");
  EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED) << s.error_message();
  EXPECT_THAT(s.error_message(), HasSubstr("may only report as host \"host-01\""));
  EXPECT_TRUE(Audited("host-01", "agent_denied", "host-02"));
  EXPECT_FALSE(controller_->fleet().GetHost("host-02").ok());
  // As itself it registers (the stream stays open until the deadline).
  s = HelloAs(Channel(*pki_, "agent-host-01"), "host-01");
  EXPECT_EQ(s.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << s.error_message();
  EXPECT_TRUE(controller_->fleet().GetHost("host-01").ok());
}

TEST_F(TlsRolesTest, CliCertificateUsedAsAgentIsDenied) {
  grpc::Status s = HelloAs(Channel(*pki_, "user-alice"), "alice");
  EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED) << s.error_message();
  EXPECT_THAT(s.error_message(), HasSubstr("agent"));
  EXPECT_TRUE(Audited("alice", "agent_denied", "alice"));
  EXPECT_FALSE(controller_->fleet().GetHost("alice").ok());
}

TEST_F(TlsRolesTest, AgentCertificateUsedOnTheAdminApiIsDenied) {
  grpc::Status s = ListHosts(Channel(*pki_, "agent-host-01"));
  EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_TRUE(Audited("host-01", "admin_denied", "ListHosts"));
}

TEST_F(TlsRolesTest, WatchNeedsARole) {
  auto stub = v1::AdminService::NewStub(Channel(*pki_, "agent-host-02"));
  auto ctx = Ctx();
  auto reader = stub->Watch(ctx.get(), v1::WatchRequest());
  v1::Event ev;
  while (reader->Read(&ev)) {
  }
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_TRUE(Audited("host-02", "admin_denied", "Watch"));
}

TEST_F(TlsRolesTest, TrustedCaIsReloadedWithoutRestart) {
  // A second controller whose CA file can be rewritten.
  const std::string dir = testing::MakeTempDir();
  for (const char* f : {"controller.pem", "controller.key", "ca.pem", "roles.textproto"}) {
    std::ifstream in(*pki_ + "/" + f, std::ios::binary);
    std::ofstream(dir + "/" + f, std::ios::binary) << in.rdbuf();
  }
  ControllerOptions opt = Options(dir);
  opt.tls.refresh = absl::Seconds(1);
  auto c = Controller::Start(opt);
  ASSERT_TRUE(c.ok()) << c.status();
  target_ = absl::StrCat("127.0.0.1:", (*c)->grpc_port());
  const std::string cert = *other_ + "/user-carol.pem", key = *other_ + "/user-carol.key";
  EXPECT_EQ(ListHosts(RawChannel(cert, key)).error_code(), grpc::StatusCode::UNAVAILABLE);
  {
    // Trust the other CA too (a CA rotation's first step).
    std::ifstream other(*other_ + "/ca.pem", std::ios::binary);
    std::ofstream(dir + "/ca.pem", std::ios::app | std::ios::binary) << other.rdbuf();
  }
  EXPECT_TRUE(testing::Eventually([&] { return ListHosts(RawChannel(cert, key)).ok(); }, 10));
  {
    // Its last step: the old CA is no longer trusted.
    std::ifstream other(*other_ + "/ca.pem", std::ios::binary);
    std::ofstream(dir + "/ca.pem", std::ios::trunc | std::ios::binary) << other.rdbuf();
  }
  const std::string old_cert = *pki_ + "/user-carol.pem", old_key = *pki_ + "/user-carol.key";
  EXPECT_TRUE(testing::Eventually(
      [&] {
        return ListHosts(RawChannel(old_cert, old_key)).error_code() ==
               grpc::StatusCode::UNAVAILABLE;
      },
      10));
  EXPECT_TRUE(ListHosts(RawChannel(cert, key)).ok());
}

// The detail's count ("count=N: ..." or "count=N since ...").
int64_t CountOf(const v1::AuditEntry& e) {
  int64_t n = 0;
  const std::string& d = e.detail();
  if (d.rfind("count=", 0) != 0) return -1;
  size_t end = d.find_first_not_of("0123456789", 6);
  if (!absl::SimpleAtoi(d.substr(6, end - 6), &n)) return -1;
  return n;
}

double CounterValue(prometheus::Registry& registry, const std::string& name,
                    const std::string& reason) {
  for (const prometheus::MetricFamily& f : registry.Collect()) {
    if (f.name != name) continue;
    for (const prometheus::ClientMetric& m : f.metric) {
      for (const prometheus::ClientMetric::Label& l : m.label) {
        if (l.name == "reason" && l.value == reason) return m.counter.value;
      }
    }
  }
  return -1;
}

TEST_F(TlsRolesTest, RefusalFloodGivesFewAuditRowsCarryingTheCount) {
  // A controller with a short aggregation period, so the count row comes soon.
  ControllerOptions opt = Options();
  opt.tls_refusal_audit_period = absl::Seconds(3);
  auto c = Controller::Start(opt);
  ASSERT_TRUE(c.ok()) << c.status();
  controller_ = *std::move(c);
  target_ = absl::StrCat("127.0.0.1:", controller_->grpc_port());
  const std::string cert = *other_ + "/user-mallory.pem", key = *other_ + "/user-mallory.key";
  const absl::Time flood_start = absl::Now();
  for (int i = 0; i < 50; ++i) {
    ASSERT_EQ(ListHosts(RawChannel(cert, key)).error_code(), grpc::StatusCode::UNAVAILABLE);
  }
  // On a loaded machine the 50 handshakes can outlast a period; each period
  // the flood spans may then end in a row of its own.
  const int periods_spanned =
      static_cast<int>(absl::FDivDuration(absl::Now() - flood_start, opt.tls_refusal_audit_period));
  auto refused = [&] {
    return static_cast<int64_t>(CounterValue(
        *controller_->metrics().registry(), "rocetune_controller_tls_refusals_total", "untrusted"));
  };
  // gRPC may retry a connection in the background: at least one handshake a call.
  EXPECT_GE(refused(), 50);
  // The first refusal is a row at once; the rest wait for the period's end.
  std::vector<v1::AuditEntry> rows;
  ASSERT_TRUE(testing::Eventually([&] { return !(rows = Refusals("untrusted")).empty(); }));
  if (periods_spanned == 0) {
    ASSERT_EQ(rows.size(), 1u);
  }
  EXPECT_LE(rows.size(), 1u + periods_spanned);
  EXPECT_EQ(CountOf(rows[0]), 1);
  absl::SleepFor(absl::Seconds(3.2));
  controller_->Tick();
  int64_t total = 0, counted = 0;
  ASSERT_TRUE(testing::Eventually([&] {
    rows = Refusals("untrusted");
    total = 0;
    for (const v1::AuditEntry& e : rows) total += CountOf(e);
    counted = refused();
    return total == counted;
  })) << "rows: "
      << rows.size() << " total: " << total << " refused: " << counted;
  EXPECT_GE(rows.size(), 2u);
  EXPECT_LE(rows.size(), 3u + periods_spanned);
  for (const v1::AuditEntry& e : rows) {
    EXPECT_EQ(e.actor(), "CN=mallory");
    EXPECT_EQ(e.subject(), "CN=other-ca");
    EXPECT_FALSE(e.authenticated());
  }
  EXPECT_THAT(rows.back().detail(), HasSubstr(" since "));
  // Nothing more is written while nothing is refused.
  controller_->Tick();
  EXPECT_EQ(Refusals("untrusted").size(), rows.size());
}

TEST(TlsStartTest, RolesFileRequiredWithTlsAndRefusedWithout) {
  const std::string dir = testing::MakeTempDir();
  ASSERT_TRUE(MakePki(dir, "-u carol:viewer"));
  ControllerOptions opt;
  opt.listen = "127.0.0.1:0";
  opt.metrics_address = "";
  opt.tls.cert_file = dir + "/controller.pem";
  opt.tls.key_file = dir + "/controller.key";
  opt.tls.ca_file = dir + "/ca.pem";
  auto c = Controller::Start(opt);
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(c.status().message(), HasSubstr("--roles_file"));
  opt.tls = TlsOptions();
  opt.insecure_loopback = true;
  opt.roles_file = dir + "/roles.textproto";
  c = Controller::Start(opt);
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  opt.roles_file.clear();
  opt.listen = "127.evil.example:0";
  c = Controller::Start(opt);
  EXPECT_EQ(c.status().code(), absl::StatusCode::kFailedPrecondition);
}

// Issue 28 item 9: bytes that are not TLS on the controller's port made gRPC
// log one raw, unbounded line per connection. Now each line is cut and
// escaped, and a burst is held to the limit (the rest counted).
TEST_F(TlsRolesTest, GarbageOnTheTlsPortLogsBoundedEscapedLines) {
  std::string sink;
  SetLogSinkForTest(&sink);
  RouteGrpcLogs(/*burst=*/5, /*period=*/absl::Hours(1));
  const uint64_t held_before = GrpcLogLinesSuppressed();
  auto grpc_lines = [&] {
    size_t n = 0;
    for (absl::string_view l : absl::StrSplit(sink, '\n')) n += absl::StrContains(l, "msg=grpc");
    return n;
  };
  constexpr int kConnections = 40;
  for (int i = 0; i < kConnections; ++i) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    ASSERT_GE(fd, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(controller_->grpc_port());
    ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    std::string garbage = "\x16\x03\x01\x02\x00GET / HTTP/1.1\r\n\x1b[31m";
    garbage += std::string(4000, '\x7f');
    EXPECT_GT(write(fd, garbage.data(), garbage.size()), 0);
    shutdown(fd, SHUT_WR);
    char buf[256];
    while (read(fd, buf, sizeof(buf)) > 0) {
    }
    close(fd);
  }
  // Every connection was read to its end (the server closed it): gRPC has
  // logged whatever it logs about them.
  SetLogSinkForTest(nullptr);
  const uint64_t held = GrpcLogLinesSuppressed() - held_before;
  const size_t shown = grpc_lines();
  std::printf("BENCH tls_garbage connections=%d grpc_lines_logged=%zu held_back=%llu\n",
              kConnections, shown, static_cast<unsigned long long>(held));
  EXPECT_GE(shown + held, static_cast<size_t>(kConnections / 2)) << sink.substr(0, 3000);
  EXPECT_LE(shown, 5u) << sink.substr(0, 3000);
  for (absl::string_view l : absl::StrSplit(sink, '\n')) {
    if (!absl::StrContains(l, "msg=grpc")) continue;
    EXPECT_LT(l.size(), 800u) << l;
    EXPECT_EQ(l.find('\x1b'), absl::string_view::npos) << l;
    EXPECT_EQ(l.find('\x7f'), absl::string_view::npos) << l;
  }
  // The controller still serves a good client.
  EXPECT_TRUE(ListHosts(Channel(*pki_, "user-carol")).ok());
}

}  // namespace
}  // namespace rocetune::controller
