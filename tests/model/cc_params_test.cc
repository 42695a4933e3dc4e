#include "model/cc_params.h"

#include <set>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "rocetune/v1/agent.pb.h"

namespace rocetune {
namespace {

using ::testing::HasSubstr;

v1::DeviceParameters Defaults(const std::string& device) {
  v1::DeviceParameters p;
  p.set_device(device);
  for (const CcParamSpec& spec : CcParamTable()) {
    if (spec.mlx5_default.has_value()) (*p.mutable_dcqcn())[spec.name] = *spec.mlx5_default;
  }
  p.set_rp_enable_mask(255);
  p.set_np_enable_mask(255);
  return p;
}

TEST(CcParamsTest, TableIsConsistent) {
  std::set<std::string> names;
  for (const CcParamSpec& spec : CcParamTable()) {
    EXPECT_TRUE(names.insert(spec.name).second) << spec.name;
    EXPECT_LE(spec.min, spec.max) << spec.name;
    if (spec.mlx5_default.has_value()) {
      EXPECT_GE(*spec.mlx5_default, spec.min) << spec.name;
      EXPECT_LE(*spec.mlx5_default, spec.max) << spec.name;
    }
    EXPECT_TRUE(spec.ofed_file != nullptr || spec.debugfs_file != nullptr) << spec.name;
    EXPECT_EQ(FindCcParam(spec.name), &spec);
  }
  for (const char* name :
       {"rpg_ai_rate", "rpg_hai_rate", "rpg_time_reset", "rpg_byte_reset", "rpg_threshold",
        "rpg_gd", "rpg_min_dec_fac", "rpg_min_rate", "rpg_max_rate", "rate_to_set_on_first_cnp",
        "dce_tcp_g", "dce_tcp_rtt", "rate_reduce_monitor_period", "initial_alpha_value",
        "clamp_tgt_rate", "clamp_tgt_rate_after_time_inc", "min_time_between_cnps", "cnp_dscp",
        "cnp_802p_prio"}) {
    const CcParamSpec* spec = FindCcParam(name);
    ASSERT_NE(spec, nullptr) << name;
    EXPECT_NE(spec->ofed_file, nullptr) << name;
    EXPECT_NE(spec->debugfs_file, nullptr) << name;
  }
  EXPECT_EQ(FindCcParam("no_such_param"), nullptr);
  EXPECT_STREQ(FindCcParam("cnp_802p_prio")->debugfs_file, "np_cnp_prio");
  EXPECT_STREQ(FindCcParam("clamp_tgt_rate_after_time_inc")->debugfs_file, "rp_clamp_tgt_rate_ati");
  EXPECT_EQ(FindCcParam("cnp_dscp")->max, 63);
}

TEST(CcParamsTest, SideEffectsNameKnownParameters) {
  ASSERT_FALSE(CcWriteSideEffects().empty());
  for (const CcWriteSideEffect& se : CcWriteSideEffects()) {
    ASSERT_NE(FindCcParam(se.written), nullptr) << se.written;
    const CcParamSpec* affected = FindCcParam(se.affected);
    ASSERT_NE(affected, nullptr) << se.affected;
    EXPECT_GE(se.value, affected->min);
    EXPECT_LE(se.value, affected->max);
  }
}

TEST(CcParamsTest, DefaultsAreValid) { EXPECT_TRUE(ValidateParameters(Defaults("mlx5_0")).ok()); }

TEST(CcParamsTest, ListsEveryViolation) {
  v1::DeviceParameters p = Defaults("mlx5_0");
  (*p.mutable_dcqcn())["cnp_dscp"] = 64;
  (*p.mutable_dcqcn())["dce_tcp_g"] = -1;
  (*p.mutable_dcqcn())["rpg_ai_rate"] = int64_t{1} << 32;
  (*p.mutable_dcqcn())["bogus_knob"] = 3;
  p.set_np_enable_mask(256);
  absl::Status st = ValidateParameters(p);
  ASSERT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(st.message(), HasSubstr("mlx5_0: cnp_dscp=64 outside [0, 63]"));
  EXPECT_THAT(st.message(), HasSubstr("mlx5_0: dce_tcp_g=-1 outside [0, 1023]"));
  EXPECT_THAT(st.message(), HasSubstr("rpg_ai_rate=4294967296 outside [1, 2147483647]"));
  EXPECT_THAT(st.message(), HasSubstr("unknown DCQCN parameter \"bogus_knob\""));
  EXPECT_THAT(st.message(), HasSubstr("np_enable_mask=256 outside [0, 255]"));
  EXPECT_THAT(st.message(), HasSubstr("(5)"));
}

TEST(CcParamsTest, DcqcnRangeViolationsCanBeSetAside) {
  v1::ParameterSet set;
  *set.add_devices() = Defaults("mlx5_0");
  (*set.mutable_devices(0)->mutable_dcqcn())["rpg_gd"] = 7;
  std::vector<CcRangeViolation> range;
  EXPECT_TRUE(ValidateParameterSetExceptDcqcnRanges(set, &range).ok());
  ASSERT_EQ(range.size(), 1u);
  EXPECT_EQ(range[0].device, "mlx5_0");
  EXPECT_EQ(range[0].name, "rpg_gd");
  EXPECT_EQ(range[0].value, 7);
  EXPECT_EQ(range[0].text, "mlx5_0: rpg_gd=7 outside [10, 11]");
  EXPECT_FALSE(ValidateParameterSetExceptDcqcnRanges(set, nullptr).ok());
  // Masks and PFC limits are field widths: never set aside.
  set.mutable_devices(0)->set_rp_enable_mask(256);
  range.clear();
  EXPECT_EQ(ValidateParameterSetExceptDcqcnRanges(set, &range).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(CcParamsTest, PfcRanges) {
  v1::DeviceParameters p;
  p.set_device("mlx5_1");
  p.mutable_pfc()->set_enable_mask(0x08);
  for (uint32_t ok : {0u, 80u, 1000u, 8000u, 65535u}) {
    p.mutable_pfc()->set_prevention_timeout_ms(ok);
    EXPECT_TRUE(ValidateParameters(p).ok()) << ok;
  }
  p.mutable_pfc()->set_prevention_timeout_ms(79);
  p.mutable_pfc()->set_delay(65536);
  p.mutable_pfc()->set_enable_mask(300);
  absl::Status st = ValidateParameters(p);
  EXPECT_THAT(st.message(), HasSubstr("pfc.prevention_timeout_ms=79"));
  EXPECT_THAT(st.message(), HasSubstr("pfc.delay=65536 outside [0, 65535]"));
  EXPECT_THAT(st.message(), HasSubstr("pfc.enable_mask=300"));
}

TEST(CcParamsTest, SetChecksNamesAndAllDevices) {
  v1::ParameterSet set;
  *set.add_devices() = Defaults("mlx5_0");
  *set.add_devices() = Defaults("mlx5_0");
  set.add_devices();
  v1::DeviceParameters* bad = set.add_devices();
  *bad = Defaults("mlx5_1");
  (*bad->mutable_dcqcn())["cnp_802p_prio"] = 8;
  absl::Status st = ValidateParameterSet(set);
  ASSERT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(st.message(), HasSubstr("devices[1]: device mlx5_0 listed twice"));
  EXPECT_THAT(st.message(), HasSubstr("devices[2]: empty device name"));
  EXPECT_THAT(st.message(), HasSubstr("mlx5_1: cnp_802p_prio=8 outside [0, 7]"));
  set.mutable_devices()->DeleteSubrange(1, 3);
  EXPECT_TRUE(ValidateParameterSet(set).ok());
}

// `bytes` as length-delimited field `number` (numbers below 16).
std::string Field(int number, const std::string& bytes) {
  std::string out(1, static_cast<char>(number << 3 | 2));
  size_t n = bytes.size();
  do {
    out.push_back(static_cast<char>((n & 0x7f) | (n > 0x7f ? 0x80 : 0)));
    n >>= 7;
  } while (n != 0);
  return out + bytes;
}

TEST(RepeatedParametersTest, ANameGivenTwiceIsFoundOnTheWireAndNamed) {
  // Two DeviceParameters encodings back to back are one device on the wire
  // with two map entries for rpg_ai_rate; parsing keeps only the 11.
  v1::DeviceParameters first;
  first.set_device("mlx5_0");
  (*first.mutable_dcqcn())["rpg_ai_rate"] = 10;
  (*first.mutable_dcqcn())["rpg_hai_rate"] = 50;
  v1::DeviceParameters second;
  (*second.mutable_dcqcn())["rpg_ai_rate"] = 11;
  const std::string set_wire = Field(v1::ParameterSet::kDevicesFieldNumber,
                                     first.SerializeAsString() + second.SerializeAsString());
  v1::ParameterSet parsed;
  ASSERT_TRUE(parsed.ParseFromString(set_wire));
  ASSERT_EQ(parsed.devices(0).dcqcn().at("rpg_ai_rate"), 11);
  EXPECT_THAT(RepeatedParameters(set_wire),
              ::testing::ElementsAre("mlx5_0: parameter rpg_ai_rate given twice (10, then 11)"));

  // The same set inside a ControllerMessage's desired state.
  const std::string msg_wire = Field(v1::ControllerMessage::kDesiredStateFieldNumber,
                                     Field(v1::DesiredState::kParametersFieldNumber, set_wire));
  EXPECT_THAT(RepeatedParametersInControllerMessage(msg_wire),
              ::testing::ElementsAre("mlx5_0: parameter rpg_ai_rate given twice (10, then 11)"));
}

TEST(RepeatedParametersTest, ASetWithoutRepetitionHasNone) {
  v1::ParameterSet set;
  v1::DeviceParameters* d = set.add_devices();
  d->set_device("mlx5_0");
  (*d->mutable_dcqcn())["rpg_ai_rate"] = 10;
  (*d->mutable_dcqcn())["rpg_hai_rate"] = 50;
  v1::DeviceParameters* e = set.add_devices();
  e->set_device("mlx5_1");
  (*e->mutable_dcqcn())["rpg_ai_rate"] = 10;  // another device may name it
  EXPECT_TRUE(RepeatedParameters(set.SerializeAsString()).empty());
  v1::ControllerMessage msg;
  *msg.mutable_desired_state()->mutable_parameters() = set;
  EXPECT_TRUE(RepeatedParametersInControllerMessage(msg.SerializeAsString()).empty());
  msg.mutable_probe_plan()->set_version("p1");
  EXPECT_TRUE(RepeatedParametersInControllerMessage(msg.SerializeAsString()).empty());
  EXPECT_TRUE(RepeatedParameters("\xff\xff").empty());
}

}  // namespace
}  // namespace rocetune
