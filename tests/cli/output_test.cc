#include "cli/output.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_split.h"
#include "rocetune/v1/admin.pb.h"

namespace rocetune::cli {
namespace {

using ::testing::HasSubstr;

TEST(TableTest, AlignsColumnsToWidestCellWithoutTrailingBlanks) {
  Table t({"HOST", "STATE", "LABELS"});
  t.AddRow({"h1", "connected", "rack=r1"});
  t.AddRow({"host-long", "gone", ""});
  std::vector<std::string> lines = absl::StrSplit(t.Render(), '\n');
  ASSERT_EQ(lines.size(), 4u);  // header, two rows, trailing empty
  EXPECT_EQ(lines[0], "HOST       STATE      LABELS");
  EXPECT_EQ(lines[1], "h1         connected  rack=r1");
  EXPECT_EQ(lines[2], "host-long  gone");
  // Every row's second column starts at the same offset.
  EXPECT_EQ(lines[0].find("STATE"), lines[1].find("connected"));
  EXPECT_EQ(lines[0].find("STATE"), lines[2].find("gone"));
}

TEST(TableTest, CountsCodePointsNotBytes) {
  Table t({"A", "B"});
  t.AddRow({"██", "x"});  // 2 code points, 6 bytes
  t.AddRow({"abcd", "y"});
  std::vector<std::string> lines = absl::StrSplit(t.Render(), '\n');
  EXPECT_EQ(lines[1], "██    x");
  EXPECT_EQ(lines[2], "abcd  y");
  EXPECT_EQ(DisplayWidth("██"), 2u);
}

TEST(TableTest, NotesFollowTheirRowAndDoNotWidenColumns) {
  Table t({"ID", "ACTION"});
  t.AddRow({"1", "push"});
  t.AddNote("    a very long note line that is wider than any column");
  t.AddRow({"2", "approve"});
  std::vector<std::string> lines = absl::StrSplit(t.Render(), '\n');
  ASSERT_GE(lines.size(), 4u);
  EXPECT_EQ(lines[0], "ID  ACTION");
  EXPECT_EQ(lines[1], "1   push");
  EXPECT_THAT(lines[2], HasSubstr("very long note"));
  EXPECT_EQ(lines[3], "2   approve");
}

TEST(TableTest, ShortRowsArePadded) {
  Table t({"A", "B", "C"});
  t.AddRow({"x"});
  EXPECT_EQ(t.Render(), "A  B  C\nx\n");
}

TEST(JsonToYamlTest, NestedMappingsListsAndScalars) {
  absl::StatusOr<std::string> y = JsonToYaml(R"({
    "id": "c-7", "state": "CANARY", "stage": 0, "ratio": 0.1, "big": 1e300, "ok": true,
    "none": null, "empty": {}, "nothing": [],
    "knobs": {"rpg_time_reset": "300", "b": 2},
    "hosts": [{"host_id": "h1", "role": "CANARY"}, {"host_id": "h2"}],
    "tags": ["a", ["x", 1]]
  })");
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(*y,
            "big: 1.0e+300\n"
            "empty: {}\n"
            "hosts:\n"
            "- host_id: h1\n"
            "  role: CANARY\n"
            "- host_id: h2\n"
            "id: c-7\n"
            "knobs:\n"
            "  b: 2\n"
            "  rpg_time_reset: \"300\"\n"
            "none: null\n"
            "nothing: []\n"
            "ok: true\n"
            "ratio: 0.1\n"
            "stage: 0\n"
            "state: CANARY\n"
            "tags:\n"
            "- a\n"
            "-\n"
            "  - x\n"
            "  - 1\n");
}

TEST(JsonToYamlTest, StringsYamlWouldMisreadAreQuoted) {
  absl::StatusOr<std::string> y = JsonToYaml(
      R"({"a": "yes", "b": "1.5", "c": "x: y", "d": "-", "e": "line\nbreak", "f": "", "g": "# no",
          "h": "caf\u00e9"})");
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_THAT(*y, HasSubstr("a: \"yes\"\n"));
  EXPECT_THAT(*y, HasSubstr("b: \"1.5\"\n"));
  EXPECT_THAT(*y, HasSubstr("c: \"x: y\"\n"));
  EXPECT_THAT(*y, HasSubstr("d: \"-\"\n"));
  EXPECT_THAT(*y, HasSubstr("e: \"line\\nbreak\"\n"));
  EXPECT_THAT(*y, HasSubstr("f: \"\"\n"));
  EXPECT_THAT(*y, HasSubstr("g: \"# no\"\n"));
  EXPECT_THAT(*y, HasSubstr("h: \"caf\xC3\xA9\"\n"));
  // What YAML 1.1 or 1.2 would read as numbers or dates, or reserves ('@').
  absl::StatusOr<std::string> z =
      JsonToYaml(R"({"a": "0o17", "b": "1_000", "c": "2024-05-01", "d": "@oncall", "e": 1e-05})");
  ASSERT_TRUE(z.ok());
  EXPECT_THAT(*z, HasSubstr("a: \"0o17\"\n"));
  EXPECT_THAT(*z, HasSubstr("b: \"1_000\"\n"));
  EXPECT_THAT(*z, HasSubstr("c: \"2024-05-01\"\n"));
  EXPECT_THAT(*z, HasSubstr("d: \"@oncall\"\n"));
  EXPECT_THAT(*z, HasSubstr("e: 1.0e-05\n"));
  EXPECT_FALSE(JsonToYaml("{not json").ok());
}

