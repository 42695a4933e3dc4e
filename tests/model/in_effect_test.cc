// model/in_effect.h: which applied parameters cannot act as the device is
// configured (issue 25 item 8).
#include "model/in_effect.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"

namespace rocetune {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

v1::DeviceParameters Wanted() {
  v1::DeviceParameters d;
  d.set_device("mlx5_0");
  (*d.mutable_dcqcn())["rpg_time_reset"] = 300;       // reaction point
  (*d.mutable_dcqcn())["rpg_ai_rate"] = 5;            // reaction point
  (*d.mutable_dcqcn())["min_time_between_cnps"] = 4;  // notification point
  return d;
}

v1::DeviceParameters Held(uint32_t rp, uint32_t np, int pfc = -1) {
  v1::DeviceParameters d = Wanted();
  d.set_rp_enable_mask(rp);
  d.set_np_enable_mask(np);
  if (pfc >= 0) d.mutable_pfc()->set_enable_mask(static_cast<uint32_t>(pfc));
  return d;
}

std::vector<std::string> Names(const std::vector<v1::ParameterNote>& notes) {
  std::vector<std::string> out;
  for (const v1::ParameterNote& n : notes)
    out.push_back(absl::StrCat(n.device(), "/", n.parameter()));
  return out;
}

TEST(InEffectTest, EverythingEnabledIsInEffect) {
  EXPECT_THAT(Names(NotInEffect(Wanted(), Held(0xff, 0xff, 0x08))), IsEmpty());
}

TEST(InEffectTest, AReactionPointOffOnTheLosslessPriorityLeavesItsValuesWithoutEffect) {
  // DCQCN on priorities 0-2 and 4-7, PFC (the RoCE traffic) on 3.
  const auto notes = NotInEffect(Wanted(), Held(0xf7, 0xff, 0x08));
  EXPECT_THAT(Names(notes), ElementsAre("mlx5_0/rpg_ai_rate", "mlx5_0/rpg_time_reset"));
  EXPECT_EQ(notes[0].reason(),
            "the DCQCN reaction point is off on the lossless priorities 3 (rp_enable_mask 0xf7, "
            "pfc enable_mask 0x08)");
  // Enabled on one of two lossless priorities: in effect there.
  EXPECT_THAT(Names(NotInEffect(Wanted(), Held(0x10, 0xff, 0x18))), IsEmpty());
}

TEST(InEffectTest, WithoutAKnownLosslessPriorityOnlyAnAllOffMaskCounts) {
  EXPECT_THAT(Names(NotInEffect(Wanted(), Held(0x08, 0xff))), IsEmpty());
  EXPECT_THAT(Names(NotInEffect(Wanted(), Held(0x08, 0xff, 0))),
              IsEmpty());  // PFC off: any priority
  const auto notes = NotInEffect(Wanted(), Held(0xff, 0x00));
  EXPECT_THAT(Names(notes), ElementsAre("mlx5_0/min_time_between_cnps"));
  EXPECT_EQ(notes[0].reason(),
            "the DCQCN notification point is off on every priority (np_enable_mask 0x00)");
}

TEST(InEffectTest, AMaskTheDeviceDoesNotExposeSaysNothing) {
  v1::DeviceParameters held = Wanted();  // debugfs: no per-priority enable
  held.mutable_pfc()->set_enable_mask(0x08);
  EXPECT_THAT(Names(NotInEffect(Wanted(), held)), IsEmpty());
}

TEST(InEffectTest, PfcSettingsWithPfcOffEverywhereHaveNoEffect) {
  v1::DeviceParameters wanted;
  wanted.set_device("mlx5_1");
  wanted.mutable_pfc()->set_enable_mask(0);
  wanted.mutable_pfc()->set_delay(7);
  wanted.mutable_pfc()->set_prevention_timeout_ms(100);
  v1::DeviceParameters held = wanted;
  const auto notes = NotInEffect(wanted, held);
  EXPECT_THAT(Names(notes), ElementsAre("mlx5_1/pfc.delay", "mlx5_1/pfc.prevention_timeout_ms"));
  EXPECT_EQ(notes[0].reason(), "PFC is off on every priority (pfc enable_mask 0x00)");
  held.mutable_pfc()->set_enable_mask(0x08);
  EXPECT_THAT(Names(NotInEffect(wanted, held)), IsEmpty());
}

TEST(InEffectTest, ASetIsCheckedDeviceByDevice) {
  v1::ParameterSet wanted, held;
  *wanted.add_devices() = Wanted();
  v1::DeviceParameters other = Wanted();
  other.set_device("mlx5_1");
  *wanted.add_devices() = other;
  *held.add_devices() = Held(0xff, 0xff, 0x08);
  v1::DeviceParameters off = Held(0x00, 0xff, 0x08);
  off.set_device("mlx5_1");
  *held.add_devices() = off;
  EXPECT_THAT(Names(NotInEffect(wanted, held)),
              ElementsAre("mlx5_1/rpg_ai_rate", "mlx5_1/rpg_time_reset"));
  // A device the read-back lacks is not judged.
  held.mutable_devices()->RemoveLast();
  EXPECT_THAT(Names(NotInEffect(wanted, held)), IsEmpty());
}

// The enable that decides each kind of value: a change that sets it is
// judged by what it switches, not left out as "not in effect".
TEST(InEffectTest, EachValueHasTheEnableThatDecidesIt) {
  EXPECT_STREQ(DecidingKnob("rpg_time_reset"), "rp_enable_mask");
  EXPECT_STREQ(DecidingKnob("min_time_between_cnps"), "np_enable_mask");
  EXPECT_STREQ(DecidingKnob("pfc.delay"), "pfc.enable_mask");
  EXPECT_STREQ(DecidingKnob("rp_enable_mask"), "");
  EXPECT_STREQ(DecidingKnob("no_such_knob"), "");
}

}  // namespace
}  // namespace rocetune
