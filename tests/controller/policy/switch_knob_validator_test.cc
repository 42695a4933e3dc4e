// The switch knob rules: each case breaks kSwitchPolicy in one place and checks
// that exactly that error comes back, with its rule id, where it points.
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "controller/policy/knob_spec.h"
#include "controller/policy/policy_loader.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/controller/policy/policy_test_util.h"

namespace rocetune::controller {
namespace {

using ::rocetune::controller::testing::kValidPolicy;
using ::rocetune::controller::testing::Pos;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

constexpr char kSwitchPolicy[] = R"policy(# ECN marking on the ToRs
name: "tor-ecn"
selector { match_labels { key: "role" value: "switch" } }
objective { metric: PROBE_RTT_P99 }
knobs { parameter: "ecn.AZURE_LOSSLESS.green_min_threshold" min: 10000 max: 400000 step: 10000 }
knobs { parameter: "ecn.AZURE_LOSSLESS.green_max_threshold" min: 500000 max: 1600000 step: 100000 }
knobs { parameter: "ecn.AZURE_LOSSLESS.green_drop_probability" min: 5 max: 100 step: 5 }
tuner { kind: COORDINATE_DESCENT }
rollout { canary_fraction: 0.25 bake_seconds: 300 stages: [0.5, 1.0] }
guard { max_p99_regression: 0.05 }
)policy";

struct Case {
  std::string name;
  std::string from, to;  // replaced in kSwitchPolicy
  std::string rule;
  std::string at;
  std::optional<int64_t> buffer = std::nullopt;
  std::string message_part = "";
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

std::string Dump(const std::vector<PolicyError>& errors) {
  std::vector<std::string> lines;
  for (const auto& e : errors) lines.push_back(e.ToString());
  return absl::StrJoin(lines, "\n");
}

class SwitchRuleTest : public ::testing::TestWithParam<Case> {};

TEST_P(SwitchRuleTest, ReportsRuleAtFieldPosition) {
  const Case& c = GetParam();
  ASSERT_NE(std::string(kSwitchPolicy).find(c.from), std::string::npos) << c.from;
  const std::string text = absl::StrReplaceAll(kSwitchPolicy, {{c.from, c.to}});
  auto file = PolicyFile::Parse(text, "s.textproto");
  ASSERT_TRUE(file.ok()) << file.status();
  PolicyContext context;
  context.min_switch_buffer_bytes = c.buffer;
  const std::vector<PolicyError> errors = file->Validate(context);
  ASSERT_EQ(errors.size(), 1u) << Dump(errors) << "\n" << text;
  EXPECT_EQ(errors[0].rule, c.rule) << errors[0].ToString();
  const auto [line, column] = Pos(text, c.at);
  ASSERT_NE(line, 0) << "snippet \"" << c.at << "\" not in the text";
  EXPECT_EQ(errors[0].line, line) << errors[0].ToString();
  EXPECT_EQ(errors[0].column, column) << errors[0].ToString();
  EXPECT_THAT(errors[0].message, HasSubstr(c.message_part));
}

const Case kCases[] = {
    {"KmaxAboveBuffer", "max: 1600000", "max: 1600000", "switch_threshold_above_buffer",
     "max: 1600000", 1000000, "smallest selected switch buffer (1000000 bytes)"},
    {"KmaxAboveHardRange", "max: 1600000", "max: 2147483648", "bounds_outside_range",
     "max: 2147483648", std::nullopt, "[0, 2147483647] bytes"},
    {"KminNotBelowKmax", "min: 10000 max: 400000", "min: 10000 max: 500000",
     "ecn_kmin_not_below_kmax", "max: 500000", std::nullopt,
     "ecn.AZURE_LOSSLESS.green_max_threshold).min 500000"},
    {"PmaxZero", "min: 5 max: 100", "min: 0 max: 100", "bounds_outside_range", "min: 0 max: 100",
     std::nullopt, "[1, 100] percent"},
    {"PmaxAbove100", "min: 5 max: 100", "min: 5 max: 101", "bounds_outside_range", "max: 101",
     std::nullopt, "[1, 100] percent"},
    {"UnknownColour", "green_drop_probability", "blue_drop_probability", "unknown_knob",
     "parameter: \"ecn.AZURE_LOSSLESS.blue", std::nullopt, "switch knobs ecn.<profile>"},
    {"NoSwitchSelector", "selector { match_labels { key: \"role\" value: \"switch\" } }\n", "",
     "switch_knobs_without_switch_selector", "parameter: \"ecn.AZURE_LOSSLESS.green_min",
     std::nullopt, "role: switch"},
    // A joint policy (switch and host knobs) selects hosts, not switches.
    {"JointWithSwitchSelector", "tuner {",
     "knobs { parameter: \"rpg_ai_rate\" min: 1 max: 100 step: 5 }\ntuner {",
     "host_knobs_with_switch_selector", "parameter: \"rpg_ai_rate\"", std::nullopt,
     "is a host knob but the selector picks switches"},
    {"PfcEnableAbove255", "tuner {",
     "knobs { parameter: \"pfc.Ethernet0.pfc_enable\" min: 8 max: 256 step: 8 }\ntuner {",
     "bounds_outside_range", "max: 256", std::nullopt, "[0, 255] bitmask"},
};

INSTANTIATE_TEST_SUITE_P(SwitchRules, SwitchRuleTest, ::testing::ValuesIn(kCases),
                         [](const auto& info) { return info.param.name; });

TEST(SwitchKnobValidateTest, ValidSwitchPolicyAtTheEdges) {
  auto file = PolicyFile::Parse(kSwitchPolicy, "s");
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_THAT(file->Validate(), IsEmpty()) << Dump(file->Validate());
  PolicyContext context;
  context.min_switch_buffer_bytes = 1600000;  // Kmax's max is exactly the buffer
  EXPECT_THAT(file->Validate(context), IsEmpty()) << Dump(file->Validate(context));
  // A yellow pair is checked apart from the green one; Kmin just below Kmax is fine.
  auto yellow = PolicyFile::Parse(
      absl::StrCat(kSwitchPolicy,
                   "knobs { parameter: \"ecn.AZURE_LOSSLESS.yellow_min_threshold\" min: 0 max: "
                   "499999 step: 1000 }\n",
                   "knobs { parameter: \"ecn.AZURE_LOSSLESS.yellow_max_threshold\" min: 500000 "
                   "max: 600000 step: 1000 }\n"),
      "s");
  ASSERT_TRUE(yellow.ok()) << yellow.status();
  EXPECT_THAT(yellow->Validate(context), IsEmpty()) << Dump(yellow->Validate(context));
}

TEST(SwitchKnobValidateTest, JointPolicySelectingHostsIsValid) {
  // Switch and host knobs in one policy: the selector picks the hosts; the
  // switches of their racks join each change (docs/policies.md).
  const std::string text = absl::StrReplaceAll(
      kSwitchPolicy, {{"value: \"switch\"", "value: \"trainer\""},
                      {"tuner {",
                       "knobs { parameter: \"rpg_ai_rate\" min: 1 max: 100 step: 5 }\n"
                       "tuner {"}});
  auto file = PolicyFile::Parse(text, "j");
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_THAT(file->Validate(), IsEmpty()) << Dump(file->Validate());
}

TEST(SwitchKnobValidateTest, HostKnobsWithSwitchSelectorAreRefused) {
  const std::string text =
      absl::StrCat(kValidPolicy, "selector { match_labels { key: \"role\" value: \"switch\" } }\n");
  auto file = PolicyFile::Parse(text, "h");
  ASSERT_TRUE(file.ok()) << file.status();
  const std::vector<PolicyError> errors = file->Validate();
  ASSERT_EQ(errors.size(), 1u) << Dump(errors);
  EXPECT_EQ(errors[0].rule, "host_knobs_with_switch_selector");
  EXPECT_EQ(std::make_pair(errors[0].line, errors[0].column),
            Pos(text, "parameter: \"rpg_ai_rate\""));
}

TEST(SwitchKnobValidateTest, KnobSpecsOfSwitchKnobs) {
  auto kmax = FindKnobSpec("ecn.p1.red_max_threshold");
  ASSERT_TRUE(kmax.has_value());
  EXPECT_TRUE(kmax->is_switch);
  EXPECT_TRUE(kmax->is_threshold());
  EXPECT_EQ(kmax->max, 2147483647);
  auto pmax = FindKnobSpec("ecn.p1.green_drop_probability");
  ASSERT_TRUE(pmax.has_value());
  EXPECT_FALSE(pmax->is_threshold());
  EXPECT_EQ(pmax->min, 1);
  EXPECT_EQ(pmax->max, 100);
  EXPECT_FALSE(FindKnobSpec("ecn.p1.green_min").has_value());
  EXPECT_FALSE(FindKnobSpec("pfc.delay")->is_switch);
}

}  // namespace
}  // namespace rocetune::controller