TEST(FormatTest, SecondsPickAUnitWithThreeSignificantDigits) {
  EXPECT_EQ(FormatSeconds(0), "-");
  EXPECT_EQ(FormatSeconds(850e-9), "850ns");
  EXPECT_EQ(FormatSeconds(12.34e-6), "12.3us");
  EXPECT_EQ(FormatSeconds(4.567e-3), "4.57ms");
  EXPECT_EQ(FormatSeconds(1.2), "1.20s");
  EXPECT_EQ(FormatSeconds(std::numeric_limits<double>::infinity()), "-");
}

TEST(FormatTest, TimestampsAreUtcAndZeroIsDash) {
  EXPECT_EQ(FormatTimestamp(0), "-");
  EXPECT_EQ(FormatTimestamp(int64_t{1714564803} * 1000000000), "2024-05-01 12:00:03Z");
  absl::Time now = absl::FromUnixSeconds(1000);
  EXPECT_EQ(FormatAgo(absl::ToUnixNanos(now - absl::Seconds(3)), now), "3s ago");
  EXPECT_EQ(FormatAgo(0, now), "-");
}

TEST(FormatTest, KnobsAndLabelsAreSortedByKey) {
  v1::Change c;
  (*c.mutable_knobs())["rpg_time_reset"] = 100;
  (*c.mutable_knobs())["rpg_ai_rate"] = 20;
  EXPECT_EQ(FormatKnobs(c.knobs()), "rpg_ai_rate=20 rpg_time_reset=100");
  v1::HostInfo h;
  EXPECT_EQ(FormatLabels(h.labels()), "-");
  (*h.mutable_labels())["rack"] = "r1";
  (*h.mutable_labels())["pod"] = "p1";
  EXPECT_EQ(FormatLabels(h.labels()), "pod=p1,rack=r1");
}

TEST(JsonTest, UsesProtoFieldNamesAndOneLineOnRequest) {
  v1::Event e;
  e.set_change_id("c-1");
  e.set_kind("change");
  e.set_state(v1::CANARY);
  std::string one = MessageToJson(e, /*multiline=*/false);
  EXPECT_EQ(one.find('\n'), std::string::npos);
  EXPECT_THAT(one, HasSubstr("\"change_id\":\"c-1\""));
  EXPECT_THAT(one, HasSubstr("\"state\":\"CANARY\""));
  std::string pretty = MessageToJson(e);
  EXPECT_THAT(pretty, HasSubstr("\n"));
  EXPECT_EQ(pretty.back(), '\n');
}

}  // namespace
}  // namespace rocetune::cli
