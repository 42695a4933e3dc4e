#include "agent/apply/apply_intent.h"

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "gtest/gtest.h"
#include "tests/testing/test_support.h"

namespace rocetune {
namespace {

v1::ParameterSet Set(int64_t ai_rate, int64_t hai_rate) {
  v1::ParameterSet set;
  v1::DeviceParameters* d = set.add_devices();
  d->set_device("mlx5_0");
  (*d->mutable_dcqcn())["rpg_ai_rate"] = ai_rate;
  (*d->mutable_dcqcn())["rpg_hai_rate"] = hai_rate;
  return set;
}

class ApplyIntentTest : public ::testing::Test {
 protected:
  ::rocetune::testing::TempDir tmp_{"intent"};
  const std::string dir_ = tmp_.path();
};

TEST_F(ApplyIntentTest, BeginLoadEndRoundTrip) {
  ApplyIntent intent(dir_ + "/state");
  auto none = intent.Load();
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
  ASSERT_TRUE(intent.Begin("3", Set(5, 50), "4", Set(10, 60)).ok());
  auto loaded = ApplyIntent(dir_ + "/state").Load();
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  ASSERT_TRUE(loaded->has_value());
  EXPECT_EQ((*loaded)->previous_version(), "3");
  EXPECT_EQ((*loaded)->pushed_version(), "4");
  EXPECT_EQ((*loaded)->target().devices(0).dcqcn().at("rpg_ai_rate"), 10);
  ASSERT_TRUE(intent.End().ok());
  EXPECT_FALSE(std::filesystem::exists(intent.path()));
  EXPECT_TRUE(intent.End().ok()) << "ending twice is fine";
}

TEST_F(ApplyIntentTest, CorruptRecordIsDataLoss) {
  ApplyIntent intent(dir_);
  std::ofstream(intent.path()) << "target { devices { device: ";
  auto loaded = intent.Load();
  EXPECT_EQ(loaded.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(loaded.status().message().find(intent.path()), std::string::npos);
}

TEST_F(ApplyIntentTest, ClassifiesOldNewAndMixed) {
  v1::HostTarget t;
  *t.mutable_previous() = Set(5, 50);
  *t.mutable_target() = Set(10, 60);
  EXPECT_EQ(ApplyIntent::Classify(t, Set(10, 60)), IntentOutcome::kNew);
  EXPECT_EQ(ApplyIntent::Classify(t, Set(5, 50)), IntentOutcome::kOld);
  EXPECT_EQ(ApplyIntent::Classify(t, Set(10, 50)), IntentOutcome::kMixed);
  EXPECT_EQ(ApplyIntent::Classify(t, Set(7, 50)), IntentOutcome::kMixed) << "neither value";
  EXPECT_EQ(ApplyIntent::Classify(t, v1::ParameterSet()), IntentOutcome::kMixed)
      << "a device that cannot be read is not proof of either set";
  // A value both sets share counts for both.
  *t.mutable_target() = Set(10, 50);
  EXPECT_EQ(ApplyIntent::Classify(t, Set(5, 50)), IntentOutcome::kOld);
  EXPECT_EQ(ApplyIntent::Classify(t, Set(10, 50)), IntentOutcome::kNew);
}

}  // namespace
}  // namespace rocetune
