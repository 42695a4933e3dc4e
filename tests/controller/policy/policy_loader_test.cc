#include "controller/policy/policy_loader.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/controller/policy/policy_test_util.h"

namespace rocetune::controller {

// Reads PolicyFile's recorded field positions.
class PolicyFileTestPeer {
 public:
  static std::pair<int, int> Find(const PolicyFile& f, const std::string& path) {
    return f.Find(path);
  }
  static bool Recorded(const PolicyFile& f, const std::string& path) {
    return std::any_of(f.locations_.begin(), f.locations_.end(),
                       [&](const auto& l) { return l.path == path; });
  }
};

namespace {

using ::rocetune::controller::testing::kValidPolicy;
using ::rocetune::controller::testing::Pos;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

namespace fs = std::filesystem;

std::string Msg(const absl::Status& s) { return std::string(s.message()); }

std::string Where(const std::pair<int, int>& p) { return absl::StrCat(p.first, ":", p.second); }

TEST(PolicyFileParseTest, ValidPolicyParsesAndValidates) {
  auto file = PolicyFile::Parse(kValidPolicy, "base.textproto");
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(file->file_name(), "base.textproto");
  EXPECT_EQ(file->text(), kValidPolicy);
  EXPECT_EQ(file->policy().name(), "base");
  ASSERT_EQ(file->policy().knobs_size(), 2);
  EXPECT_EQ(file->policy().knobs(1).parameter(), "rpg_time_reset");
  EXPECT_THAT(file->policy().rollout().stages(), ::testing::ElementsAre(0.5, 1.0));
  EXPECT_THAT(file->Validate(), IsEmpty());
}

TEST(PolicyFileParseTest, RecordsFieldPositions) {
  const std::string text = kValidPolicy;
  auto file = PolicyFile::Parse(text, "p");
  ASSERT_TRUE(file.ok()) << file.status();
  using Peer = PolicyFileTestPeer;
  EXPECT_EQ(Peer::Find(*file, "name"), Pos(text, "name:"));
  EXPECT_EQ(Peer::Find(*file, "knobs[0]"), Pos(text, "knobs {"));
  EXPECT_EQ(Peer::Find(*file, "knobs[1]"), Pos(text, "knobs {", 2));
  EXPECT_EQ(Peer::Find(*file, "knobs[1].max"), Pos(text, "max: 1000"));
  EXPECT_EQ(Peer::Find(*file, "rollout.canary_fraction"), Pos(text, "canary_fraction"));
  EXPECT_EQ(Peer::Find(*file, "rollout.stages"), Pos(text, "stages"));
  // A field the file does not name falls back to its closest recorded parent.
  EXPECT_FALSE(Peer::Recorded(*file, "knobs[1].start"));
  EXPECT_EQ(Peer::Find(*file, "knobs[1].start"), Peer::Find(*file, "knobs[1]"));
  EXPECT_EQ(Peer::Find(*file, "approval.approvers"), std::make_pair(1, 1));
}

TEST(PolicyFileParseTest, HardCodedPositionsAreOneBased) {
  // Line 3 column 3 is "max"; the tab on line 4 advances the column to 9.
  const std::string text = "knobs {\n  parameter: \"rpg_ai_rate\"\n  max: 5\n\tstep: 1\n}\n";
  auto file = PolicyFile::Parse(text, "p");
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(PolicyFileTestPeer::Find(*file, "knobs[0].max"), std::make_pair(3, 3));
  EXPECT_EQ(PolicyFileTestPeer::Find(*file, "knobs[0].step"), std::make_pair(4, 9));
  EXPECT_EQ(PolicyFileTestPeer::Find(*file, "knobs[0]"), std::make_pair(1, 1));
}

TEST(PolicyFileParseTest, FieldWithDefaultValueIsStillLocated) {
  const std::string text = absl::StrReplaceAll(kValidPolicy, {{"step: 5", "step: 0"}});
  auto file = PolicyFile::Parse(text, "p");
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(PolicyFileTestPeer::Find(*file, "knobs[0].step"), Pos(text, "step: 0"));
}

TEST(PolicyFileParseTest, MapEntriesAreLocatedByKey) {
  const std::string text =
      absl::StrCat(kValidPolicy, "selector {\n  match_labels { key: \"rack\" value: \"r1\" }\n",
                   "  match_labels { key: \"pod\" value: \"p2\" }\n}\n");
  auto file = PolicyFile::Parse(text, "p");
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(PolicyFileTestPeer::Find(*file, "selector.match_labels[pod]"),
            Pos(text, "match_labels { key: \"pod\""));
  EXPECT_EQ(PolicyFileTestPeer::Find(*file, "selector.match_labels[rack].value"),
            Pos(text, "value: \"r1\""));
  EXPECT_EQ(file->policy().selector().match_labels().at("pod"), "p2");
}

TEST(PolicyFileParseTest, RepeatedScalarLinesAreLocatedOneByOne) {
  const std::string text = absl::StrReplaceAll(
      kValidPolicy, {{"stages: [0.5, 1.0]", "\n  stages: 0.5\n  stages: 1.0\n"}});
  auto file = PolicyFile::Parse(text, "p");
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(PolicyFileTestPeer::Find(*file, "rollout.stages[1]"), Pos(text, "stages: 1.0"));
  EXPECT_EQ(PolicyFileTestPeer::Find(*file, "rollout.stages"), Pos(text, "stages: 0.5"));
}

TEST(PolicyFileParseTest, ListSyntaxForMessagesLocatesNestedFields) {
  const std::string text =
      "knobs: [\n  { parameter: \"rpg_ai_rate\" max: 5 },\n"
      "  { parameter: \"dce_tcp_g\" max: 1000 }\n]\n";
  auto file = PolicyFile::Parse(text, "p");
  ASSERT_TRUE(file.ok()) << file.status();
  ASSERT_EQ(file->policy().knobs_size(), 2);
  EXPECT_EQ(PolicyFileTestPeer::Find(*file, "knobs[1].max"), Pos(text, "max: 1000"));
  EXPECT_EQ(PolicyFileTestPeer::Find(*file, "knobs[0].max"), Pos(text, "max: 5"));
  // The list is one field occurrence: its elements fall back to where it starts.
  EXPECT_EQ(PolicyFileTestPeer::Find(*file, "knobs[1]"), Pos(text, "knobs"));
}

TEST(PolicyFileParseTest, SyntaxErrorCarriesLineAndColumn) {
  const std::string text = absl::StrReplaceAll(kValidPolicy, {{"max: 1000", "maxx: 1000"}});
  auto file = PolicyFile::Parse(text, "bad.textproto");
  ASSERT_FALSE(file.ok());
  EXPECT_EQ(file.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Msg(file.status()), ::testing::StartsWith(absl::StrCat(
                                      "bad.textproto:", Where(Pos(text, "maxx")), ": ")));
  EXPECT_THAT(Msg(file.status()), HasSubstr("maxx"));
  EXPECT_THAT(Msg(file.status()), HasSubstr("[syntax]"));
}

TEST(PolicyFileParseTest, EncodingErrorsNameTheirPosition) {
  auto bom = PolicyFile::Parse(std::string("\xEF\xBB\xBF") + kValidPolicy, "bom.textproto");
  ASSERT_FALSE(bom.ok());
  EXPECT_EQ(bom.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Msg(bom.status()), ::testing::StartsWith("bom.textproto:1:1: "));
  EXPECT_THAT(Msg(bom.status()), HasSubstr("byte-order mark"));
  // Invalid bytes inside a string value, a truncated sequence, an overlong
  // form and a surrogate: each at its line and column.
  for (const auto& [text, where] : std::vector<std::pair<std::string, std::string>>{
           {"name: \"a\xFF"
            "b\"\n",
            "f:1:9: byte 0xFF"},
           {"name: \"x\"\n\n  # \xE2\x82", "f:3:5: byte 0xE2"},
           {"# \xC0\xAF\n", "f:1:3: byte 0xC0"},
           {"name: \"ok\"\n# \xED\xA0\x80\n", "f:2:3: byte 0xED"}}) {
    auto file = PolicyFile::Parse(text, "f");
    ASSERT_FALSE(file.ok()) << where;
    EXPECT_THAT(Msg(file.status()), ::testing::StartsWith(where));
    EXPECT_THAT(Msg(file.status()), HasSubstr("[encoding]"));
  }
  // Well-formed multi-byte text (a comment, a reason) parses.
  EXPECT_TRUE(PolicyFile::Parse(
                  std::string("# caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80\n") + kValidPolicy, "f")
                  .ok());
}

TEST(PolicyFileParseTest, UnterminatedMessageIsASyntaxError) {
  const std::string text = "name: \"x\"\nknobs {\n  parameter: \"rpg_ai_rate\"\n";
  auto file = PolicyFile::Parse(text, "f");
  ASSERT_FALSE(file.ok());
  // The parser notices at the end of the input: line 4, column 1.
  EXPECT_THAT(Msg(file.status()), HasSubstr("f:4:1: "));
}

TEST(PolicyFileParseTest, EveryReportedErrorIsKept) {
  // An unterminated string (a tokenizer error) and then a value of the wrong
  // type: the parser reports both, and both come back, one per line.
  const std::string text = "name: \"x\ndescription: 7\n";
  auto file = PolicyFile::Parse(text, "f");
  ASSERT_FALSE(file.ok());
  const std::vector<std::string> lines = absl::StrSplit(Msg(file.status()), '\n');
  ASSERT_EQ(lines.size(), 2u) << file.status();
  EXPECT_THAT(lines[0], ::testing::StartsWith("f:1:9: "));
  EXPECT_THAT(lines[1], ::testing::StartsWith(absl::StrCat("f:", Where(Pos(text, "7")), ": ")));
}

TEST(PolicyFileParseTest, FieldNameErrorsPointAtTheName) {
  const std::string text = "name: \"a\"\nknobs {\tfoo: 1 }\nname: \"b\"\n";
  auto unknown = PolicyFile::Parse(text, "f");
  ASSERT_FALSE(unknown.ok());
  EXPECT_THAT(Msg(unknown.status()),
              ::testing::StartsWith("f:2:9: "));  // the tab after "knobs {" reaches column 8
  EXPECT_THAT(Msg(unknown.status()), HasSubstr("no field named \"foo\""));
  auto twice = PolicyFile::Parse("name: \"a\"\n  name: \"b\"\n", "f");
  ASSERT_FALSE(twice.ok());
  EXPECT_THAT(Msg(twice.status()), ::testing::StartsWith("f:2:3: "));
}

TEST(PolicyFileParseTest, WrongTypeValueIsASyntaxError) {
  const std::string text =
      absl::StrReplaceAll(kValidPolicy, {{"canary_fraction: 0.25", "canary_fraction: \"a\""}});
  auto file = PolicyFile::Parse(text, "f");
  ASSERT_FALSE(file.ok());
  EXPECT_THAT(Msg(file.status()), HasSubstr(absl::StrCat("f:", Where(Pos(text, "\"a\"")), ": ")));
}

TEST(PolicyFileParseTest, NegativeApproversRejectedWithClearMessage) {
  const std::string text = absl::StrCat(kValidPolicy, "approval {\n  approvers: -1\n}\n");
  auto file = PolicyFile::Parse(text, "f");
  ASSERT_FALSE(file.ok());
  EXPECT_THAT(Msg(file.status()),
              HasSubstr(absl::StrCat("f:", Where(Pos(text, "-1")),
                                     ": approvers: -1 is negative, but the field is unsigned")));
  EXPECT_THAT(Msg(file.status()), HasSubstr("[negative_unsigned]"));
}

TEST(PolicyFileParseTest, NegativeUnsignedAfterTabIsNamed) {
  const std::string text = "guard {\n\tmin_samples:\t-25\n}\n";
  auto file = PolicyFile::Parse(text, "f");
  ASSERT_FALSE(file.ok());
  EXPECT_THAT(Msg(file.status()), HasSubstr("min_samples: -25 is negative"));
  // Columns count a tab as reaching the next multiple of 8: "\tmin_samples:\t" ends at 24.
  EXPECT_THAT(Msg(file.status()), HasSubstr("f:2:25: "));
}

TEST(PolicyFileParseTest, CommentsAndBlankLinesAreAllowed) {
  const std::string text = absl::StrCat("# heading\n\n", kValidPolicy, "  # trailing\n");
  auto file = PolicyFile::Parse(text, "f");
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_THAT(file->Validate(), IsEmpty());
}

TEST(PolicyFileParseTest, EmptyTextParsesAndFailsValidationAtStart) {
  auto file = PolicyFile::Parse("", "empty");
  ASSERT_TRUE(file.ok()) << file.status();
  const auto errors = file->Validate();
  ASSERT_FALSE(errors.empty());
  for (const PolicyError& e : errors) {
    EXPECT_EQ(e.line, 1) << e.ToString();
    EXPECT_EQ(e.column, 1) << e.ToString();
    EXPECT_EQ(e.file, "empty");
  }
}

TEST(PolicyFileLoadTest, LoadsFileAndNamesItInErrors) {
  const fs::path dir = fs::path(::testing::TempDir()) / absl::StrCat("policy_load_", getpid());
  fs::create_directories(dir);
  const fs::path path = dir / "p.textproto";
  {
    std::ofstream out(path);
    out << absl::StrReplaceAll(kValidPolicy, {{"max: 100 ", "max: 0 "}});
  }
  auto file = PolicyFile::Load(path.string());
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(file->file_name(), path.string());
  const auto errors = file->Validate();
  ASSERT_EQ(errors.size(), 2u);  // max 0 is outside [1, ...] and below min 1
  EXPECT_THAT(errors[0].ToString(), HasSubstr(absl::StrCat(path.string(), ":4:")));
  fs::remove_all(dir);
}

TEST(PolicyFileLoadTest, MissingFileIsNotFound) {
  auto file = PolicyFile::Load("/nonexistent/dir/policy.textproto");
  ASSERT_FALSE(file.ok());
  EXPECT_EQ(file.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(Msg(file.status()), HasSubstr("/nonexistent/dir/policy.textproto"));
}

TEST(PolicyErrorTest, ToStringFormats) {
  PolicyError e{"a.textproto", 3, 7, "unknown_knob", "knobs[0].parameter \"x\" is not ..."};
  EXPECT_EQ(e.ToString(), "a.textproto:3:7: knobs[0].parameter \"x\" is not ... [unknown_knob]");
  e.line = 0;
  EXPECT_EQ(e.ToString(), "a.textproto: knobs[0].parameter \"x\" is not ... [unknown_knob]");
}

TEST(PolicyErrorTest, ErrorsToStatusJoinsOnePerLine) {
  EXPECT_TRUE(ErrorsToStatus({}).ok());
  const std::vector<PolicyError> errors = {{"f", 1, 2, "r1", "m1"}, {"f", 3, 4, "r2", "m2"}};
  const absl::Status status = ErrorsToStatus(errors);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Msg(status), "f:1:2: m1 [r1]\nf:3:4: m2 [r2]");
}

// Every example in policies/ (globbed now, so new files are covered) parses
// and validates, also against hosts with 100G links.
TEST(PolicyExamplesTest, EveryExampleParsesAndValidates) {
  const fs::path dir = fs::path(ROCETUNE_SOURCE_DIR) / "policies";
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.path().extension() != ".textproto") continue;
    names.push_back(entry.path().filename().string());
    SCOPED_TRACE(entry.path().string());
    auto file = PolicyFile::Load(entry.path().string());
    ASSERT_TRUE(file.ok()) << file.status();
    EXPECT_TRUE(ErrorsToStatus(file->Validate()).ok()) << ErrorsToStatus(file->Validate());
    PolicyContext hundred_gig;
    hundred_gig.min_link_speed_mbps = 100000;
    EXPECT_TRUE(ErrorsToStatus(file->Validate(hundred_gig)).ok())
        << ErrorsToStatus(file->Validate(hundred_gig));
    EXPECT_FALSE(file->policy().description().empty());
  }
  EXPECT_THAT(names,
              ::testing::IsSupersetOf({"incast_training.textproto", "allreduce_storage.textproto",
                                       "ecn_only_conservative.textproto"}));
}

