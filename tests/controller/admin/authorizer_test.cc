#include "controller/admin/authorizer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "daemon/init.h"
#include "google/protobuf/descriptor.h"
#include "rocetune/v1/admin.pb.h"

namespace rocetune::controller {
namespace {

using ::testing::HasSubstr;

std::unique_ptr<Authorizer> Make(const std::string& text) {
  v1::RolesConfig config;
  EXPECT_TRUE(ParseTextProto(text, "roles", &config).ok());
  auto a = Authorizer::FromConfig(config, "roles");
  EXPECT_TRUE(a.ok()) << a.status();
  return a.ok() ? *std::move(a) : nullptr;
}

TEST(AuthorizerTest, RolesGrantTheirMethodsOnly) {
  auto a = Make(R"pb(
    binding { role: "viewer" identity: "carol" }
    binding { role: "operator" identity: "alice" }
    binding { role: "approver" identity: "bob" identity: "alice" }
    binding { role: "agent" identity: "node-*" }
  )pb");
  ASSERT_NE(a, nullptr);
  const Identity carol{"carol", true}, alice{"alice", true}, bob{"bob", true};
  const Identity node{"node-07", true};
  EXPECT_TRUE(a->Check(carol, "ListHosts").ok());
  EXPECT_TRUE(a->Check(carol, "Watch").ok());
  EXPECT_EQ(a->Check(carol, "Approve").code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(a->Check(carol, "SetDesiredState").code(), absl::StatusCode::kPermissionDenied);
  EXPECT_TRUE(a->Check(alice, "ProposeChange").ok());
  EXPECT_TRUE(a->Check(alice, "Approve").ok());  // the proposer rule is the rollout's
  EXPECT_TRUE(a->Check(bob, "Reject").ok());
  EXPECT_TRUE(a->Check(bob, "ApproveCampaign").ok());
  EXPECT_EQ(a->Check(bob, "StartCampaign").code(), absl::StatusCode::kPermissionDenied);
  EXPECT_TRUE(a->Check(node, "Connect").ok());
  EXPECT_EQ(a->Check(node, "ListHosts").code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(a->Check(alice, "Connect").code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(a->Check(Identity{"nodes", true}, "Connect").code(),
            absl::StatusCode::kPermissionDenied);
  // Unknown methods and unauthenticated callers are refused.
  EXPECT_EQ(a->Check(alice, "DropEverything").code(), absl::StatusCode::kPermissionDenied);
  absl::Status declared = a->Check(Identity{"alice", false}, "ListHosts");
  EXPECT_EQ(declared.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(declared.message(), HasSubstr("no verified certificate"));
  absl::Status denied = a->Check(carol, "Approve");
  EXPECT_THAT(denied.message(), HasSubstr("carol"));
  EXPECT_THAT(denied.message(), HasSubstr("approver"));
}

TEST(AuthorizerTest, BadRolesFilesAreRefused) {
  v1::RolesConfig c;
  c.add_binding()->set_role("admin");
  c.mutable_binding(0)->add_identity("root");
  EXPECT_THAT(Authorizer::FromConfig(c, "f").status().message(), HasSubstr("unknown role"));
  c.mutable_binding(0)->set_role("viewer");
  c.mutable_binding(0)->set_identity(0, "");
  EXPECT_EQ(Authorizer::FromConfig(c, "f").status().code(), absl::StatusCode::kInvalidArgument);
  c.mutable_binding(0)->clear_identity();
  EXPECT_THAT(Authorizer::FromConfig(c, "f").status().message(), HasSubstr("names no identity"));
  EXPECT_FALSE(Authorizer::Load("/nonexistent/roles.textproto").ok());
  // Issue 28 item 9: identity "*" was taken silently. Every certificate the CA
  // signed may view or connect as its own host, but not operate or approve.
  auto load = [](const std::string& text) {
    v1::RolesConfig config;
    EXPECT_TRUE(ParseTextProto(text, "roles", &config).ok()) << text;
    return Authorizer::FromConfig(config, "roles.textproto").status();
  };
  for (const std::string role : {"operator", "approver"}) {
    absl::Status s =
        load(absl::StrCat("binding { role: \"", role, "\" identity: \"alice\" identity: \"*\" }"));
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << role;
    EXPECT_THAT(s.message(), HasSubstr("roles.textproto: binding[0].identity[1] is \"*\""));
    EXPECT_TRUE(load(absl::StrCat("binding { role: \"", role,
                                  "\" identity: \"alice\" identity: \"neteng-*\" }"))
                    .ok())
        << role;
  }
  EXPECT_TRUE(load("binding { role: \"viewer\" identity: \"*\" }").ok());
}

TEST(AuthorizerTest, EveryAdminMethodHasAPermission) {
  // A new RPC must be placed in the permission table.
  const google::protobuf::ServiceDescriptor* svc =
      google::protobuf::DescriptorPool::generated_pool()->FindServiceByName(
          "rocetune.v1.AdminService");
  ASSERT_NE(svc, nullptr);
  for (int i = 0; i < svc->method_count(); ++i) {
    EXPECT_TRUE(Authorizer::PermissionOf(svc->method(i)->name()).ok()) << svc->method(i)->name();
  }
}

}  // namespace
}  // namespace rocetune::controller
