#include "agent/apply/applier.h"

#include <fcntl.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <string>
#include <vector>

#include "agent/host/dcbnl_pfc_config.h"
#include "agent/host/debugfs_cc_store.h"
#include "agent/host/ofed_sysfs_cc_store.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/cc_params.h"
#include "tests/agent/apply/apply_test_seams.h"
#include "tests/testing/test_support.h"

namespace rocetune {
namespace {

using ::rocetune::testing::FixtureTree;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;
using testing_util::FakePfcConfig;
using testing_util::FaultyFileIo;
using testing_util::TreeContents;

class ApplierTest : public ::testing::Test {
 protected:
  ApplierTest() {
    PfcState s;
    s.pfc_cap = 8;
    s.enable_mask = 0x00;
    s.delay = 7;
    s.prevention_timeout_ms = 8000;
    pfc_.states["ens1f0np0"] = s;
    pfc_.states["ens1f1np1"] = s;
  }

  std::string NetDir() const { return tree_.sys() + "/class/net"; }
  std::string Rp(const std::string& ifname, const std::string& f) const {
    return NetDir() + "/" + ifname + "/ecn/roce_rp/" + f;
  }
  std::string Np(const std::string& ifname, const std::string& f) const {
    return NetDir() + "/" + ifname + "/ecn/roce_np/" + f;
  }

  static v1::DeviceParameters Dev(const std::string& name, std::map<std::string, int64_t> values) {
    v1::DeviceParameters d;
    d.set_device(name);
    for (const auto& [k, v] : values) (*d.mutable_dcqcn())[k] = v;
    return d;
  }

  std::vector<std::string> log_;
  FixtureTree tree_{"mlx5_ofed"};
  FaultyFileIo io_{&log_};
  OfedSysfsCcStore store_{tree_.sys(), &io_};
  FakePfcConfig pfc_{&log_};
  Applier applier_{
      {{"mlx5_0", {&store_, &pfc_, "ens1f0np0"}}, {"mlx5_1", {&store_, &pfc_, "ens1f1np1"}}}};
};

TEST_F(ApplierTest, WritesDcqcnThenMasksThenPfcAndReturnsReadBack) {
  v1::ParameterSet set;
  v1::DeviceParameters* a = set.add_devices();
  *a = Dev("mlx5_0", {{"rpg_ai_rate", 20}, {"cnp_dscp", 26}});
  a->set_rp_enable_mask(0x08);
  a->mutable_pfc()->set_enable_mask(0x08);
  v1::DeviceParameters* b = set.add_devices();
  *b = Dev("mlx5_1", {{"rpg_ai_rate", 10}});
  b->set_np_enable_mask(0x08);

  absl::StatusOr<ApplyResult> r = applier_.Apply(set);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->writes, 6);  // 3 values, 2 masks, 1 PFC
  ASSERT_EQ(r->applied.devices_size(), 2);
  EXPECT_EQ(r->applied.devices(0).dcqcn().at("rpg_ai_rate"), 20);
  EXPECT_EQ(r->applied.devices(0).dcqcn().at("cnp_dscp"), 26);
  EXPECT_EQ(r->applied.devices(0).dcqcn().at("rpg_hai_rate"), 50);  // untouched, read back
  EXPECT_EQ(r->applied.devices(0).rp_enable_mask(), 0x08u);
  EXPECT_EQ(r->applied.devices(0).pfc().enable_mask(), 0x08u);
  EXPECT_EQ(r->applied.devices(1).np_enable_mask(), 0x08u);
  EXPECT_FALSE(r->applied.devices(1).has_pfc());
  ASSERT_EQ(r->disruptive.size(), 1u);
  EXPECT_THAT(r->disruptive[0], HasSubstr("mlx5_0/ens1f0np0: pfc enable_mask 0x00 -> 0x08"));
  EXPECT_EQ(FixtureTree::ReadFile(Rp("ens1f0np0", "rpg_ai_rate")), "20\n");
  EXPECT_EQ(FixtureTree::ReadFile(Rp("ens1f1np1", "rpg_ai_rate")), "10\n");
  EXPECT_EQ(FixtureTree::ReadFile(Np("ens1f1np1", "enable/3")), "1\n");
  EXPECT_EQ(FixtureTree::ReadFile(Np("ens1f1np1", "enable/2")), "0\n");

