#include "agent/host/ofed_sysfs_cc_store.h"

#include <filesystem>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/cc_params.h"
#include "tests/testing/test_support.h"

namespace rocetune {
namespace {

using ::rocetune::testing::FixtureTree;
using ::testing::HasSubstr;

class OfedSysfsCcStoreTest : public ::testing::Test {
 protected:
  std::string Rp(const std::string& ifname, const std::string& file) const {
    return tree_.sys() + "/class/net/" + ifname + "/ecn/roce_rp/" + file;
  }
  std::string Np(const std::string& ifname, const std::string& file) const {
    return tree_.sys() + "/class/net/" + ifname + "/ecn/roce_np/" + file;
  }
  FixtureTree tree_{"mlx5_ofed"};
  OfedSysfsCcStore store_{tree_.sys()};
};

TEST_F(OfedSysfsCcStoreTest, ReadsFirmwareDefaultsAndMasks) {
  EXPECT_EQ(store_.layout(), "ofed_sysfs");
  absl::StatusOr<v1::DeviceParameters> p = store_.Read("mlx5_0");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->device(), "mlx5_0");
  int ofed_params = 0;
  for (const CcParamSpec& spec : CcParamTable()) {
    if (spec.ofed_file == nullptr) {
      EXPECT_EQ(p->dcqcn().count(spec.name), 0u) << spec.name;
      continue;
    }
    ++ofed_params;
    ASSERT_EQ(p->dcqcn().count(spec.name), 1u) << spec.name;
    EXPECT_EQ(p->dcqcn().at(spec.name), *spec.mlx5_default) << spec.name;
  }
  EXPECT_EQ(p->dcqcn_size(), ofed_params);
  EXPECT_EQ(p->rp_enable_mask(), 255u);
  EXPECT_EQ(p->np_enable_mask(), 255u);
  EXPECT_FALSE(p->has_pfc());
}

TEST_F(OfedSysfsCcStoreTest, WritesOneDeviceOnly) {
  ASSERT_TRUE(store_.Write("mlx5_0", "rpg_ai_rate", 20).ok());
  ASSERT_TRUE(store_.Write("mlx5_0", "cnp_dscp", 26).ok());
  EXPECT_EQ(FixtureTree::ReadFile(Rp("ens1f0np0", "rpg_ai_rate")), "20\n");
  EXPECT_EQ(FixtureTree::ReadFile(Np("ens1f0np0", "cnp_dscp")), "26\n");
  EXPECT_EQ(FixtureTree::ReadFile(Rp("ens1f1np1", "rpg_ai_rate")), "5\n");
  absl::StatusOr<v1::DeviceParameters> p = store_.Read("mlx5_0");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->dcqcn().at("rpg_ai_rate"), 20);
  EXPECT_EQ(p->dcqcn().at("cnp_dscp"), 26);
  absl::StatusOr<v1::DeviceParameters> other = store_.Read("mlx5_1");
  ASSERT_TRUE(other.ok());
  EXPECT_EQ(other->dcqcn().at("rpg_ai_rate"), 5);
}

TEST_F(OfedSysfsCcStoreTest, WritesPerPriorityEnable) {
  ASSERT_TRUE(store_.Write("mlx5_1", kRpEnableMask, 0x28).ok());
  ASSERT_TRUE(store_.Write("mlx5_1", kNpEnableMask, 0x08).ok());
  for (int prio = 0; prio < 8; ++prio) {
    EXPECT_EQ(FixtureTree::ReadFile(Rp("ens1f1np1", "enable/" + std::to_string(prio))),
              (prio == 3 || prio == 5) ? "1\n" : "0\n")
        << prio;
  }
  absl::StatusOr<v1::DeviceParameters> p = store_.Read("mlx5_1");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->rp_enable_mask(), 0x28u);
  EXPECT_EQ(p->np_enable_mask(), 0x08u);
  EXPECT_EQ(store_.Write("mlx5_1", kRpEnableMask, 256).code(), absl::StatusCode::kInvalidArgument);
}

class RecordingIo : public ParamFileIo {
 public:
  absl::StatusOr<std::string> Read(const std::string& path) override {
    return ParamFileIo::Real()->Read(path);
  }
  absl::Status Write(const std::string& path, const std::string& data) override {
    writes.push_back(path);
    return ParamFileIo::Real()->Write(path, data);
  }
  std::vector<std::string> writes;
};

TEST_F(OfedSysfsCcStoreTest, MaskWritesOnlyChangedPriorities) {
  RecordingIo io;
  OfedSysfsCcStore store(tree_.sys(), &io);
  ASSERT_TRUE(store.Write("mlx5_0", kNpEnableMask, 0xff).ok());
  EXPECT_TRUE(io.writes.empty());
  ASSERT_TRUE(store.Write("mlx5_0", kNpEnableMask, 0xfe).ok());
  EXPECT_THAT(io.writes, ::testing::ElementsAre(Np("ens1f0np0", "enable/0")));
  EXPECT_EQ(store.Read("mlx5_0")->np_enable_mask(), 0xfeu);
}

TEST_F(OfedSysfsCcStoreTest, RefusesParametersTheLayoutLacks) {
  absl::Status st = store_.Write("mlx5_0", "cnp_prio_mode", 0);
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(st.message(), HasSubstr("cnp_prio_mode"));
  EXPECT_EQ(store_.Write("mlx5_0", "nope", 1).code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(OfedSysfsCcStoreTest, MissingDeviceIsUnavailable) {
  absl::StatusOr<v1::DeviceParameters> p = store_.Read("mlx5_7");
  EXPECT_EQ(p.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(p.status().message(), HasSubstr("mlx5_7"));
  EXPECT_EQ(store_.Write("mlx5_7", "rpg_ai_rate", 5).code(), absl::StatusCode::kUnavailable);
}

TEST_F(OfedSysfsCcStoreTest, GarbledFileFailsReadNamingPath) {
  FixtureTree::WriteFile(Rp("ens1f0np0", "rpg_gd"), "eleven\n");
  absl::StatusOr<v1::DeviceParameters> p = store_.Read("mlx5_0");
  EXPECT_EQ(p.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(p.status().message(), HasSubstr(Rp("ens1f0np0", "rpg_gd")));
}

TEST_F(OfedSysfsCcStoreTest, WriteFailureNamesParameterPathAndErrno) {
  const std::string path = Rp("ens1f0np0", "rpg_hai_rate");
  std::filesystem::remove(path);
  std::filesystem::create_directory(path);
  absl::Status st = store_.Write("mlx5_0", "rpg_hai_rate", 100);
  ASSERT_FALSE(st.ok());
  EXPECT_THAT(st.message(), HasSubstr("mlx5_0: rpg_hai_rate=100"));
  EXPECT_THAT(st.message(), HasSubstr(path));
  EXPECT_THAT(st.message(), HasSubstr("Is a directory"));
}

TEST(OfedSysfsCcStoreUpstreamTest, UpstreamHostHasNoEcnDir) {
  FixtureTree tree("mlx5_upstream");
  OfedSysfsCcStore store(tree.sys());
  absl::StatusOr<v1::DeviceParameters> p = store.Read("mlx5_0");
  EXPECT_EQ(p.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(p.status().message(), HasSubstr("ens1f0np0/ecn"));
}

}  // namespace
}  // namespace rocetune
