// PolicyHash, DiffPolicies and WithDefaults.

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "controller/policy/policy_loader.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/controller/policy/policy_test_util.h"

namespace rocetune::controller {
namespace {

using ::rocetune::controller::testing::kValidPolicy;
using ::testing::ElementsAre;
using ::testing::IsEmpty;
using ::testing::UnorderedElementsAre;

v1::Policy ParseOrDie(const std::string& text) {
  auto file = PolicyFile::Parse(text, "t");
  EXPECT_TRUE(file.ok()) << file.status() << "\n" << text;
  return file.ok() ? file->policy() : v1::Policy();
}

// kValidPolicy with a selector of three labels.
std::string WithLabels(const std::string& labels) {
  return absl::StrCat(kValidPolicy, "selector {\n", labels, "}\n");
}

constexpr char kLabelsABC[] =
    "  match_labels { key: \"a\" value: \"1\" }\n"
    "  match_labels { key: \"b\" value: \"2\" }\n"
    "  match_labels { key: \"c\" value: \"3\" }\n";

TEST(PolicyHashTest, IsHexSha256) {
  // An empty policy serialises to no bytes: the hash is SHA-256 of "".
  EXPECT_EQ(PolicyHash(v1::Policy()),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  const std::string h = PolicyHash(ParseOrDie(kValidPolicy));
  EXPECT_EQ(h.size(), 64u);
  EXPECT_EQ(h.find_first_not_of("0123456789abcdef"), std::string::npos) << h;
}

TEST(PolicyHashTest, StableAcrossCommentsWhitespaceAndFieldOrder) {
  const std::string base = WithLabels(kLabelsABC);
  const std::string hash = PolicyHash(ParseOrDie(base));
  // Comments and whitespace.
  const std::string commented =
      absl::StrReplaceAll(base, {{"\n", "   # comment\n\n"}, {"{ ", "{\n\t  "}, {": ", ":"}});
  EXPECT_EQ(PolicyHash(ParseOrDie(commented)), hash);
  // Top-level and nested field order.
  const std::string reordered =
      absl::StrCat("guard { max_p99_regression: 0.05 }\n",
                   "rollout { stages: [0.5, 1.0] bake_seconds: 300 canary_fraction: 0.25 }\n",
                   "tuner { kind: COORDINATE_DESCENT }\n", "selector {\n", kLabelsABC, "}\n",
                   "knobs { step: 5 max: 100 min: 1 parameter: \"rpg_ai_rate\" }\n",
                   "knobs { parameter: \"rpg_time_reset\" step: 25 min: 50 max: 1000 }\n",
                   "objective { metric: PROBE_RTT_P99 }\n", "name: \"base\"\n");
  EXPECT_EQ(PolicyHash(ParseOrDie(reordered)), hash);
  // Map entries in another order.
  const std::string map_order = WithLabels(
      "  match_labels { key: \"c\" value: \"3\" }\n"
      "  match_labels { key: \"a\" value: \"1\" }\n"
      "  match_labels { key: \"b\" value: \"2\" }\n");
  EXPECT_EQ(PolicyHash(ParseOrDie(map_order)), hash);
  // Value spelled differently (1.0 vs 1, list vs repeated lines).
  const std::string spelled =
      absl::StrReplaceAll(base, {{"stages: [0.5, 1.0]", "stages: 0.5 stages: 1"}});
  EXPECT_EQ(PolicyHash(ParseOrDie(spelled)), hash);
}

TEST(PolicyHashTest, ChangesWhenAValueChanges) {
  const std::string base = WithLabels(kLabelsABC);
  const std::string hash = PolicyHash(ParseOrDie(base));
  const std::vector<std::pair<std::string, std::string>> edits = {
      {"max: 100 ", "max: 101 "},
      {"canary_fraction: 0.25", "canary_fraction: 0.2500001"},
      {"value: \"3\"", "value: \"4\""},
      {"key: \"c\"", "key: \"d\""},
      {"name: \"base\"", "name: \"base2\""},
      {"stages: [0.5, 1.0]", "stages: [0.6, 1.0]"},
      {"PROBE_RTT_P99", "PROBE_RTT_P999"},
  };
  for (const auto& [from, to] : edits) {
    const std::string edited = absl::StrReplaceAll(base, {{from, to}});
    ASSERT_NE(edited, base) << from;
    EXPECT_NE(PolicyHash(ParseOrDie(edited)), hash) << from << " -> " << to;
  }
  // An explicit optional field set to 0 is a different policy from an absent one.
  const std::string with_start =
      absl::StrReplaceAll(base, {{"max: 100 step: 5", "max: 100 step: 5 start: 0"}});
  EXPECT_NE(PolicyHash(ParseOrDie(with_start)), hash);
}

TEST(DiffPoliciesTest, IdenticalPoliciesHaveNoDifferences) {
  const v1::Policy p = ParseOrDie(WithLabels(kLabelsABC));
  EXPECT_THAT(DiffPolicies(p, p), IsEmpty());
}

TEST(DiffPoliciesTest, ScalarsListsEnumsAndMapsFieldByField) {
  const v1::Policy a = ParseOrDie(WithLabels(kLabelsABC));
  const v1::Policy b = ParseOrDie(absl::StrReplaceAll(
      WithLabels(kLabelsABC), {{"max: 100 ", "max: 200 "},
                               {"stages: [0.5, 1.0]", "stages: [0.3, 0.5, 1.0]"},
                               {"PROBE_RTT_P99", "STEP_TIME_P99"},
                               {"key: \"b\" value: \"2\"", "key: \"b\" value: \"20\""},
                               {"match_labels { key: \"c\" value: \"3\" }\n", ""},
                               {"name: \"base\"", "name: \"next\""}}));
  EXPECT_THAT(DiffPolicies(a, b),
              ElementsAre("name: \"base\" -> \"next\"", "selector.match_labels[b]: \"2\" -> \"20\"",
                          "selector.match_labels[c]: \"3\" -> (unset)",
                          "objective.metric: PROBE_RTT_P99 -> STEP_TIME_P99",
                          "knobs[rpg_ai_rate].max: 100 -> 200",
                          "rollout.stages: [0.5, 1] -> [0.3, 0.5, 1]"));
}

TEST(DiffPoliciesTest, KnobsMatchedByParameterNotPosition) {
  const v1::Policy a = ParseOrDie(kValidPolicy);
  // Knobs swapped, one bound changed, one knob added, a start set.
  const v1::Policy b = ParseOrDie(absl::StrCat(
      "name: \"base\"\nobjective { metric: PROBE_RTT_P99 }\n",
      "knobs { parameter: \"rpg_time_reset\" min: 50 max: 1000 step: 25 start: 300 }\n",
      "knobs { parameter: \"rpg_ai_rate\" min: 2 max: 100 step: 5 }\n",
      "knobs { parameter: \"dce_tcp_g\" min: 1000 max: 1023 step: 1 }\n",
      "tuner { kind: COORDINATE_DESCENT }\n",
      "rollout { canary_fraction: 0.25 bake_seconds: 300 stages: [0.5, 1.0] }\n",
      "guard { max_p99_regression: 0.05 }\n"));
  EXPECT_THAT(
      DiffPolicies(a, b),
      ElementsAre("knobs[rpg_ai_rate].min: 1 -> 2", "knobs[rpg_time_reset].start: (unset) -> 300",
                  "knobs[dce_tcp_g]: added {parameter: \"dce_tcp_g\" min: 1000 max: 1023 "
                  "step: 1}",
                  "knobs order: [rpg_ai_rate, rpg_time_reset] -> [rpg_time_reset, "
                  "rpg_ai_rate]"));
  EXPECT_THAT(DiffPolicies(b, a),
              ::testing::Contains("knobs[dce_tcp_g]: removed {parameter: \"dce_tcp_g\" min: 1000 "
                                  "max: 1023 step: 1}"));
}

TEST(DiffPoliciesTest, ConstraintsMatchedByMetricAndSubMessagePresence) {
  const v1::Policy a =
      ParseOrDie(absl::StrCat(kValidPolicy, "constraints { metric: \"throughput_gbps\" min: 80 }\n",
                              "constraints { metric: \"pfc_pause_ratio\" max: 0.01 }\n"));
  const v1::Policy b = ParseOrDie(absl::StrCat(
      absl::StrReplaceAll(kValidPolicy, {{"guard { max_p99_regression: 0.05 }\n", ""}}),
      "constraints { metric: \"pfc_pause_ratio\" max: 0.02 }\n",
      "constraints { metric: \"throughput_gbps\" min: 80 }\n", "approval {}\n"));
  EXPECT_THAT(DiffPolicies(a, b),
              UnorderedElementsAre(
                  "constraints[pfc_pause_ratio].max: 0.01 -> 0.02",
                  "constraints order: [throughput_gbps, pfc_pause_ratio] -> [pfc_pause_ratio, "
                  "throughput_gbps]",
                  "guard.max_p99_regression: 0.05 -> 0", "approval: (unset) -> {}"));
}

TEST(DiffPoliciesTest, TunerFixedMapByKey) {
  const std::string base = absl::StrReplaceAll(
      kValidPolicy, {{"tuner { kind: COORDINATE_DESCENT }",
                      "tuner { kind: FIXED fixed { key: \"rpg_ai_rate\" value: 10 } "
                      "fixed { key: \"rpg_time_reset\" value: 300 } }"}});
  const v1::Policy a = ParseOrDie(base);
  const v1::Policy b = ParseOrDie(absl::StrReplaceAll(base, {{"value: 10", "value: 20"}}));
  EXPECT_THAT(DiffPolicies(a, b), ElementsAre("tuner.fixed[rpg_ai_rate]: 10 -> 20"));
}

TEST(WithDefaultsTest, FillsEveryDefault) {
  v1::Policy p = ParseOrDie(kValidPolicy);
  const v1::Policy original = p;
  const v1::Policy d = WithDefaults(p);
  EXPECT_EQ(PolicyHash(p), PolicyHash(original));  // input untouched
  EXPECT_EQ(d.rollout().rack_label(), "rack");
  EXPECT_EQ(d.rollout().looks(), 3u);
  EXPECT_EQ(d.rollout().baseline_seconds(), p.rollout().bake_seconds());
  EXPECT_EQ(d.rollout().min_canary_hosts(), 1u);
  EXPECT_EQ(d.guard().min_rack_pairs(), 6u);
  EXPECT_EQ(d.guard().confidence(), 0.995);
  EXPECT_EQ(d.guard().max_hold_seconds(), 3 * p.rollout().bake_seconds());
  EXPECT_EQ(d.guard().pass_max_ucb_regression(), 0.05);
  // The judge's own default, so the fleet guard's p99 and propose's
  // probe-rate check need as many probes as the judge does (before, both
  // read 0: the check was skipped, the fleet p99 judged on any few probes).
  EXPECT_EQ(d.guard().min_samples(), 2000u);
  EXPECT_EQ(d.guard().provisional_lease_seconds(), 300u);
  EXPECT_EQ(d.tuner().trial_budget(), 20u);
  // Unset on purpose: a campaign derives it from each trial's noise.
  EXPECT_EQ(d.tuner().min_improvement(), 0);
  EXPECT_EQ(d.approval().approvers(), 1u);
  // Fields that have no default stay as written.
  EXPECT_EQ(d.guard().max_p99_regression(), 0.05);
  EXPECT_EQ(d.rollout().canary_fraction(), 0.25);
  // Only the defaulted fields differ.
  EXPECT_THAT(DiffPolicies(p, d),
              UnorderedElementsAre(
                  "tuner.trial_budget: 0 -> 20", "rollout.min_canary_hosts: 0 -> 1",
                  "rollout.rack_label: \"\" -> \"rack\"", "rollout.baseline_seconds: 0 -> 300",
                  "rollout.looks: 0 -> 3", "guard.confidence: 0 -> 0.995",
                  "guard.min_rack_pairs: 0 -> 6", "guard.max_hold_seconds: 0 -> 900",
                  "guard.pass_max_ucb_regression: 0 -> 0.05", "guard.min_samples: 0 -> 2000",
                  "guard.provisional_lease_seconds: 0 -> 300", "approval.approvers: 0 -> 1"));
  // Idempotent.
  EXPECT_THAT(DiffPolicies(d, WithDefaults(d)), IsEmpty());
}

TEST(WithDefaultsTest, KeepsValuesThatAreSet) {
  const v1::Policy p = ParseOrDie(absl::StrCat(
      absl::StrReplaceAll(kValidPolicy,
                          {{"bake_seconds: 300",
                            "bake_seconds: 300 rack_label: \"tor\" looks: 5 baseline_seconds: 120 "
                            "min_canary_hosts: 8"},
                           {"max_p99_regression: 0.05",
                            "max_p99_regression: 0.05 min_rack_pairs: 2 confidence: 0.9 "
                            "max_hold_seconds: 60 pass_max_ucb_regression: 0.1 "
                            "provisional_lease_seconds: 45 min_samples: 300"},
                           {"kind: COORDINATE_DESCENT",
                            "kind: COORDINATE_DESCENT trial_budget: 7 "
                            "min_improvement: 0.05"}}),
      "approval { approvers: 3 }\n"));
  EXPECT_THAT(DiffPolicies(p, WithDefaults(p)), IsEmpty());
}

TEST(WithDefaultsTest, HoldTimeSaturatesInsteadOfWrapping) {
  v1::Policy p;
  p.mutable_rollout()->set_bake_seconds(std::numeric_limits<uint32_t>::max() / 2);
  EXPECT_EQ(WithDefaults(p).guard().max_hold_seconds(), std::numeric_limits<uint32_t>::max());
}

}  // namespace
}  // namespace rocetune::controller