  // Order: every DCQCN value before any enable file, PFC last.
  auto is_mask = [](const std::string& p) { return p.find("/enable/") != std::string::npos; };
  auto first_mask = std::find_if(log_.begin(), log_.end(), is_mask);
  ASSERT_NE(first_mask, log_.end());
  EXPECT_EQ(
      std::count_if(first_mask, log_.end(),
                    [&](const std::string& p) { return !is_mask(p) && p.rfind("pfc:", 0) != 0; }),
      0);
  EXPECT_EQ(std::count_if(log_.begin(), first_mask, is_mask), 0);
  EXPECT_EQ(log_.back(), "pfc:ens1f0np0");
}

TEST_F(ApplierTest, UnchangedValuesAreNotRewritten) {
  v1::ParameterSet set;
  *set.add_devices() = Dev("mlx5_0", {{"rpg_ai_rate", 5}, {"cnp_802p_prio", 6}});
  set.mutable_devices(0)->set_rp_enable_mask(255);
  absl::StatusOr<ApplyResult> r = applier_.Apply(set);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->writes, 0);
  EXPECT_THAT(log_, IsEmpty());
}

TEST_F(ApplierTest, OutOfRangeRejectsWholeSetAndWritesNothing) {
  const auto before = TreeContents(NetDir());
  v1::ParameterSet set;
  *set.add_devices() = Dev("mlx5_0", {{"rpg_ai_rate", 20}, {"cnp_dscp", 64}});
  *set.add_devices() = Dev("mlx5_1", {{"rpg_gd", 12}});
  absl::StatusOr<ApplyResult> r = applier_.Apply(set);
  ASSERT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("nothing written"));
  EXPECT_THAT(r.status().message(), HasSubstr("mlx5_0: cnp_dscp=64 outside [0, 63]"));
  EXPECT_THAT(r.status().message(), HasSubstr("mlx5_1: rpg_gd=12 outside [10, 11]"));
  EXPECT_THAT(log_, IsEmpty());
  EXPECT_EQ(TreeContents(NetDir()), before);
}

// The link bounds rates: nothing above the port speed, min under max; each
// violation names the device and the parameter, and nothing is written.
TEST_F(ApplierTest, RatesAboveThePortSpeedOrMinAboveMaxAreRefused) {
  Applier applier({{"mlx5_0", {&store_, &pfc_, "ens1f0np0", 100000}}});
  const auto before = TreeContents(NetDir());
  v1::ParameterSet set;
  *set.add_devices() = Dev("mlx5_0", {{"rpg_ai_rate", 999999999}, {"rpg_min_rate", 200000000}});
  absl::StatusOr<ApplyResult> r = applier.Apply(set);
  ASSERT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("nothing written"));
  EXPECT_THAT(r.status().message(),
              HasSubstr("mlx5_0: rpg_ai_rate 999999999 Mb/s exceeds the port speed 100000 Mb/s"));
  EXPECT_THAT(r.status().message(), HasSubstr("mlx5_0: rpg_min_rate 200000000 Mb/s exceeds"));
  EXPECT_THAT(log_, IsEmpty());
  set.Clear();
  *set.add_devices() = Dev("mlx5_0", {{"rpg_max_rate", 40000}, {"rpg_min_rate", 50000}});
  r = applier.Apply(set);
  ASSERT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(),
              HasSubstr("mlx5_0: rpg_min_rate 50000 Mb/s above rpg_max_rate 40000 Mb/s"));
  EXPECT_THAT(log_, IsEmpty());
  EXPECT_EQ(TreeContents(NetDir()), before);
  // The pair is checked against what the device holds for the other one.
  set.Clear();
  *set.add_devices() = Dev("mlx5_0", {{"rpg_max_rate", 40000}});
  ASSERT_TRUE(applier.Apply(set).ok());
  set.Clear();
  *set.add_devices() = Dev("mlx5_0", {{"rpg_min_rate", 40001}});
  EXPECT_EQ(applier.Apply(set).status().code(), absl::StatusCode::kInvalidArgument);
  set.Clear();
  *set.add_devices() = Dev("mlx5_0", {{"rpg_min_rate", 40000}});
  EXPECT_TRUE(applier.Apply(set).ok());
}

