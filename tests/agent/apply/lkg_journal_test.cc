#include "agent/apply/lkg_journal.h"

#include <stdlib.h>

#include <filesystem>
#include <string>

#include "gmock/gmock.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "tests/testing/test_support.h"

namespace rocetune {
namespace {

using ::rocetune::testing::FixtureTree;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

class LkgJournalTest : public ::testing::Test {
 protected:
  LkgJournalTest() : root_(tmp_.path()), dir_(root_ + "/state") {}
  ::rocetune::testing::TempDir tmp_{"lkg"};

  static v1::ParameterSet Set(int64_t ai_rate) {
    v1::ParameterSet set;
    v1::DeviceParameters* d = set.add_devices();
    d->set_device("mlx5_0");
    (*d->mutable_dcqcn())["rpg_ai_rate"] = ai_rate;
    (*d->mutable_dcqcn())["cnp_dscp"] = 48;
    d->set_rp_enable_mask(0x08);
    d->mutable_pfc()->set_enable_mask(0x08);
    d->mutable_pfc()->set_delay(7);
    v1::DeviceParameters* e = set.add_devices();
    e->set_device("mlx5_1");
    (*e->mutable_dcqcn())["rpg_ai_rate"] = ai_rate;
    return set;
  }

  std::string root_;
  std::string dir_;
};

TEST_F(LkgJournalTest, EmptyStateDirHasNoEntry) {
  LkgJournal j(dir_);
  EXPECT_TRUE(j.Load().ok());
  EXPECT_FALSE(j.Get().has_value());
  EXPECT_THAT(j.Drift(Set(5)), IsEmpty());
}

TEST_F(LkgJournalTest, SaveThenReloadInANewProcess) {
  LkgJournal j(dir_);
  ASSERT_TRUE(j.Save("v7", Set(20)).ok());
  EXPECT_EQ(j.path(), dir_ + "/last_known_good.txtpb");
  EXPECT_FALSE(std::filesystem::exists(j.path() + ".tmp"));
  EXPECT_THAT(FixtureTree::ReadFile(j.path()), HasSubstr("version: \"v7\""));

  LkgJournal reloaded(dir_);
  ASSERT_TRUE(reloaded.Load().ok());
  std::optional<LkgEntry> e = reloaded.Get();
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->version, "v7");
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(e->parameters, Set(20)));

  ASSERT_TRUE(j.Save("v8", Set(30)).ok());
  LkgJournal again(dir_);
  ASSERT_TRUE(again.Load().ok());
  EXPECT_EQ(again.Get()->version, "v8");
}

TEST_F(LkgJournalTest, FailedSaveKeepsThePreviousSet) {
  LkgJournal j(dir_);
  ASSERT_TRUE(j.Save("v1", Set(5)).ok());
  const std::string before = FixtureTree::ReadFile(j.path());
  std::filesystem::create_directory(j.path() + ".tmp");  // the temp file cannot be opened
  absl::Status st = j.Save("v2", Set(20));
  ASSERT_FALSE(st.ok());
  EXPECT_THAT(st.message(), HasSubstr(j.path() + ".tmp"));
  EXPECT_THAT(st.message(), HasSubstr("Is a directory"));
  EXPECT_EQ(FixtureTree::ReadFile(j.path()), before);
  EXPECT_EQ(j.Get()->version, "v1");
}

TEST_F(LkgJournalTest, UncreatableStateDirIsAnError) {
  std::filesystem::create_directories(root_);
  FixtureTree::WriteFile(root_ + "/file", "x");
  LkgJournal j(root_ + "/file/state");
  absl::Status st = j.Save("v1", Set(5));
  EXPECT_FALSE(st.ok());
  EXPECT_THAT(st.message(), HasSubstr(root_ + "/file/state"));
  EXPECT_FALSE(j.Get().has_value());
}

