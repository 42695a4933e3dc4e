#include "controller/fleet/inventory_check.h"

#include <gtest/gtest.h>

#include <string>

#include "google/protobuf/text_format.h"

namespace rocetune::controller {
namespace {

// A host with one 100G mlx5 device on the OFED sysfs layout, and the
// parameters it last reported.
v1::HostInfo Host(bool with_current = true) {
  v1::HostInfo h;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(
      R"pb(
        host_id: "h1"
        devices {
          name: "mlx5_0"
          cc_param_layout: "ofed_sysfs"
          ports { port: 1 speed_mbps: 100000 }
        }
        devices { name: "rxe0" cc_param_layout: "none" }
      )pb",
      &h));
  if (with_current) {
    v1::DeviceParameters* cur = h.mutable_current_parameters()->add_devices();
    cur->set_device("mlx5_0");
    (*cur->mutable_dcqcn())["rpg_ai_rate"] = 5;
    (*cur->mutable_dcqcn())["rpg_min_rate"] = 1;
    (*cur->mutable_dcqcn())["rpg_max_rate"] = 0;
    (*cur->mutable_dcqcn())["rpg_gd"] = 7;  // outside the table's range, as some firmware has
  }
  return h;
}

v1::ParameterSet Set(const std::string& device, std::map<std::string, int64_t> dcqcn) {
  v1::ParameterSet s;
  v1::DeviceParameters* d = s.add_devices();
  d->set_device(device);
  for (const auto& [k, v] : dcqcn) (*d->mutable_dcqcn())[k] = v;
  return s;
}

std::string Refusal(const v1::HostInfo& h, const v1::ParameterSet& s) {
  absl::Status st = CheckAgainstInventory(h, s);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
  return std::string(st.message());
}

TEST(InventoryCheckTest, AcceptsASetTheHostCanTake) {
  EXPECT_TRUE(CheckAgainstInventory(Host(), Set("mlx5_0", {{"rpg_ai_rate", 20}})).ok());
  // Without a report of its parameters yet, the layout's table decides.
  EXPECT_TRUE(CheckAgainstInventory(Host(false), Set("mlx5_0", {{"rpg_ai_rate", 20}})).ok());
  // An out-of-range value the device already holds may be carried along.
  EXPECT_TRUE(
      CheckAgainstInventory(Host(), Set("mlx5_0", {{"rpg_ai_rate", 20}, {"rpg_gd", 7}})).ok());
}

TEST(InventoryCheckTest, UnknownDeviceNamesWhatTheHostHas) {
  const std::string m = Refusal(Host(), Set("mlx5_9", {{"rpg_ai_rate", 20}}));
  EXPECT_NE(m.find("has no RDMA device \"mlx5_9\""), std::string::npos) << m;
  EXPECT_NE(m.find("mlx5_0, rxe0"), std::string::npos) << m;
}

TEST(InventoryCheckTest, LayoutNoneAndParametersTheLayoutLacks) {
  std::string m = Refusal(Host(), Set("rxe0", {{"rpg_ai_rate", 20}}));
  EXPECT_NE(m.find("rxe0: no writable DCQCN parameters (layout none)"), std::string::npos) << m;
  // cnp_prio_mode exists only in the debugfs layout.
  m = Refusal(Host(false), Set("mlx5_0", {{"cnp_prio_mode", 1}}));
  EXPECT_NE(m.find("mlx5_0: parameter cnp_prio_mode is not available in layout ofed_sysfs"),
            std::string::npos)
      << m;
  // With a report, what the device reported decides.
  m = Refusal(Host(), Set("mlx5_0", {{"dce_tcp_g", 100}}));
  EXPECT_NE(m.find("mlx5_0: parameter dce_tcp_g is not available"), std::string::npos) << m;
  v1::ParameterSet masks = Set("mlx5_0", {});
  masks.mutable_devices(0)->set_rp_enable_mask(8);
  m = Refusal(Host(), masks);
  EXPECT_NE(m.find("mlx5_0: rp_enable_mask"), std::string::npos) << m;
}