// Firmware may hold a value outside our hard range: re-applying it (a
// last-known-good set read from the NIC) is fine, proposing it is not.
TEST_F(ApplierTest, OutOfRangeValueTheDeviceAlreadyHoldsIsAccepted) {
  FixtureTree::WriteFile(Rp("ens1f0np0", "rpg_gd"), "7\n");
  v1::ParameterSet set;
  *set.add_devices() = Dev("mlx5_0", {{"rpg_gd", 7}, {"rpg_ai_rate", 20}});
  absl::StatusOr<ApplyResult> r = applier_.Apply(set);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->writes, 1);
  EXPECT_EQ(r->applied.devices(0).dcqcn().at("rpg_gd"), 7);

  log_.clear();
  const auto before = TreeContents(NetDir());
  set.mutable_devices(0)->set_device("mlx5_1");  // holds 11
  r = applier_.Apply(set);
  ASSERT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("mlx5_1: rpg_gd=7 outside [10, 11]"));
  EXPECT_THAT(log_, IsEmpty());
  EXPECT_EQ(TreeContents(NetDir()), before);
}

TEST_F(ApplierTest, UnknownDeviceOrMissingParameterWritesNothing) {
  v1::ParameterSet set;
  *set.add_devices() = Dev("mlx5_0", {{"rpg_ai_rate", 20}});
  *set.add_devices() = Dev("mlx5_9", {{"rpg_ai_rate", 20}});
  absl::StatusOr<ApplyResult> r = applier_.Apply(set);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("mlx5_9: unknown device"));

  set.mutable_devices()->RemoveLast();
  (*set.mutable_devices(0)->mutable_dcqcn())["cnp_prio_mode"] = 0;  // debugfs only
  r = applier_.Apply(set);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(r.status().message(),
              HasSubstr("mlx5_0: parameter cnp_prio_mode is not available in layout ofed_sysfs"));
  EXPECT_THAT(log_, IsEmpty());
}

TEST_F(ApplierTest, EioInTheMiddleRestoresEveryDevice) {
  const auto before = TreeContents(NetDir());
  io_.fail_path = Rp("ens1f1np1", "rpg_min_rate");
  io_.fail_errno = EIO;
  v1::ParameterSet set;
  *set.add_devices() = Dev("mlx5_0", {{"rpg_ai_rate", 20}, {"rpg_hai_rate", 100}});
  set.mutable_devices(0)->set_rp_enable_mask(0x08);
  *set.add_devices() = Dev("mlx5_1", {{"rpg_ai_rate", 20}, {"rpg_min_rate", 10}});
  absl::StatusOr<ApplyResult> r = applier_.Apply(set);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInternal);
  EXPECT_THAT(r.status().message(), HasSubstr("mlx5_1: rpg_min_rate=10"));
  EXPECT_THAT(r.status().message(), HasSubstr(io_.fail_path));
  EXPECT_THAT(r.status().message(), HasSubstr("Input/output error"));
  EXPECT_THAT(r.status().message(),
              HasSubstr("previous values restored (3 writes on mlx5_0,mlx5_1)"));
  EXPECT_THAT(r.status().message(), Not(HasSubstr("RESTORE FAILED")));
  EXPECT_EQ(TreeContents(NetDir()), before);
  // The mask step came after the failure and was never attempted.
  EXPECT_EQ(std::count_if(log_.begin(), log_.end(),
                          [](const std::string& p) { return p.find("/enable/") != p.npos; }),
            0);
}

