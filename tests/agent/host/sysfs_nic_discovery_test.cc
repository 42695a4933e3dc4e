#include "agent/host/sysfs_nic_discovery.h"

#include <sys/stat.h>

#include <filesystem>
#include <string>

#include "daemon/logging.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/test_support.h"

namespace rocetune {
namespace {

using ::rocetune::testing::FixtureTree;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::string HostSys(const std::string& host) {
  return std::string(ROCETUNE_SOURCE_DIR) + "/tests/fixtures/hosts/" + host + "/sys";
}

TEST(SysfsNicDiscoveryTest, Mlx5OfedHostHasTwoFunctions) {
  SysfsNicDiscovery discovery(HostSys("mlx5_ofed"), "sysfs");
  absl::StatusOr<std::vector<v1::NicDevice>> devices = discovery.Discover();
  ASSERT_TRUE(devices.ok()) << devices.status();
  ASSERT_EQ(devices->size(), 2u);
  const v1::NicDevice& d0 = (*devices)[0];
  EXPECT_EQ(d0.name(), "mlx5_0");
  EXPECT_EQ(d0.driver(), "mlx5_core");
  EXPECT_EQ(d0.vendor(), "Mellanox");
  EXPECT_EQ(d0.model(), "MT4125");
  EXPECT_EQ(d0.firmware_version(), "22.39.1002");
  EXPECT_EQ(d0.node_guid(), "b8ce:f603:00a1:b2c0");
  EXPECT_EQ(d0.pci_address(), "0000:3b:00.0");
  EXPECT_EQ(d0.counter_source(), "sysfs");
  ASSERT_EQ(d0.ports_size(), 1);
  const v1::NicPort& p = d0.ports(0);
  EXPECT_EQ(p.port(), 1u);
  EXPECT_EQ(p.link_layer(), "Ethernet");
  EXPECT_EQ(p.state(), "ACTIVE");
  EXPECT_EQ(p.speed_mbps(), 100000u);
  EXPECT_EQ(p.netdev(), "ens1f0np0");
  // Index 0/1 and 2/3 repeat a GID for RoCE v1 and v2; slot 4 is all zeroes.
  EXPECT_THAT(p.gids(), ElementsAre("fe80:0000:0000:0000:bace:f6ff:fea1:b2c0",
                                    "0000:0000:0000:0000:0000:ffff:c0a8:0a0b"));
  const v1::NicDevice& d1 = (*devices)[1];
  EXPECT_EQ(d1.name(), "mlx5_1");
  EXPECT_EQ(d1.pci_address(), "0000:3b:00.1");
  EXPECT_EQ(d1.ports(0).state(), "DOWN");
  EXPECT_EQ(d1.ports(0).netdev(), "ens1f1np1");
}

TEST(SysfsNicDiscoveryTest, Mlx5UpstreamHost) {
  SysfsNicDiscovery discovery(HostSys("mlx5_upstream"));
  absl::StatusOr<std::vector<v1::NicDevice>> devices = discovery.Discover();
  ASSERT_TRUE(devices.ok()) << devices.status();
  ASSERT_FALSE(devices->empty());
  EXPECT_EQ((*devices)[0].firmware_version(), "28.39.1002");
  EXPECT_EQ((*devices)[0].model(), "MT4129");
  EXPECT_EQ((*devices)[0].counter_source(), "");
}

TEST(SysfsNicDiscoveryTest, BnxtReHost) {
  SysfsNicDiscovery discovery(HostSys("bnxt_re"));
  absl::StatusOr<std::vector<v1::NicDevice>> devices = discovery.Discover();
  ASSERT_TRUE(devices.ok()) << devices.status();
  ASSERT_EQ(devices->size(), 1u);
  const v1::NicDevice& d = (*devices)[0];
  EXPECT_EQ(d.name(), "bnxt_re0");
  EXPECT_EQ(d.driver(), "bnxt_en");
  EXPECT_EQ(d.vendor(), "Broadcom");
  EXPECT_EQ(d.model(), "0x1750");  // no hca_type: the PCI device id
  EXPECT_EQ(d.firmware_version(), "224.0.110.0");
  EXPECT_EQ(d.pci_address(), "0000:5e:00.0");
  EXPECT_EQ(d.ports(0).speed_mbps(), 200000u);
  EXPECT_EQ(d.ports(0).netdev(), "ens2f0np0");
}

TEST(SysfsNicDiscoveryTest, IrdmaHostReportsItsPciDriver) {
  SysfsNicDiscovery discovery(HostSys("irdma"));
  absl::StatusOr<std::vector<v1::NicDevice>> devices = discovery.Discover();
  ASSERT_TRUE(devices.ok()) << devices.status();
  ASSERT_EQ(devices->size(), 1u);
  const v1::NicDevice& d = (*devices)[0];
  EXPECT_EQ(d.name(), "irdma0");
  EXPECT_EQ(d.driver(), "ice");  // irdma is an auxiliary driver of ice
  EXPECT_EQ(d.vendor(), "Intel");
  EXPECT_EQ(d.pci_address(), "0000:af:00.0");
  EXPECT_EQ(d.ports(0).netdev(), "ens3f0");
  EXPECT_EQ(d.ports(0).speed_mbps(), 100000u);
}

TEST(SysfsNicDiscoveryTest, RxeHasNoPciDevice) {
  SysfsNicDiscovery discovery(HostSys("rxe"));
  absl::StatusOr<std::vector<v1::NicDevice>> devices = discovery.Discover();
  ASSERT_TRUE(devices.ok()) << devices.status();
  ASSERT_EQ(devices->size(), 1u);
  const v1::NicDevice& d = (*devices)[0];
  EXPECT_EQ(d.name(), "rxe0");
  EXPECT_EQ(d.driver(), "rxe");
  EXPECT_EQ(d.pci_address(), "");
  EXPECT_EQ(d.firmware_version(), "");
  EXPECT_EQ(d.node_guid(), "5054:00ff:fe12:3456");
  EXPECT_EQ(d.ports(0).netdev(), "eth0");
  EXPECT_EQ(d.ports(0).speed_mbps(), 2500u);
}

TEST(SysfsNicDiscoveryTest, RxeWhoseDeviceLinkNamesTheNetdevParent) {
  // Some kernels give rxe0 a `device` link to the virtio device under eth0.
  FixtureTree tree("rxe");
  std::filesystem::create_symlink("../../../pci0000:00/0000:00:03.0/virtio0",
                                  tree.sys() + "/devices/virtual/infiniband/rxe0/device");
  ASSERT_TRUE(std::filesystem::exists(tree.sys() + "/class/infiniband/rxe0/device/net/eth0"));
  SysfsNicDiscovery discovery(tree.sys());
  absl::StatusOr<std::vector<v1::NicDevice>> devices = discovery.Discover();
  ASSERT_TRUE(devices.ok()) << devices.status();
  EXPECT_EQ((*devices)[0].driver(), "rxe");
  EXPECT_EQ((*devices)[0].pci_address(), "");
  EXPECT_EQ((*devices)[0].ports(0).netdev(), "eth0");
}

TEST(SysfsNicDiscoveryTest, NetdevFallsBackToPciNetWithoutGidAttrs) {
  FixtureTree tree("bnxt_re");
  std::filesystem::remove_all(tree.sys() + "/class/infiniband/bnxt_re0/ports/1/gid_attrs");
  SysfsNicDiscovery discovery(tree.sys());
  absl::StatusOr<std::vector<v1::NicDevice>> devices = discovery.Discover();
  ASSERT_TRUE(devices.ok()) << devices.status();
  EXPECT_EQ((*devices)[0].ports(0).netdev(), "ens2f0np0");
}

TEST(SysfsNicDiscoveryTest, EmptyHostLogsOnce) {
  const ::rocetune::testing::TempDir dir("empty-sys");
  const std::string root = dir.path() + "/sys";
  std::filesystem::create_directories(root + "/class/net/lo");
  std::string log;
  SetLogSinkForTest(&log);
  SysfsNicDiscovery discovery(root);
  for (int i = 0; i < 3; ++i) {
    absl::StatusOr<std::vector<v1::NicDevice>> devices = discovery.Discover();
    ASSERT_TRUE(devices.ok()) << devices.status();
    EXPECT_TRUE(devices->empty());
  }
  SetLogSinkForTest(nullptr);
  EXPECT_THAT(log, HasSubstr("no RDMA device"));
  EXPECT_EQ(log.find("no RDMA device"), log.rfind("no RDMA device"));
  std::filesystem::remove_all(root);
}

TEST(SysfsNicDiscoveryTest, MissingRootIsAnError) {
  SysfsNicDiscovery discovery("/nonexistent/rocetune/sys");
  absl::StatusOr<std::vector<v1::NicDevice>> devices = discovery.Discover();
  EXPECT_EQ(devices.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(devices.status().message(), HasSubstr("/nonexistent/rocetune/sys"));
}

TEST(SysfsNicDiscoveryTest, UnreadableAttributesLeaveFieldsEmpty) {
  FixtureTree tree("mlx5_ofed");
  const std::string dev = tree.sys() + "/class/infiniband/mlx5_0";
  std::filesystem::remove(dev + "/fw_ver");
  std::filesystem::create_directory(dev + "/fw_ver");  // a directory where a file is
  std::filesystem::remove(dev + "/ports/1/rate");
  std::filesystem::create_symlink("nowhere", dev + "/ports/1/rate");  // dangling
  ASSERT_EQ(mkfifo((dev + "/node_guid.fifo").c_str(), 0644), 0);
  std::filesystem::remove(dev + "/node_guid");
  std::filesystem::rename(dev + "/node_guid.fifo", dev + "/node_guid");  // a FIFO: must not block
  SysfsNicDiscovery discovery(tree.sys());
  absl::StatusOr<std::vector<v1::NicDevice>> devices = discovery.Discover();
  ASSERT_TRUE(devices.ok()) << devices.status();
  ASSERT_EQ(devices->size(), 2u);
  EXPECT_EQ((*devices)[0].firmware_version(), "");
  EXPECT_EQ((*devices)[0].node_guid(), "");
  EXPECT_EQ((*devices)[0].ports(0).speed_mbps(), 0u);
  EXPECT_EQ((*devices)[0].ports(0).state(), "ACTIVE");
}

TEST(SysfsNicDiscoveryTest, DeviceWithoutPortsIsSkipped) {
  FixtureTree tree("mlx5_ofed");
  std::filesystem::remove_all(tree.sys() + "/class/infiniband/mlx5_1/ports");
  SysfsNicDiscovery discovery(tree.sys());
  absl::StatusOr<std::vector<v1::NicDevice>> devices = discovery.Discover();
  ASSERT_TRUE(devices.ok()) << devices.status();
  ASSERT_EQ(devices->size(), 1u);
  EXPECT_EQ((*devices)[0].name(), "mlx5_0");
}

TEST(SysfsNicDiscoveryTest, ParseRate) {
  EXPECT_EQ(*SysfsNicDiscovery::ParseRateMbps("100 Gb/sec (4X EDR)"), 100000u);
  EXPECT_EQ(*SysfsNicDiscovery::ParseRateMbps("2.5 Gb/sec (1X SDR)"), 2500u);
  EXPECT_EQ(*SysfsNicDiscovery::ParseRateMbps("400 Gb/sec (4X NDR)"), 400000u);
  EXPECT_EQ(SysfsNicDiscovery::ParseRateMbps("fast").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(SysfsNicDiscovery::ParseRateMbps("100 Mb/sec").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(SysfsNicDiscovery::ParseRateMbps("-5 Gb/sec").status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace rocetune

namespace rocetune {
namespace {

TEST(SysfsNicDiscoveryCacheTest, StateChangesShowAtOnceStaticFieldsAfterAFullRefresh) {
  FixtureTree tree("mlx5_ofed");
  const std::string port = tree.sys() + "/class/infiniband/mlx5_0/ports/1/";
  SysfsNicDiscovery discovery(tree.sys(), "sysfs", /*full_refresh_every=*/3);
  ASSERT_TRUE(discovery.Discover().ok());
  // Same inode rewritten, as sysfs does: the cached descriptor sees it.
  FixtureTree::WriteFile(port + "rate", "25 Gb/sec (1X EDR)\n");
  FixtureTree::WriteFile(tree.sys() + "/class/infiniband/mlx5_0/fw_ver", "22.40.1000\n");
  absl::StatusOr<std::vector<v1::NicDevice>> d = discovery.Discover();
  ASSERT_TRUE(d.ok());
  EXPECT_EQ((*d)[0].ports(0).speed_mbps(), 25000u);
  EXPECT_EQ((*d)[0].firmware_version(), "22.39.1002");  // cached until the full refresh
  EXPECT_EQ((*d)[0].counter_source(), "sysfs");
  FixtureTree::WriteFile(port + "state", "1: DOWN\n");
  d = discovery.Discover();  // a state change forces a full read
  ASSERT_TRUE(d.ok());
  EXPECT_EQ((*d)[0].ports(0).state(), "DOWN");
  EXPECT_EQ((*d)[0].firmware_version(), "22.40.1000");
}

TEST(SysfsNicDiscoveryCacheTest, PeriodicFullRefreshAndRemovedDevices) {
  FixtureTree tree("mlx5_ofed");
  SysfsNicDiscovery discovery(tree.sys(), "", /*full_refresh_every=*/2);
  ASSERT_TRUE(discovery.Discover().ok());
  FixtureTree::WriteFile(tree.sys() + "/class/infiniband/mlx5_1/node_guid",
                         "1111:2222:3333:4444\n");
  absl::StatusOr<std::vector<v1::NicDevice>> d = discovery.Discover();  // cached
  ASSERT_TRUE(d.ok());
  EXPECT_EQ((*d)[1].node_guid(), "b8ce:f603:00a1:b2c1");
  d = discovery.Discover();  // two calls after the first full read: full again
  ASSERT_TRUE(d.ok());
  EXPECT_EQ((*d)[1].node_guid(), "1111:2222:3333:4444");
  std::filesystem::remove(tree.sys() + "/class/infiniband/mlx5_1");
  d = discovery.Discover();
  ASSERT_TRUE(d.ok());
  ASSERT_EQ(d->size(), 1u);
  EXPECT_EQ((*d)[0].name(), "mlx5_0");
}

TEST(SysfsNicDiscoveryCacheTest, ARecreatedDeviceIsReadAgain) {
  FixtureTree tree("rxe");
  SysfsNicDiscovery discovery(tree.sys());
  ASSERT_TRUE(discovery.Discover().ok());
  // rdma link delete + add: new sysfs nodes (new inodes) with new contents.
  const std::string dev = tree.sys() + "/devices/virtual/infiniband/rxe0";
  const std::string copy = tree.root() + "/rxe0.new";
  std::filesystem::copy(dev, copy, std::filesystem::copy_options::recursive);
  FixtureTree::WriteFile(copy + "/node_guid", "aaaa:bbbb:cccc:dddd\n");
  std::filesystem::remove_all(dev);
  std::filesystem::rename(copy, dev);
  absl::StatusOr<std::vector<v1::NicDevice>> d = discovery.Discover();
  ASSERT_TRUE(d.ok());
  ASSERT_EQ(d->size(), 1u);
  EXPECT_EQ((*d)[0].node_guid(), "aaaa:bbbb:cccc:dddd");
}

}  // namespace
}  // namespace rocetune