TEST(InventoryCheckTest, RangesAndTheLinkAreCheckedNamingDeviceAndParameter) {
  std::string m = Refusal(Host(), Set("mlx5_0", {{"rpg_ai_rate", 999999999}}));
  EXPECT_NE(m.find("mlx5_0: rpg_ai_rate 999999999 Mb/s exceeds the port speed 100000 Mb/s"),
            std::string::npos)
      << m;
  m = Refusal(Host(), Set("mlx5_0", {{"rpg_ai_rate", 3000000000}}));
  EXPECT_NE(m.find("mlx5_0: rpg_ai_rate=3000000000 outside"), std::string::npos) << m;
  m = Refusal(Host(), Set("mlx5_0", {{"rpg_min_rate", 200000000}}));
  EXPECT_NE(m.find("mlx5_0: rpg_min_rate 200000000 Mb/s exceeds the port speed 100000 Mb/s"),
            std::string::npos)
      << m;
  m = Refusal(Host(), Set("mlx5_0", {{"rpg_min_rate", 5000}, {"rpg_max_rate", 1000}}));
  EXPECT_NE(m.find("mlx5_0: rpg_min_rate 5000 Mb/s above rpg_max_rate 1000 Mb/s"),
            std::string::npos)
      << m;
  // rpg_max_rate 0 means no limit.
  EXPECT_TRUE(CheckAgainstInventory(Host(), Set("mlx5_0", {{"rpg_min_rate", 5000}})).ok());
  m = Refusal(Host(), Set("mlx5_0", {{"rpg_gd", 8}}));
  EXPECT_NE(m.find("mlx5_0: rpg_gd=8 outside"), std::string::npos) << m;
}

TEST(InventoryCheckTest, EveryViolationIsListed) {
  v1::ParameterSet s = Set("mlx5_0", {{"rpg_ai_rate", 3000000000}, {"cnp_prio_mode", 1}});
  *s.add_devices() = Set("nope", {{"rpg_ai_rate", 1}}).devices(0);
  const std::string m = Refusal(Host(), s);
  // The range, the port speed, the layout, the unknown device.
  EXPECT_NE(m.find("(4 problems)"), std::string::npos) << m;
}

// A switch member: one device "switch" with a 1 MB buffer, one WRED profile
// and one port, as the switch agents report them.
v1::HostInfo Switch() {
  v1::HostInfo h;
  h.set_host_id("tor0");
  v1::NicDevice* d = h.add_devices();
  d->set_name("switch");
  d->set_switch_buffer_bytes(1000000);
  v1::DeviceParameters* cur = h.mutable_current_parameters()->add_devices();
  cur->set_device("switch");
  (*cur->mutable_dcqcn())["ecn.LOSSLESS.green_min_threshold"] = 100000;
  (*cur->mutable_dcqcn())["ecn.LOSSLESS.green_max_threshold"] = 400000;
  (*cur->mutable_dcqcn())["ecn.LOSSLESS.green_drop_probability"] = 5;
  (*cur->mutable_dcqcn())["pfc.Ethernet0.pfc_enable"] = 24;
  return h;
}

TEST(InventoryCheckTest, SwitchKnobsAreCheckedAgainstTheSwitch) {
  const v1::HostInfo sw = Switch();
  EXPECT_TRUE(CheckAgainstInventory(sw, Set("switch", {{"ecn.LOSSLESS.green_min_threshold", 50000},
                                                       {"ecn.LOSSLESS.green_max_threshold", 200000},
                                                       {"pfc.Ethernet0.pfc_enable", 8}}))
                  .ok());
  EXPECT_NE(Refusal(sw, Set("switch", {{"ecn.LOSSLESS.green_max_threshold", 2000000}}))
                .find("green_max_threshold=2000000 bytes exceeds the buffer (1000000 bytes)"),
            std::string::npos);
  // Kmin against the Kmax the switch keeps, and Kmax against the Kmin it keeps.
  EXPECT_NE(Refusal(sw, Set("switch", {{"ecn.LOSSLESS.green_min_threshold", 500000}}))
                .find("is not below ecn.LOSSLESS.green_max_threshold=400000"),
            std::string::npos);
  EXPECT_NE(Refusal(sw, Set("switch", {{"ecn.LOSSLESS.green_max_threshold", 90000}}))
                .find("is not above ecn.LOSSLESS.green_min_threshold=100000"),
            std::string::npos);
  EXPECT_NE(Refusal(sw, Set("switch", {{"ecn.OTHER.green_max_threshold", 90000}}))
                .find("the switch has no WRED profile field by that name"),
            std::string::npos);
  EXPECT_NE(Refusal(sw, Set("switch", {{"ecn.LOSSLESS.green_drop_probability", 0}}))
                .find("want a percentage in (0, 100]"),
            std::string::npos);
  EXPECT_NE(Refusal(sw, Set("switch", {{"pfc.Ethernet0.pfc_enable", 300}}))
                .find("want a priority mask in 0..255"),
            std::string::npos);
  EXPECT_NE(Refusal(sw, Set("switch", {{"rpg_ai_rate", 5}})).find("switch: "), std::string::npos);
}

}  // namespace
}  // namespace rocetune::controller
