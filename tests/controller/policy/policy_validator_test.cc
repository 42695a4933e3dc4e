// One test per validation rule: each breaks kValidPolicy in one place and
// checks that exactly that error comes back, with its rule id, at the line and
// column of the field it names (found in the text, not counted by hand).

#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
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

struct Case {
  std::string name;
  std::string from;  // replaced in kValidPolicy ("" = nothing replaced)
  std::string to;
  std::string append;  // added at the end
  std::string rule;
  std::string at;      // the error points at this snippet...
  int occurrence = 1;  // ...at its n-th occurrence in the text
  std::optional<uint64_t> link_mbps = std::nullopt;
  std::string message_part = "";  // the message contains this
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

std::string Edit(const Case& c) {
  std::string text = kValidPolicy;
  if (!c.from.empty()) {
    EXPECT_NE(text.find(c.from), std::string::npos) << c.name << ": no \"" << c.from << "\"";
    text = absl::StrReplaceAll(text, {{c.from, c.to}});
  }
  return text + c.append;
}

std::string Dump(const std::vector<PolicyError>& errors) {
  std::vector<std::string> lines;
  for (const auto& e : errors) lines.push_back(e.ToString());
  return absl::StrJoin(lines, "\n");
}

class RuleTest : public ::testing::TestWithParam<Case> {};

TEST_P(RuleTest, ReportsRuleAtFieldPosition) {
  const Case& c = GetParam();
  const std::string text = Edit(c);
  auto file = PolicyFile::Parse(text, "p.textproto");
  ASSERT_TRUE(file.ok()) << file.status() << "\n" << text;
  PolicyContext context;
  context.min_link_speed_mbps = c.link_mbps;
  const std::vector<PolicyError> errors = file->Validate(context);
  ASSERT_EQ(errors.size(), 1u) << Dump(errors) << "\n" << text;
  const PolicyError& e = errors[0];
  EXPECT_EQ(e.rule, c.rule) << e.ToString();
  const auto [line, column] = c.at.empty() ? std::make_pair(1, 1) : Pos(text, c.at, c.occurrence);
  ASSERT_NE(line, 0) << "snippet \"" << c.at << "\" not in the text";
  EXPECT_EQ(e.line, line) << e.ToString() << "\n" << text;
  EXPECT_EQ(e.column, column) << e.ToString() << "\n" << text;
  EXPECT_EQ(e.file, "p.textproto");
  EXPECT_THAT(e.message, HasSubstr(c.message_part));
}

constexpr char kKnob0[] = R"(knobs { parameter: "rpg_ai_rate" min: 1 max: 100 step: 5 })";

std::string Knob0(const std::string& body) {
  return absl::StrCat("knobs { parameter: \"rpg_ai_rate\" ", body, " }");
}

const Case kCases[] = {
    // --- name
    {"NameMissing", "name: \"base\"\n", "", "", "name_missing", ""},
    {"NameInvalidUpperCase", "name: \"base\"", "name: \"Base\"", "", "name_invalid", "name:"},
    {"NameInvalidLeadingDash", "name: \"base\"", "name: \"-base\"", "", "name_invalid", "name:"},
    {"NameInvalidSpace", "name: \"base\"", "name: \"a b\"", "", "name_invalid", "name:"},
    {"NameTooLong", "name: \"base\"", absl::StrCat("name: \"", std::string(64, 'a'), "\""), "",
     "name_invalid", "name:"},
    // --- objective
    {"ObjectiveMissing", "objective { metric: PROBE_RTT_P99 }\n", "", "",
     "objective_metric_unspecified", ""},
    {"ObjectiveMetricUnspecified", "objective { metric: PROBE_RTT_P99 }",
     "objective {\n  peer_class: \"inter_tor\"\n}", "", "objective_metric_unspecified",
     "objective {"},
    {"ObjectiveMetricUnknownNumber", "metric: PROBE_RTT_P99", "metric: 9", "",
     "objective_metric_unknown", "metric: 9"},
    {"ObjectiveP999Unsupported", "metric: PROBE_RTT_P99", "metric: PROBE_RTT_P999", "",
     "objective_metric_unsupported", "metric: PROBE_RTT_P999", 1, std::nullopt,
     "use PROBE_RTT_P99"},
    {"StepTimeWithoutOp", "metric: PROBE_RTT_P99", "metric: STEP_TIME_P99", "",
     "objective_op_missing", "objective {", 1, std::nullopt, "objective.op must name"},
    {"StepTimeConstraintWithoutOp", "", "", "constraints { metric: \"step_time_p99\" }\n",
     "objective_op_missing", "objective {", 1, std::nullopt, "a step_time_p99 constraint"},
    {"StepTimeBadOp", "metric: PROBE_RTT_P99", "metric: STEP_TIME_P99 op: \"AllReduce\"", "",
     "objective_op_invalid", "op: \"AllReduce\"", 1, std::nullopt, "objective.op: only a-z"},
    {"StepTimeBadJob", "metric: PROBE_RTT_P99", "metric: STEP_TIME_P99 op: \"step\" job: \"run 3\"",
     "", "objective_job_invalid", "job: \"run 3\"", 1, std::nullopt, "objective.job: only letters"},
    {"JobSeriesNobodyReads", "metric: PROBE_RTT_P99", "metric: PROBE_RTT_P99 op: \"step\"", "",
     "objective_job_unused", "op: \"step\"", 1, std::nullopt, "nothing reads it"},
    {"StepTimeWithPeerClass", "metric: PROBE_RTT_P99",
     "metric: STEP_TIME_P99 op: \"step\" peer_class: \"inter_tor\"", "",
     "objective_peer_class_unused", "peer_class:", 1, std::nullopt, "probe_rtt_p99 constraint"},
    // A class no probe plan gives (incast_training.textproto once shipped "congested").
    {"ObjectivePeerClassUnknown", "metric: PROBE_RTT_P99",
     "metric: PROBE_RTT_P99 peer_class: \"congested\"", "", "objective_peer_class_unknown",
     "peer_class:", 1, std::nullopt, "would read no probes"},
    {"P99ConstraintWithABound", "", "", "constraints { metric: \"probe_rtt_p99\" max: 0.001 }\n",
     "constraint_bound_unsupported", "max: 0.001", 1, std::nullopt, "Use max_ratio"},
    // --- constraints
    {"ConstraintMetricUnknown", "", "", "constraints { metric: \"latency_us\" max: 5 }\n",
     "constraint_metric_unknown", "metric: \"latency_us\""},
    {"ConstraintMetricEmpty", "", "", "constraints {\n  max: 5\n}\n", "constraint_metric_unknown",
     "constraints {"},
    {"ConstraintMinAboveMax", "", "",
     "constraints { metric: \"throughput_gbps\" min: 100 max: 50 }\n", "constraint_min_gt_max",
     "min: 100 max: 50"},
    {"ConstraintMaxRatioNegative", "", "",
     "constraints { metric: \"cnp_per_second\" max_ratio: -1 }\n", "constraint_max_ratio_negative",
     "max_ratio"},
    // --- knobs
    {"UnknownKnob", "parameter: \"rpg_time_reset\"", "parameter: \"rpg_time_rest\"", "",
     "unknown_knob", "parameter: \"rpg_time_rest\"", 1, std::nullopt, "rpg_time_rest"},
    {"KnobWithoutParameter", "", "", "knobs {\n  min: 1 max: 2 step: 1\n}\n", "unknown_knob",
     "knobs {\n  min", 1, std::nullopt, "names no parameter"},
    {"DuplicateKnob", "", "", "knobs { parameter: \"rpg_ai_rate\" min: 2 max: 4 step: 1 }\n",
     "duplicate_knob", "parameter: \"rpg_ai_rate\" min: 2", 1, std::nullopt,
     "(knobs[0] at line 4:1)"},
    {"MinBelowHardRange", kKnob0, Knob0("min: 0 max: 100 step: 5"), "", "bounds_outside_range",
     "min: 0", 1, std::nullopt, "[1, 2147483647] Mbps"},
    {"MaxAboveHardRange", kKnob0, Knob0("min: 1 max: 3000000000 step: 5"), "",
     "bounds_outside_range", "max: 3000000000"},
    {"PercentKnobAboveHardRange", "", "",
     "knobs { parameter: \"rpg_min_dec_fac\" min: 10 max: 101 step: 5 }\n", "bounds_outside_range",
     "max: 101", 1, std::nullopt, "[0, 100] percent"},
    {"PfcPreventionBelowDriverMinimum", "", "",
     "knobs { parameter: \"pfc.prevention_timeout_ms\" min: 0 max: 500 step: 10 }\n",
     "bounds_outside_range", "min: 0 max: 500", 1, std::nullopt, "[80, 8000] ms"},
    {"MaskAbove255", "", "", "knobs { parameter: \"np_enable_mask\" min: 0 max: 256 step: 1 }\n",
     "bounds_outside_range", "max: 256"},
    {"KnobMinAboveMax", "min: 50 max: 1000", "min: 1000 max: 50", "", "knob_min_gt_max",
     "min: 1000"},
    {"StepZero", kKnob0, Knob0("min: 1 max: 100 step: 0"), "", "step_not_positive", "step: 0"},
    {"StepMissing", kKnob0, Knob0("min: 1 max: 100"), "", "step_not_positive", "knobs {"},
    {"StepNegative", kKnob0, Knob0("min: 1 max: 100 step: -5"), "", "step_not_positive",
     "step: -5"},
    {"StepLargerThanRange", kKnob0, Knob0("min: 1 max: 100 step: 100"), "", "step_exceeds_range",
     "step: 100"},
    {"MaxStepNegative", kKnob0, Knob0("min: 1 max: 100 step: 5 max_step: -1"), "",
     "max_step_negative", "max_step: -1"},
    {"MaxStepBelowStep", kKnob0, Knob0("min: 1 max: 100 step: 5 max_step: 4"), "",
     "max_step_below_step", "max_step: 4"},
    {"RateBoundAboveLinkSpeed", kKnob0, Knob0("min: 1 max: 25001 step: 5"), "",
     "rate_above_link_speed", "max: 25001", 1, 25000, "25000 Mbps"},
    {"StartBelowMin", kKnob0, Knob0("min: 1 max: 100 step: 5 start: 0"), "", "start_outside_bounds",
     "start: 0"},
    {"StartAboveMax", kKnob0, Knob0("min: 1 max: 100 step: 5 start: 101"), "",
     "start_outside_bounds", "start: 101"},
    {"LogScaleMinZero", "", "",
     "knobs { parameter: \"min_time_between_cnps\" min: 0 max: 64 step: 2 log_scale: true }\n",
     "log_scale_min_not_positive", "min: 0 max: 64"},
    {"NoKnobs",
     absl::StrCat(kKnob0, "\nknobs { parameter: \"rpg_time_reset\" min: 50 max: 1000 step: 25 }"),
     "", "", "no_knobs", ""},
    // --- tuner
    {"TunerMissing", "tuner { kind: COORDINATE_DESCENT }\n", "", "", "tuner_kind_unspecified", ""},
    {"TunerKindUnspecified", "tuner { kind: COORDINATE_DESCENT }", "tuner { trial_budget: 5 }", "",
     "tuner_kind_unspecified", "tuner {"},
    {"TunerKindUnknown", "kind: COORDINATE_DESCENT", "kind: 5", "", "tuner_kind_unknown",
     "kind: 5"},
    {"TrialBudgetAbove200", "tuner { kind: COORDINATE_DESCENT }",
     "tuner { kind: COORDINATE_DESCENT trial_budget: 201 }", "", "trial_budget_too_large",
     "trial_budget"},
    {"MinImprovementOne", "tuner { kind: COORDINATE_DESCENT }",
     "tuner { kind: COORDINATE_DESCENT min_improvement: 1 }", "", "min_improvement_out_of_range",
     "min_improvement"},
    // Accepted and ignored until allreduce_storage.textproto was found setting it.
    {"MinWindowSamplesIsNotRead", "tuner { kind: COORDINATE_DESCENT }",
     "tuner { kind: COORDINATE_DESCENT min_window_samples: 500 }", "", "min_window_samples_unused",
     "min_window_samples", 1, std::nullopt, "guard.min_samples"},
    {"FixedNamesNonKnob", "tuner { kind: COORDINATE_DESCENT }",
     "tuner {\n  kind: FIXED\n  fixed { key: \"rpg_hai_rate\" value: 100 }\n}", "",
     "fixed_unknown_knob", "fixed {", 1, std::nullopt, "rpg_hai_rate"},
    {"FixedValueOutsideKnobBounds", "tuner { kind: COORDINATE_DESCENT }",
     "tuner {\n  kind: FIXED\n  fixed { key: \"rpg_time_reset\" value: 300 }\n"
     "  fixed { key: \"rpg_ai_rate\" value: 500 }\n}",
     "", "fixed_outside_bounds", "value: 500"},
    {"FixedWithoutValues", "kind: COORDINATE_DESCENT", "kind: FIXED", "", "fixed_empty",
     "kind: FIXED"},
    // --- rollout
    {"CanaryZero", "canary_fraction: 0.25", "canary_fraction: 0", "",
     "canary_fraction_out_of_range", "canary_fraction: 0"},
    {"CanaryOne", "canary_fraction: 0.25", "canary_fraction: 1", "", "canary_fraction_out_of_range",
     "canary_fraction: 1"},
    {"CanaryNegative", "canary_fraction: 0.25", "canary_fraction: -0.1", "",
     "canary_fraction_out_of_range", "canary_fraction"},
    {"CanaryNaN", "canary_fraction: 0.25", "canary_fraction: nan", "",
     "canary_fraction_out_of_range", "canary_fraction"},
    {"CanaryMissing", "canary_fraction: 0.25 ", "", "", "canary_fraction_out_of_range",
     "rollout {"},
    {"BakeZero", "bake_seconds: 300", "bake_seconds: 0", "", "bake_seconds_zero",
     "bake_seconds: 0"},
    {"BakeMissing", "bake_seconds: 300 ", "", "", "bake_seconds_zero", "rollout {"},
    {"StagesNotIncreasing", "stages: [0.5, 1.0]", "stages: 0.5\n  stages: 0.5\n  stages: 1.0\n", "",
     "stages_not_increasing", "stages: 0.5", 2},
    {"StagesDecreasingInList", "stages: [0.5, 1.0]", "stages: [0.75, 0.5, 1.0]", "",
     "stages_not_increasing", "stages:"},
    {"FirstStageNotAboveCanary", "stages: [0.5, 1.0]", "stages: [0.25, 1.0]", "",
     "stages_not_increasing", "stages:", 1, std::nullopt, "canary_fraction"},
    {"StageZero", "stages: [0.5, 1.0]", "stages: [0, 0.5, 1.0]", "", "stage_out_of_range",
     "stages:"},
    {"StageAboveOne", "stages: [0.5, 1.0]", "stages: 0.5\n  stages: 1.5\n  stages: 1.0\n", "",
     "stage_out_of_range", "stages: 1.5", 1, std::nullopt, "(0, 1]"},
    {"StagesNotEndingAtOne", "stages: [0.5, 1.0]", "stages: [0.5, 0.9]", "",
     "stages_not_ending_at_one", "stages:"},
    {"StagesEmpty", "stages: [0.5, 1.0]", "", "", "stages_not_ending_at_one", "rollout {"},
    // --- guard
    {"RegressionOne", "max_p99_regression: 0.05", "max_p99_regression: 1", "",
     "guard_regression_out_of_range", "max_p99_regression"},
    {"RegressionNegative", "max_p99_regression: 0.05", "max_p99_regression: -0.01", "",
     "guard_regression_out_of_range", "max_p99_regression"},
    {"ConfidenceHalf", "guard {", "guard { confidence: 0.5", "", "guard_confidence_out_of_range",
     "confidence"},
    {"ConfidenceOne", "guard {", "guard {\n  confidence: 1.0\n", "",
     "guard_confidence_out_of_range", "confidence"},
    {"PauseRatioAboveOne", "guard {", "guard { max_pfc_pause_ratio: 1.5", "",
     "guard_pause_ratio_out_of_range", "max_pfc_pause_ratio"},
    {"RetransmitsNegative", "guard {", "guard { max_retransmits_per_second: -1", "",
     "guard_value_negative", "max_retransmits_per_second"},
    {"UcbRegressionNegative", "guard {", "guard { pass_max_ucb_regression: -0.1", "",
     "guard_value_negative", "pass_max_ucb_regression"},
    {"LocalGuardRoundsAboveSixty", "guard {", "guard { local_guard_rounds: 61", "",
     "guard_rounds_out_of_range", "local_guard_rounds: 61"},
    {"LeaseBelowTenSeconds", "guard {", "guard { provisional_lease_seconds: 9", "",
     "guard_lease_out_of_range", "provisional_lease_seconds: 9", 1, std::nullopt,
     "a controller restart would roll changes back"},
    {"LeaseAboveADay", "guard {", "guard { provisional_lease_seconds: 86401", "",
     "guard_lease_out_of_range", "provisional_lease_seconds: 86401"},
    // --- approval
    {"ElevenApprovers", "", "", "approval {\n  approvers: 11\n}\n", "approvers_too_many",
     "approvers: 11"},
    // --- maps
    {"DuplicateLabelKey", "", "",
     "selector {\n  match_labels { key: \"rack\" value: \"a\" }\n"
     "  match_labels { key: \"rack\" value: \"b\" }\n}\n",
     "duplicate_key", "match_labels", 2, std::nullopt, "selector.match_labels[rack]"},
};

INSTANTIATE_TEST_SUITE_P(PolicyRules, RuleTest, ::testing::ValuesIn(kCases),
                         [](const auto& info) { return info.param.name; });

// Values at the edge of each range are accepted.
TEST(PolicyValidateTest, BoundaryValuesAreValid) {
  const std::string text = absl::StrCat(
      absl::StrReplaceAll(
          kValidPolicy, {{"name: \"base\"", absl::StrCat("name: \"0", std::string(62, 'z'), "\"")},
                         {"canary_fraction: 0.25", "canary_fraction: 0.01 min_canary_hosts: 0"},
                         {"stages: [0.5, 1.0]", "stages: [1.0]"},
                         {"max_p99_regression: 0.05",
                          "max_p99_regression: 0 confidence: 0 max_pfc_pause_ratio: 1 "
                          "provisional_lease_seconds: 10"},
                         {"tuner { kind: COORDINATE_DESCENT }",
                          "tuner { kind: COORDINATE_DESCENT trial_budget: 200 }"}}),
      "approval { approvers: 10 }\n",
      "knobs { parameter: \"rpg_min_dec_fac\" min: 0 max: 100 step: 100 start: 100 }\n",
      "knobs { parameter: \"pfc.delay\" min: 0 max: 65535 step: 1 }\n",
      "knobs { parameter: \"rp_enable_mask\" min: 8 max: 8 step: 1 }\n");
  auto file = PolicyFile::Parse(text, "p");
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_THAT(file->Validate(), IsEmpty()) << Dump(file->Validate());
  PolicyContext context;
  context.min_link_speed_mbps = 100;  // rpg_ai_rate max is exactly 100 Mbps
  EXPECT_THAT(file->Validate(context), IsEmpty()) << Dump(file->Validate(context));
}

// objective.peer_class: offline any intra_<label> / inter_<label> passes (the
// controller's --probe_locality_label is not known); against a controller only
// its own label's two classes do.
TEST(PolicyValidateTest, PeerClassFollowsTheControllersLocalityLabel) {
  auto with_class = [](const std::string& peer_class) {
    return PolicyFile::Parse(
        absl::StrReplaceAll(kValidPolicy,
                            {{"objective { metric: PROBE_RTT_P99 }",
                              absl::StrCat("objective { metric: PROBE_RTT_P99 peer_class: \"",
                                           peer_class, "\" }")}}),
        "p");
  };
  PolicyContext rack;
  rack.probe_locality_label = "rack";
  for (const char* ok : {"intra_rack", "inter_rack"}) {
    auto file = with_class(ok);
    ASSERT_TRUE(file.ok()) << file.status();
    EXPECT_THAT(file->Validate(), IsEmpty()) << ok << "\n" << Dump(file->Validate());
    EXPECT_THAT(file->Validate(rack), IsEmpty()) << ok << "\n" << Dump(file->Validate(rack));
  }
  auto tor = with_class("intra_tor");
  ASSERT_TRUE(tor.ok()) << tor.status();
  EXPECT_THAT(tor->Validate(), IsEmpty()) << Dump(tor->Validate());
  const auto errors = tor->Validate(rack);
  ASSERT_EQ(errors.size(), 1u) << Dump(errors);
  EXPECT_EQ(errors[0].rule, "objective_peer_class_unknown");
  EXPECT_THAT(errors[0].message, HasSubstr("\"intra_rack\""));
  EXPECT_THAT(errors[0].message, HasSubstr("--probe_locality_label is rack"));
  for (const char* bad : {"intra_", "inter", "congested", "intra_a b"}) {
    auto file = with_class(bad);
    ASSERT_TRUE(file.ok()) << file.status();
    const auto offline = file->Validate();
    ASSERT_EQ(offline.size(), 1u) << bad << "\n" << Dump(offline);
    EXPECT_EQ(offline[0].rule, "objective_peer_class_unknown") << bad;
  }
}

TEST(PolicyValidateTest, LinkSpeedOnlyChecksRateKnobs) {
  auto file = PolicyFile::Parse(kValidPolicy, "p");
  ASSERT_TRUE(file.ok()) << file.status();
  PolicyContext context;
  context.min_link_speed_mbps = 100;  // rpg_time_reset's max 1000 (us) is not a rate
  EXPECT_THAT(file->Validate(context), IsEmpty());
  context.min_link_speed_mbps = 99;
  const auto errors = file->Validate(context);
  ASSERT_EQ(errors.size(), 1u) << Dump(errors);
  EXPECT_EQ(errors[0].rule, "rate_above_link_speed");
  EXPECT_EQ(std::make_pair(errors[0].line, errors[0].column), Pos(kValidPolicy, "max: 100 "));
}

TEST(PolicyValidateTest, ReportsEveryErrorInFileOrder) {
  const std::string text =
      absl::StrReplaceAll(kValidPolicy, {{"name: \"base\"", "name: \"Bad\""},
                                         {"step: 25", "step: 0"},
                                         {"canary_fraction: 0.25", "canary_fraction: 2"},
                                         {"max_p99_regression: 0.05", "max_p99_regression: 3"}});
  auto file = PolicyFile::Parse(text, "p");
  ASSERT_TRUE(file.ok()) << file.status();
  const auto errors = file->Validate();
  std::vector<std::string> rules;
  for (const auto& e : errors) rules.push_back(e.rule);
  EXPECT_THAT(rules, ::testing::ElementsAre("name_invalid", "step_not_positive",
                                            "canary_fraction_out_of_range",
                                            "guard_regression_out_of_range"));
  for (size_t i = 1; i < errors.size(); ++i) {
    EXPECT_LT(std::make_pair(errors[i - 1].line, errors[i - 1].column),
              std::make_pair(errors[i].line, errors[i].column));
  }
  const absl::Status status = ErrorsToStatus(errors);
  EXPECT_EQ(std::count(status.message().begin(), status.message().end(), '\n'), 3);
}

// The job signal as objective with probe p99 as a constraint, and the
// other way round, are valid policies.
TEST(PolicyValidateTest, JobSignalAndProbesEitherWayRound) {
  for (const std::string& objective :
       {std::string("objective { metric: STEP_TIME_P99 op: \"allreduce\" job: \"llama/run3\" }\n"
                    "constraints { metric: \"probe_rtt_p99\" max_ratio: 1.2 }"),
        std::string("objective { metric: PROBE_RTT_P99 op: \"step\" }\n"
                    "constraints { metric: \"step_time_p99\" max_ratio: 1.05 }")}) {
    const std::string text =
        absl::StrReplaceAll(kValidPolicy, {{"objective { metric: PROBE_RTT_P99 }", objective}});
    auto file = PolicyFile::Parse(text, "p.textproto");
    ASSERT_TRUE(file.ok()) << file.status();
    EXPECT_THAT(file->Validate(PolicyContext()), IsEmpty()) << text;
  }
}

TEST(PolicyValidateTest, MinCanaryHostsZeroIsAllowed) {
  const std::string text = absl::StrReplaceAll(kValidPolicy, {{"bake_seconds: 300",
                                                               "bake_seconds: 300 "
                                                               "min_canary_hosts: 0"}});
  auto file = PolicyFile::Parse(text, "p");
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_THAT(file->Validate(), IsEmpty());
}

TEST(PolicyValidateTest, OneKnobCanBreakSeveralRules) {
  // min above max and step <= 0, each at its own field; start is not judged
  // against bounds that cross.
  const std::string text =
      absl::StrReplaceAll(kValidPolicy, {{kKnob0, Knob0("min: 90 max: 10 step: 0 start: 5")}});
  auto file = PolicyFile::Parse(text, "p");
  ASSERT_TRUE(file.ok()) << file.status();
  const auto errors = file->Validate();
  ASSERT_EQ(errors.size(), 2u) << Dump(errors);
  EXPECT_EQ(errors[0].rule, "knob_min_gt_max");
  EXPECT_EQ(std::make_pair(errors[0].line, errors[0].column), Pos(text, "min: 90"));
  EXPECT_EQ(errors[1].rule, "step_not_positive");
  EXPECT_EQ(std::make_pair(errors[1].line, errors[1].column), Pos(text, "step: 0"));
}

std::string ReadDoc() {
  std::ifstream in(absl::StrCat(ROCETUNE_SOURCE_DIR, "/docs/policies.md"));
  std::stringstream buf;
  buf << in.rdbuf();
  return buf.str();
}

// docs/policies.md names every rule validation reports and every knob.
TEST(PolicyDocsTest, DocumentsEveryRuleAndKnob) {
  const std::string doc = ReadDoc();
  ASSERT_FALSE(doc.empty());
  for (const Case& c : kCases) {
    EXPECT_NE(doc.find(absl::StrCat("`", c.rule, "`")), std::string::npos) << c.rule;
  }
  for (const char* rule : {"syntax", "negative_unsigned"}) {
    EXPECT_NE(doc.find(absl::StrCat("`", rule, "`")), std::string::npos) << rule;
  }
  for (const KnobSpec& spec : KnobSpecs()) {
    EXPECT_NE(doc.find(absl::StrCat("| `", spec.name, "` |")), std::string::npos) << spec.name;
  }
}

}  // namespace
}  // namespace rocetune::controller
