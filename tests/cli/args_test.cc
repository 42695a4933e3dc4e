#include "cli/args.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace rocetune::cli {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

const std::vector<FlagSpec> kFlags = {{"output", false, ""},
                                      {"reason", false, ""},
                                      {"dry_run", true, ""},
                                      {"help", true, ""},
                                      {"filename", false, ""}};

TEST(ArgsTest, FlagsAnywhereInAllForms) {
  absl::StatusOr<ParsedArgs> a = ParseArgs(
      {"change", "--reason", "because so", "approve", "-o", "json", "c-1", "--dry-run"}, kFlags);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_THAT(a->positional, ElementsAre("change", "approve", "c-1"));
  EXPECT_EQ(a->Get("reason"), "because so");
  EXPECT_EQ(a->Get("output"), "json");
  EXPECT_TRUE(a->GetBool("dry_run"));
  EXPECT_FALSE(a->GetBool("help"));
}

TEST(ArgsTest, EqualsFormsAndUnderscoreDashEquivalence) {
  absl::StatusOr<ParsedArgs> a = ParseArgs({"--output=json", "--dry_run=false", "-ojson"}, kFlags);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->Get("output"), "json");
  EXPECT_FALSE(a->GetBool("dry_run"));
  a = ParseArgs({"-f", "p.textproto", "-oyaml"}, kFlags);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->Get("filename"), "p.textproto");
  EXPECT_EQ(a->Get("output"), "yaml");
  EXPECT_EQ(ParseArgs({"-fq.textproto"}, kFlags)->Get("filename"), "q.textproto");
  a = ParseArgs({"-o=table", "--dry-run=true"}, kFlags);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->Get("output"), "table");
  EXPECT_TRUE(a->GetBool("dry_run"));
}

TEST(ArgsTest, DoubleDashEndsFlags) {
  absl::StatusOr<ParsedArgs> a = ParseArgs({"push", "--", "--reason"}, kFlags);
  ASSERT_TRUE(a.ok());
  EXPECT_THAT(a->positional, ElementsAre("push", "--reason"));
  EXPECT_FALSE(a->Has("reason"));
}

TEST(ArgsTest, SingleDashIsPositional) {
  absl::StatusOr<ParsedArgs> a = ParseArgs({"policy", "validate", "-"}, kFlags);
  ASSERT_TRUE(a.ok());
  EXPECT_THAT(a->positional, ElementsAre("policy", "validate", "-"));
}

TEST(ArgsTest, ErrorsNameTheArgument) {
  absl::StatusOr<ParsedArgs> a = ParseArgs({"hosts", "--no_such_flag=1"}, kFlags);
  ASSERT_FALSE(a.ok());
  EXPECT_THAT(a.status().message(), HasSubstr("--no_such_flag"));
  a = ParseArgs({"-x"}, kFlags);
  ASSERT_FALSE(a.ok());
  EXPECT_THAT(a.status().message(), HasSubstr("-x"));
  a = ParseArgs({"hosts", "--reason"}, kFlags);
  ASSERT_FALSE(a.ok());
  EXPECT_THAT(a.status().message(), HasSubstr("--reason needs a value"));
  a = ParseArgs({"--dry-run=maybe"}, kFlags);
  ASSERT_FALSE(a.ok());
  EXPECT_THAT(a.status().message(), HasSubstr("want true or false"));
}

}  // namespace
}  // namespace rocetune::cli
