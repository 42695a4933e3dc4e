#include "controller/fleet/switch_member.h"

#include <string>

#include "gtest/gtest.h"

namespace rocetune::controller {
namespace {

// Sets a label (erase + insert: GCC 12's -Wrestrict misfires on map[k] = "literal").
void SetLabel(v1::Hello* h, const std::string& key, const std::string& value) {
  h->mutable_labels()->erase(key);
  h->mutable_labels()->insert({key, value});
}

v1::Hello SwitchHello() {
  v1::Hello h;
  h.set_host_id("sim-tor0");
  h.add_devices()->set_name("switch");
  h.add_capabilities("switch.sim");
  SetLabel(&h, "tor", "0");
  return h;
}

TEST(SwitchMemberTest, SwitchHelloGetsRoleSwitch) {
  v1::Hello h = SwitchHello();
  EXPECT_TRUE(IsSwitchHello(h));
  EXPECT_TRUE(CheckSwitchRole(h).ok());
  auto labels = MemberLabels(h);
  EXPECT_EQ(labels.at("role"), "switch");
  EXPECT_EQ(labels.at("tor"), "0");
  SetLabel(&h, "role", "switch");
  EXPECT_TRUE(CheckSwitchRole(h).ok());
}

TEST(SwitchMemberTest, ConflictingRolesAreRefused) {
  v1::Hello h = SwitchHello();
  SetLabel(&h, "role", "trainer");
  EXPECT_EQ(CheckSwitchRole(h).code(), absl::StatusCode::kInvalidArgument);
  v1::Hello host;
  host.set_host_id("h0");
  host.add_devices()->set_name("mlx5_0");
  SetLabel(&host, "role", "switch");
  EXPECT_FALSE(IsSwitchHello(host));
  EXPECT_EQ(CheckSwitchRole(host).code(), absl::StatusCode::kInvalidArgument);
  SetLabel(&host, "role", "trainer");
  EXPECT_TRUE(CheckSwitchRole(host).ok());
  EXPECT_EQ(MemberLabels(host).at("role"), "trainer");
}

TEST(SwitchMemberTest, NeedsBothTheDeviceAndTheCapability) {
  v1::Hello h = SwitchHello();
  h.clear_capabilities();
  h.add_capabilities("probe.udp");
  EXPECT_FALSE(IsSwitchHello(h));
  h = SwitchHello();
  h.mutable_devices(0)->set_name("mlx5_0");
  EXPECT_FALSE(IsSwitchHello(h));
}

}  // namespace
}  // namespace rocetune::controller
