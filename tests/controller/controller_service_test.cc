// Integration: the controller on a loopback port with real gRPC clients as agents.
#include <filesystem>
#include <map>
#include <memory>
#include <string>

#include "controller/controller.h"
#include "daemon/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/controller/controller_test_util.h"
#include "tests/controller/test_agent.h"

namespace rocetune::controller {
namespace {

using ::rocetune::controller::testing::AdminStub;
using ::rocetune::controller::testing::Eventually;
using ::rocetune::controller::testing::MakeTempDir;
using ::rocetune::controller::testing::TestAgent;
using ::testing::HasSubstr;

class ControllerServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = MakeTempDir();
    ASSERT_FALSE(dir_.empty());
    StartController();
  }
  void TearDown() override {
    controller_.reset();
    std::filesystem::remove_all(dir_);
  }

  void StartController() {
    ControllerOptions opt;
    opt.listen = "127.0.0.1:0";
    opt.metrics_address = "127.0.0.1:0";
    opt.state_dir = dir_ + "/state";
    opt.insecure_loopback = true;
    opt.window = absl::Seconds(10);
    opt.stale_after = absl::Seconds(30);
    opt.gone_after = absl::Seconds(120);
    opt.tick_interval = absl::ZeroDuration();
    opt.max_message_bytes = 64 * 1024;
    auto c = Controller::Start(opt, &clock_);
    ASSERT_TRUE(c.ok()) << c.status();
    controller_ = *std::move(c);
    admin_ = AdminStub(controller_->grpc_port());
  }

  absl::StatusOr<v1::HostInfo> GetHost(const std::string& id) {
    grpc::ClientContext ctx;
    v1::GetHostRequest req;
    req.set_host_id(id);
    v1::HostInfo info;
    grpc::Status s = admin_->GetHost(&ctx, req, &info);
    if (!s.ok())
      return absl::Status(static_cast<absl::StatusCode>(s.error_code()), s.error_message());
    return info;
  }

  std::vector<v1::HostInfo> ListHosts(std::map<std::string, std::string> selector = {}) {
    grpc::ClientContext ctx;
    v1::ListHostsRequest req;
    for (auto& [k, v] : selector) (*req.mutable_selector())[k] = v;
    v1::ListHostsResponse resp;
    EXPECT_TRUE(admin_->ListHosts(&ctx, req, &resp).ok());
    return {resp.hosts().begin(), resp.hosts().end()};
  }

  bool Registered(const std::string& id, v1::HostState state = v1::HOST_CONNECTED) {
    auto h = GetHost(id);
    return h.ok() && h->state() == state;
  }

  FakeClock clock_;
  std::string dir_;
  std::unique_ptr<Controller> controller_;
  std::unique_ptr<v1::AdminService::Stub> admin_;
};

TEST_F(ControllerServiceTest, HelloRegistersHostVisibleThroughAdmin) {
  TestAgent agent(controller_->grpc_port());
  ASSERT_TRUE(agent.Hello("h1", {{"rack", "r1"}, {"role", "gpu"}}, "7"));
  ASSERT_TRUE(Eventually([&] { return Registered("h1"); }));

  auto info = GetHost("h1");
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->hostname(), "h1.example");
  EXPECT_EQ(info->labels().at("rack"), "r1");
  EXPECT_EQ(info->current_version(), "7");
  EXPECT_GT(info->connected_unix_nanos(), 0);

  TestAgent other(controller_->grpc_port());
  ASSERT_TRUE(other.Hello("h2", {{"rack", "r2"}}));
  ASSERT_TRUE(Eventually([&] { return Registered("h2"); }));
  EXPECT_EQ(ListHosts().size(), 2u);
  auto r1 = ListHosts({{"rack", "r1"}});
  ASSERT_EQ(r1.size(), 1u);
  EXPECT_EQ(r1[0].host_id(), "h1");
  EXPECT_TRUE(ListHosts({{"rack", "r9"}}).empty());
}

TEST_F(ControllerServiceTest, GetHostUnknownIsNotFound) {
  auto info = GetHost("nope");
  EXPECT_EQ(info.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(info.status().message()), HasSubstr("nope"));
}

TEST_F(ControllerServiceTest, DisconnectMakesHostGone) {
  {
    TestAgent agent(controller_->grpc_port());
    ASSERT_TRUE(agent.Hello("h1"));
    ASSERT_TRUE(Eventually([&] { return Registered("h1"); }));
    EXPECT_TRUE(agent.Finish().ok());
  }
  EXPECT_TRUE(Eventually([&] { return Registered("h1", v1::HOST_GONE); }));
}

}  // namespace
}  // namespace rocetune::controller