TEST_F(ApplierTest, EaccesOnAMaskRestoresValuesAndEarlierMasks) {
  const auto before = TreeContents(NetDir());
  io_.fail_path = Np("ens1f1np1", "enable/6");
  io_.fail_errno = EACCES;
  v1::ParameterSet set;
  *set.add_devices() = Dev("mlx5_0", {{"dce_tcp_g", 512}});
  set.mutable_devices(0)->set_np_enable_mask(0x08);
  *set.add_devices() = Dev("mlx5_1", {{"dce_tcp_rtt", 50}});
  set.mutable_devices(1)->set_np_enable_mask(0x0f);
  absl::StatusOr<ApplyResult> r = applier_.Apply(set);
  ASSERT_EQ(r.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(r.status().message(), HasSubstr("mlx5_1: np_enable_mask=15 (priority 6)"));
  EXPECT_THAT(r.status().message(), HasSubstr(io_.fail_path));
  EXPECT_THAT(r.status().message(), HasSubstr("Permission denied"));
  EXPECT_THAT(r.status().message(), HasSubstr("previous values restored"));
  EXPECT_EQ(TreeContents(NetDir()), before);
}

// A real filesystem failure: an immutable file refuses writes even to root.
TEST_F(ApplierTest, RealEpermInTheMiddleRestoresEveryDevice) {
  const std::string path = Np("ens1f1np1", "cnp_dscp");
  int fd = open(path.c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  int flags = 0;
  ASSERT_EQ(ioctl(fd, FS_IOC_GETFLAGS, &flags), 0);
  int immutable = flags | FS_IMMUTABLE_FL;
  if (ioctl(fd, FS_IOC_SETFLAGS, &immutable) != 0) {
    close(fd);
    GTEST_SKIP() << "cannot set the immutable flag here (needs CAP_LINUX_IMMUTABLE, ext4/xfs)";
  }
  const auto before = TreeContents(NetDir());
  v1::ParameterSet set;
  *set.add_devices() = Dev("mlx5_0", {{"cnp_dscp", 26}, {"min_time_between_cnps", 4}});
  *set.add_devices() = Dev("mlx5_1", {{"cnp_dscp", 26}, {"dce_tcp_g", 1000}});
  absl::StatusOr<ApplyResult> r = applier_.Apply(set);
  ioctl(fd, FS_IOC_SETFLAGS, &flags);
  close(fd);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(r.status().message(), HasSubstr("mlx5_1: cnp_dscp=26"));
  EXPECT_THAT(r.status().message(), HasSubstr(path));
  EXPECT_THAT(r.status().message(), HasSubstr("Operation not permitted"));
  EXPECT_THAT(r.status().message(), HasSubstr("previous values restored"));
  EXPECT_EQ(TreeContents(NetDir()), before);
}

TEST_F(ApplierTest, ReadBackMismatchRestores) {
  const auto before = TreeContents(NetDir());
  io_.clamp_path = Rp("ens1f0np0", "rpg_hai_rate");
  io_.clamp_max = 60;
  v1::ParameterSet set;
  *set.add_devices() = Dev("mlx5_0", {{"rpg_hai_rate", 100}, {"rpg_ai_rate", 8}});
  *set.add_devices() = Dev("mlx5_1", {{"rpg_hai_rate", 100}});
  absl::StatusOr<ApplyResult> r = applier_.Apply(set);
  ASSERT_EQ(r.status().code(), absl::StatusCode::kAborted);
  EXPECT_THAT(r.status().message(),
              HasSubstr("mlx5_0: rpg_hai_rate wrote 100, read back 60 (layout ofed_sysfs)"));
  EXPECT_THAT(r.status().message(), HasSubstr("previous values restored"));
  EXPECT_EQ(TreeContents(NetDir()), before);
}

TEST_F(ApplierTest, PfcFailureRestoresDcqcnAndMasks) {
  const auto before = TreeContents(NetDir());
  pfc_.fail_netdev = "ens1f1np1";
  v1::ParameterSet set;
  *set.add_devices() = Dev("mlx5_0", {{"rpg_ai_rate", 20}});
  set.mutable_devices(0)->mutable_pfc()->set_enable_mask(0x08);
  *set.add_devices() = Dev("mlx5_1", {{"rpg_ai_rate", 20}});
  set.mutable_devices(1)->set_rp_enable_mask(0x08);
  set.mutable_devices(1)->mutable_pfc()->set_enable_mask(0x08);
  absl::StatusOr<ApplyResult> r = applier_.Apply(set);
  ASSERT_EQ(r.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(r.status().message(), HasSubstr("mlx5_1: pfc enable_mask=0x08 on ens1f1np1"));
  EXPECT_EQ(TreeContents(NetDir()), before);
  EXPECT_EQ(pfc_.states["ens1f0np0"].enable_mask, 0x00);  // first device's PFC restored too
  EXPECT_EQ(pfc_.states["ens1f1np1"].enable_mask, 0x00);
}

TEST_F(ApplierTest, FailedRestoreSaysTheHostMayBeMixed) {
  io_.fail_after = 2;  // the device stops accepting writes after two
  v1::ParameterSet set;
  *set.add_devices() =
      Dev("mlx5_0", {{"rpg_ai_rate", 20}, {"rpg_hai_rate", 100}, {"rpg_min_rate", 10}});
  absl::StatusOr<ApplyResult> r = applier_.Apply(set);
  ASSERT_EQ(r.status().code(), absl::StatusCode::kInternal);
  EXPECT_THAT(r.status().message(), HasSubstr("mlx5_0: rpg_min_rate=10"));
  EXPECT_THAT(r.status().message(), HasSubstr("RESTORE FAILED"));
  EXPECT_THAT(r.status().message(), HasSubstr("rpg_hai_rate=50"));
}

// Emulates upstream cong.c: writing np_cnp_prio forces np_cnp_prio_mode to 0.
class CongSideEffectIo : public FaultyFileIo {
 public:
  using FaultyFileIo::FaultyFileIo;
  absl::Status Write(const std::string& path, const std::string& data) override {
    absl::Status st = FaultyFileIo::Write(path, data);
    const std::string suffix = "/np_cnp_prio";
    if (st.ok() && path.size() > suffix.size() &&
        path.compare(path.size() - suffix.size(), suffix.size(), suffix) == 0) {
      st = ParamFileIo::Real()->Write(path + "_mode", "0\n");
    }
    return st;
  }
};

class ApplierSideEffectTest : public ::testing::Test {
 protected:
  void SetUp() override { FixtureTree::WriteFile(File("np_cnp_prio_mode"), "1\n"); }
  std::string File(const std::string& name) const {
    return tree_.debug() + "/mlx5/0000:3b:00.0/cc_params/" + name;
  }
  std::vector<std::string> log_;
  FixtureTree tree_{"mlx5_upstream"};
  CongSideEffectIo io_{&log_};
  DebugfsCcStore store_{tree_.sys(), tree_.debug(), &io_};
  Applier applier_{{{"mlx5_0", {&store_, nullptr, "ens1f0np0"}}}};
};

TEST_F(ApplierSideEffectTest, ParameterOutsideTheSetIsKept) {
  v1::ParameterSet set;
  v1::DeviceParameters* d = set.add_devices();
  d->set_device("mlx5_0");
  (*d->mutable_dcqcn())["cnp_802p_prio"] = 3;
  absl::StatusOr<ApplyResult> r = applier_.Apply(set);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(FixtureTree::ReadFile(File("np_cnp_prio")), "3\n");
  EXPECT_EQ(FixtureTree::ReadFile(File("np_cnp_prio_mode")), "1\n");
  EXPECT_EQ(r->applied.devices(0).dcqcn().at("cnp_prio_mode"), 1);
  EXPECT_THAT(log_, ElementsAre(File("np_cnp_prio"), File("np_cnp_prio_mode")));
}

TEST_F(ApplierSideEffectTest, UnchangedRequestedValueIsRewrittenAfterTheClobber) {
  v1::ParameterSet set;
  v1::DeviceParameters* d = set.add_devices();
  d->set_device("mlx5_0");
  (*d->mutable_dcqcn())["cnp_prio_mode"] = 1;  // sorts before cnp_802p_prio? written after
  (*d->mutable_dcqcn())["cnp_802p_prio"] = 2;
  absl::StatusOr<ApplyResult> r = applier_.Apply(set);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(FixtureTree::ReadFile(File("np_cnp_prio_mode")), "1\n");
  EXPECT_EQ(r->writes, 2);
}

TEST_F(ApplierSideEffectTest, RestoreUndoesTheSideEffect) {
  const auto before = TreeContents(tree_.debug());
  io_.fail_path = File("rp_min_rate");
  v1::ParameterSet set;
  v1::DeviceParameters* d = set.add_devices();
  d->set_device("mlx5_0");
  (*d->mutable_dcqcn())["cnp_802p_prio"] = 3;
  (*d->mutable_dcqcn())["rpg_ai_rate"] = 20;
  (*d->mutable_dcqcn())["rpg_min_rate"] = 10;
  absl::StatusOr<ApplyResult> r = applier_.Apply(set);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("mlx5_0: rpg_min_rate=10"));
  EXPECT_THAT(r.status().message(), HasSubstr("previous values restored"));
  EXPECT_EQ(TreeContents(tree_.debug()), before);
}

TEST(ApplierDebugfsTest, MaskOnDebugfsLayoutIsRefusedBeforeWriting) {
  FixtureTree tree("mlx5_upstream");
  DebugfsCcStore store(tree.sys(), tree.debug());
  Applier applier({{"mlx5_0", {&store, nullptr, "ens1f0np0"}}});
  const auto before = TreeContents(tree.debug());
  v1::ParameterSet set;
  v1::DeviceParameters* d = set.add_devices();
  d->set_device("mlx5_0");
  (*d->mutable_dcqcn())["rpg_ai_rate"] = 20;
  d->set_rp_enable_mask(8);
  absl::StatusOr<ApplyResult> r = applier.Apply(set);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(r.status().message(), HasSubstr("rp_enable_mask"));
  d->mutable_pfc()->set_enable_mask(8);
  d->clear_rp_enable_mask();
  r = applier.Apply(set);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(r.status().message(), HasSubstr("no PFC configuration"));
  EXPECT_EQ(TreeContents(tree.debug()), before);
  d->clear_pfc();
  r = applier.Apply(set);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->applied.devices(0).dcqcn().at("rpg_ai_rate"), 20);
  EXPECT_EQ(FixtureTree::ReadFile(tree.debug() + "/mlx5/0000:3b:00.0/cc_params/rp_ai_rate"),
            "20\n");
}

// The real dcbnl path: a netdev without DCB (lo) rejects the whole set at
// snapshot time, before any DCQCN value is written.
TEST_F(ApplierTest, PfcOnNetdevWithoutDcbWritesNothing) {
  DcbnlPfcConfig dcbnl;
  Applier applier({{"mlx5_0", {&store_, &dcbnl, "lo"}}});
  const auto before = TreeContents(NetDir());
  v1::ParameterSet set;
  *set.add_devices() = Dev("mlx5_0", {{"rpg_ai_rate", 20}});
  set.mutable_devices(0)->mutable_pfc()->set_enable_mask(0x08);
  absl::StatusOr<ApplyResult> r = applier.Apply(set);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(r.status().message(), HasSubstr("nothing written"));
  EXPECT_THAT(r.status().message(), HasSubstr("netdev lo does not support DCB"));
  EXPECT_THAT(log_, IsEmpty());
  EXPECT_EQ(TreeContents(NetDir()), before);
}

TEST_F(ApplierTest, PreventionTimeoutAutoReadsBackAsTheMlx5CriticalTimeout) {
  v1::ParameterSet set;
  v1::DeviceParameters* d = set.add_devices();
  d->set_device("mlx5_0");
  d->mutable_pfc()->set_enable_mask(0x00);
  d->mutable_pfc()->set_prevention_timeout_ms(65535);
  pfc_.auto_reads_as = 100;
  absl::StatusOr<ApplyResult> r = applier_.Apply(set);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->applied.devices(0).pfc().prevention_timeout_ms(), 100u);
  EXPECT_TRUE(r->disruptive.empty());  // the enable mask did not change
  d->mutable_pfc()->set_prevention_timeout_ms(500);
  r = applier_.Apply(set);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(pfc_.states["ens1f0np0"].prevention_timeout_ms, 500);
}

TEST_F(ApplierTest, ReadCurrentCoversEveryTarget) {
  std::vector<std::string> errors;
  v1::ParameterSet cur = applier_.ReadCurrent(&errors);
  EXPECT_THAT(errors, IsEmpty());
  ASSERT_EQ(cur.devices_size(), 2);
  EXPECT_EQ(cur.devices(1).device(), "mlx5_1");
  EXPECT_EQ(cur.devices(1).dcqcn().at("dce_tcp_g"), 1019);
  EXPECT_EQ(cur.devices(1).pfc().delay(), 7u);
}

}  // namespace
}  // namespace rocetune