TEST_F(LkgJournalTest, CorruptFileIsDataLossAndKeepsMemory) {
  LkgJournal j(dir_);
  ASSERT_TRUE(j.Save("v1", Set(5)).ok());
  FixtureTree::WriteFile(j.path(), "version: \"v2\"\nparameters { devices { dcqcn: oops } }\n");
  absl::Status st = j.Load();
  EXPECT_EQ(st.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(st.message(), HasSubstr(j.path()));
  EXPECT_THAT(st.message(), HasSubstr("line 2"));
  EXPECT_EQ(j.Get()->version, "v1");
  FixtureTree::WriteFile(j.path(), "parameters {}\n");
  EXPECT_EQ(j.Load().code(), absl::StatusCode::kDataLoss);
}

TEST_F(LkgJournalTest, TheProvisionalRecordIsKeptApartFromLastKnownGood) {
  LkgJournal j(dir_);
  auto none = j.LoadProvisional();
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_FALSE(none->has_value());
  EXPECT_TRUE(j.ClearProvisional().ok()) << "nothing to clear is not an error";
  ASSERT_TRUE(j.Save("4", Set(10)).ok());
  ASSERT_TRUE(j.SaveProvisional("5", 120, Set(20)).ok());
  LkgJournal reloaded(dir_);
  ASSERT_TRUE(reloaded.Load().ok());
  EXPECT_EQ(reloaded.Get()->version, "4") << "a provisional set is never last-known-good";
  auto rec = reloaded.LoadProvisional();
  ASSERT_TRUE(rec.ok()) << rec.status();
  ASSERT_TRUE(rec->has_value());
  EXPECT_EQ((*rec)->version(), "5");
  EXPECT_EQ((*rec)->provisional_lease_seconds(), 120u);
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals((*rec)->parameters(), Set(20)));
  ASSERT_TRUE(reloaded.ClearProvisional().ok());
  rec = reloaded.LoadProvisional();
  ASSERT_TRUE(rec.ok());
  EXPECT_FALSE(rec->has_value());
}

TEST_F(LkgJournalTest, ACorruptProvisionalRecordIsDataLossNamingItsPath) {
  LkgJournal j(dir_);
  ASSERT_TRUE(j.SaveProvisional("5", 120, Set(20)).ok());
  FixtureTree::WriteFile(dir_ + "/provisional.txtpb", "version: \"5\" garbage {");
  auto rec = j.LoadProvisional();
  EXPECT_EQ(rec.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(std::string(rec.status().message()), HasSubstr(dir_ + "/provisional.txtpb"));
  FixtureTree::WriteFile(dir_ + "/provisional.txtpb", "version: \"5\"");
  rec = j.LoadProvisional();
  EXPECT_EQ(rec.status().code(), absl::StatusCode::kDataLoss) << "a record without a lease";
}

TEST_F(LkgJournalTest, DriftListsEveryDifference) {
  LkgJournal j(dir_);
  ASSERT_TRUE(j.Save("v3", Set(5)).ok());
  EXPECT_THAT(j.Drift(Set(5)), IsEmpty());
  v1::ParameterSet cur = Set(5);
  v1::DeviceParameters* d = cur.mutable_devices(0);
  (*d->mutable_dcqcn())["rpg_ai_rate"] = 10;
  (*d->mutable_dcqcn())["rpg_hai_rate"] = 99;  // not in the LKG set: not compared
  d->mutable_dcqcn()->erase("cnp_dscp");
  d->set_rp_enable_mask(0xff);
  d->mutable_pfc()->set_enable_mask(0);
  cur.mutable_devices()->RemoveLast();
  EXPECT_THAT(j.Drift(cur), ElementsAre("mlx5_0/cnp_dscp: missing (last-known-good 48)",
                                        "mlx5_0/rpg_ai_rate: 10 (last-known-good 5)",
                                        "mlx5_0/rp_enable_mask: 255 (last-known-good 8)",
                                        "mlx5_0/pfc.enable_mask: 0 (last-known-good 8)",
                                        "mlx5_1: device missing (last-known-good version v3)"));
}

}  // namespace
}  // namespace rocetune