TEST(PolicyExamplesTest, IncastTrainingHasTheAgreedShape) {
  auto file =
      PolicyFile::Load(absl::StrCat(ROCETUNE_SOURCE_DIR, "/policies/incast_training.textproto"));
  ASSERT_TRUE(file.ok()) << file.status();
  const v1::Policy& p = file->policy();
  std::vector<std::string> knobs;
  for (const auto& k : p.knobs()) knobs.push_back(k.parameter());
  EXPECT_THAT(knobs,
              ::testing::UnorderedElementsAre("rpg_ai_rate", "rpg_hai_rate", "rpg_time_reset",
                                              "rate_reduce_monitor_period", "min_time_between_cnps",
                                              "dce_tcp_g", "rpg_min_dec_fac"));
  EXPECT_EQ(p.objective().metric(), v1::Objective::PROBE_RTT_P99);
  EXPECT_EQ(p.tuner().kind(), v1::Tuner::COORDINATE_DESCENT);
  EXPECT_EQ(p.tuner().trial_budget(), 20u);
  EXPECT_EQ(p.rollout().canary_fraction(), 0.25);
  EXPECT_EQ(p.rollout().min_canary_hosts(), 8u);
  EXPECT_EQ(p.rollout().bake_seconds(), 300u);
  EXPECT_THAT(p.rollout().stages(), ::testing::ElementsAre(0.5, 1.0));
  EXPECT_EQ(p.rollout().rack_label(), "rack");
  EXPECT_EQ(p.guard().max_p99_regression(), 0.05);
  EXPECT_EQ(p.guard().confidence(), 0.995);
  EXPECT_EQ(p.guard().min_samples(), 2000u);
  EXPECT_EQ(p.guard().min_rack_pairs(), 6u);
  EXPECT_EQ(p.approval().approvers(), 1u);
}

}  // namespace
}  // namespace rocetune::controller
