#include "agent/probe/verbs_prober.h"

#include <infiniband/verbs.h>

#include "agent/probe/verbs_responder.h"
#include "gtest/gtest.h"

namespace rocetune {
namespace {

bool HostHasRdmaDevice() {
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  if (list != nullptr) ibv_free_device_list(list);
  return n > 0;
}

TEST(VerbsProberTest, NoDeviceIsACleanUnavailableError) {
  if (HostHasRdmaDevice()) GTEST_SKIP() << "host has an RDMA device; covered by the VM test";
  absl::StatusOr<std::unique_ptr<VerbsProber>> p = VerbsProber::Create({});
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(p.status().message().find("no RDMA device"), absl::string_view::npos) << p.status();
  absl::StatusOr<std::unique_ptr<VerbsResponder>> r = VerbsResponder::Start({});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnavailable);
}

TEST(VerbsProberTest, UnknownDeviceNameIsUnavailableAndNamed) {
  VerbsProber::Options o;
  o.endpoint.device = "nonexistent_dev9";
  absl::StatusOr<std::unique_ptr<VerbsProber>> p = VerbsProber::Create(o);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), absl::StatusCode::kUnavailable);
  if (HostHasRdmaDevice()) {
    EXPECT_NE(p.status().message().find("nonexistent_dev9"), absl::string_view::npos);
  }
}

}  // namespace
}  // namespace rocetune
