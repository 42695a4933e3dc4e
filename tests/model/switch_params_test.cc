#include "model/switch_params.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace rocetune {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;

TEST(SwitchParamsTest, ParsesKnobNames) {
  absl::StatusOr<SwitchKnob> k = ParseSwitchKnob("ecn.AZURE_LOSSLESS.green_min_threshold");
  ASSERT_TRUE(k.ok());
  EXPECT_EQ(k->kind, SwitchKnob::Kind::kEcn);
  EXPECT_EQ(k->object, "AZURE_LOSSLESS");
  EXPECT_EQ(k->field, "green_min_threshold");
  k = ParseSwitchKnob("pfc.Ethernet8.pfc_enable");
  ASSERT_TRUE(k.ok());
  EXPECT_EQ(k->kind, SwitchKnob::Kind::kPfcEnable);
  EXPECT_EQ(k->object, "Ethernet8");
  for (const char* bad : {"ecn.P.ecn", "ecn..green_min_threshold", "ecn.P.blue_min_threshold",
                          "pfc.Ethernet0.pfcwd_sw_enable", "rpg_ai_rate", "ecn.a.b.c"}) {
    EXPECT_EQ(ParseSwitchKnob(bad).status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
}

TEST(SwitchParamsTest, PfcEnableRoundTrips) {
  EXPECT_EQ(*ParsePfcEnable("3,4"), 0x18);
  EXPECT_EQ(*ParsePfcEnable(""), 0);
  EXPECT_EQ(FormatPfcEnable(0x18), "3,4");
  EXPECT_EQ(FormatPfcEnable(0), "");
  EXPECT_FALSE(ParsePfcEnable("3,8").ok());
  EXPECT_FALSE(ParsePfcEnable("x").ok());
}

TEST(SwitchParamsTest, ChecksBounds) {
  std::map<std::string, std::string> f = {{"green_min_threshold", "100"},
                                          {"green_max_threshold", "200"},
                                          {"green_drop_probability", "5"},
                                          {"yellow_min_threshold", "oops"}};
  EXPECT_THAT(CheckWredProfile("P", f, {"green"}, 1000), IsEmpty());
  // The yellow colour is broken, but only touched colours are checked.
  EXPECT_THAT(CheckWredProfile("P", f, {"yellow"}, 1000)[0],
              HasSubstr("WRED_PROFILE|P field yellow_min_threshold=\"oops\""));
  f["green_min_threshold"] = "200";
  EXPECT_THAT(CheckWredProfile("P", f, {"green"}, 1000)[0], HasSubstr("must be below"));
  f["green_min_threshold"] = "100";
  EXPECT_THAT(CheckWredProfile("P", f, {"green"}, 150)[0], HasSubstr("exceeds the buffer"));
  f["green_drop_probability"] = "0";
  EXPECT_THAT(CheckWredProfile("P", f, {"green"}, 1000)[0], HasSubstr("(0, 100]"));
  f["green_drop_probability"] = "101";
  EXPECT_THAT(CheckWredProfile("P", f, {"green"}, 1000)[0], HasSubstr("(0, 100]"));
}

TEST(SwitchParamsTest, BufferLimitPrefersEgressPools) {
  EXPECT_EQ(BufferLimitFromPools({}), kMaxWredThresholdBytes);
  EXPECT_EQ(BufferLimitFromPools({{"in", {{"type", "ingress"}, {"size", "100"}}},
                                  {"eg", {{"type", "egress"}, {"size", "5000"}}}}),
            5000);
  EXPECT_EQ(BufferLimitFromPools({{"in", {{"size", "100"}}}}), 100);
  EXPECT_EQ(BufferLimitFromPools({{"eg", {{"type", "egress"}, {"size", "99999999999"}}}}),
            kMaxWredThresholdBytes);
}

TEST(SwitchParamsTest, StateToParametersReportsBadFields) {
  std::map<std::string, std::map<std::string, std::string>> profiles;
  std::map<std::string, std::string> pfc_enable;
  profiles["P"] = {{"green_min_threshold", "10"}, {"green_max_threshold", "x"}, {"ecn", "ecn_all"}};
  pfc_enable["Ethernet0"] = "3,4";
  pfc_enable["Ethernet4"] = "9";
  std::vector<std::string> errors;
  v1::DeviceParameters d = SwitchStateToParameters(profiles, pfc_enable, &errors);
  EXPECT_EQ(d.device(), "switch");
  EXPECT_EQ(d.dcqcn().at("ecn.P.green_min_threshold"), 10);
  EXPECT_EQ(d.dcqcn().at("pfc.Ethernet0.pfc_enable"), 0x18);
  EXPECT_EQ(d.dcqcn().size(), 2u);
  ASSERT_EQ(errors.size(), 2u);
  EXPECT_THAT(errors[0], HasSubstr("WRED_PROFILE|P field green_max_threshold"));
  EXPECT_THAT(errors[1], HasSubstr("PORT_QOS_MAP|Ethernet4"));
}

}  // namespace
}  // namespace rocetune
