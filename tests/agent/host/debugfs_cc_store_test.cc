#include "agent/host/debugfs_cc_store.h"

#include <string>

#include "agent/host/cc_store_detect.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/cc_params.h"
#include "tests/testing/test_support.h"

namespace rocetune {
namespace {

using ::rocetune::testing::FixtureTree;
using ::testing::HasSubstr;

class DebugfsCcStoreTest : public ::testing::Test {
 protected:
  std::string File(const std::string& bdf, const std::string& name) const {
    return tree_.debug() + "/mlx5/" + bdf + "/cc_params/" + name;
  }
  FixtureTree tree_{"mlx5_upstream"};
  DebugfsCcStore store_{tree_.sys(), tree_.debug()};
};

TEST_F(DebugfsCcStoreTest, ReadsUpstreamNamesAsCanonical) {
  EXPECT_EQ(store_.layout(), "debugfs");
  absl::StatusOr<v1::DeviceParameters> p = store_.Read("mlx5_1");
  ASSERT_TRUE(p.ok()) << p.status();
  for (const CcParamSpec& spec : CcParamTable()) {
    if (spec.mlx5_default.has_value()) {
      ASSERT_EQ(p->dcqcn().count(spec.name), 1u) << spec.name;
      EXPECT_EQ(p->dcqcn().at(spec.name), *spec.mlx5_default) << spec.name;
    }
  }
  EXPECT_EQ(p->dcqcn().at("cnp_prio_mode"), 0);
  // rtt_resp_dscp* are absent on this (older) kernel: skipped, not an error.
  EXPECT_EQ(p->dcqcn().count("rtt_resp_dscp"), 0u);
  EXPECT_FALSE(p->has_rp_enable_mask());
  EXPECT_FALSE(p->has_np_enable_mask());
}

TEST_F(DebugfsCcStoreTest, WritesByBdf) {
  ASSERT_TRUE(store_.Write("mlx5_1", "clamp_tgt_rate_after_time_inc", 0).ok());
  ASSERT_TRUE(store_.Write("mlx5_1", "cnp_802p_prio", 3).ok());
  EXPECT_EQ(FixtureTree::ReadFile(File("0000:3b:00.1", "rp_clamp_tgt_rate_ati")), "0\n");
  EXPECT_EQ(FixtureTree::ReadFile(File("0000:3b:00.1", "np_cnp_prio")), "3\n");
  EXPECT_EQ(FixtureTree::ReadFile(File("0000:3b:00.0", "np_cnp_prio")), "6\n");
  absl::StatusOr<v1::DeviceParameters> p = store_.Read("mlx5_1");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->dcqcn().at("cnp_802p_prio"), 3);
}

TEST_F(DebugfsCcStoreTest, MasksAreNotSupported) {
  absl::Status st = store_.Write("mlx5_0", kRpEnableMask, 8);
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(st.message(), HasSubstr("debugfs"));
}

TEST_F(DebugfsCcStoreTest, MissingDeviceIsUnavailable) {
  EXPECT_EQ(store_.Read("mlx5_9").status().code(), absl::StatusCode::kUnavailable);
  DebugfsCcStore no_debugfs(tree_.sys(), tree_.root() + "/no_debugfs");
  absl::StatusOr<v1::DeviceParameters> p = no_debugfs.Read("mlx5_0");
  EXPECT_EQ(p.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(p.status().message(), HasSubstr("0000:3b:00.0"));
}

TEST(CcStoreDetectTest, PicksLayoutPerDevice) {
  FixtureTree ofed("mlx5_ofed");
  FixtureTree upstream("mlx5_upstream");
  EXPECT_EQ(DetectCcParamLayout(ofed.sys(), ofed.debug(), "mlx5_0"), "ofed_sysfs");
  EXPECT_EQ(DetectCcParamLayout(upstream.sys(), upstream.debug(), "mlx5_1"), "debugfs");
  EXPECT_EQ(DetectCcParamLayout(upstream.sys(), upstream.debug(), "mlx5_5"), "none");
  absl::StatusOr<std::unique_ptr<CcParamStore>> a =
      DetectCcParamStore(ofed.sys(), ofed.debug(), "mlx5_1");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ((*a)->layout(), "ofed_sysfs");
  absl::StatusOr<std::unique_ptr<CcParamStore>> b =
      DetectCcParamStore(upstream.sys(), upstream.debug(), "mlx5_0");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ((*b)->layout(), "debugfs");
  absl::StatusOr<std::unique_ptr<CcParamStore>> none =
      DetectCcParamStore(upstream.sys(), upstream.root() + "/nothing", "mlx5_0");
  EXPECT_EQ(none.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(none.status().message(), HasSubstr("mlx5_0"));
}

}  // namespace
}  // namespace rocetune
