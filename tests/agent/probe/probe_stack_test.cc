#include "agent/probe/probe_stack.h"

#include <infiniband/verbs.h>

#include "agent/probe/socket_address.h"
#include "gtest/gtest.h"

namespace rocetune {
namespace {

bool HostHasRdmaDevice() {
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  if (list != nullptr) ibv_free_device_list(list);
  return n > 0;
}

TEST(ProbeStackTest, UdpStackHasAProberAndAReachableResponder) {
  ProbeStackOptions o;
  o.transport = "udp";
  o.udp_listen = "127.0.0.1:0";
  absl::StatusOr<ProbeStack> s = StartProbeStack(o);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->capability, "probe.udp");
  EXPECT_EQ(s->prober->kind(), "udp");
  ASSERT_NE(s->udp_responder, nullptr);
  absl::StatusOr<SocketAddress> addr = SocketAddress::Parse(s->responder_address);
  ASSERT_TRUE(addr.ok()) << addr.status();
  EXPECT_GT(addr->port(), 0);
}

TEST(ProbeStackTest, AutoFallsBackToUdpWithoutRdma) {
  if (HostHasRdmaDevice()) GTEST_SKIP() << "host has an RDMA device";
  ProbeStackOptions o;
  o.udp_listen = "127.0.0.1:0";
  absl::StatusOr<ProbeStack> s = StartProbeStack(o);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->prober->kind(), "udp");
  o.transport = "verbs";
  EXPECT_EQ(StartProbeStack(o).status().code(), absl::StatusCode::kUnavailable);
}

TEST(ProbeStackTest, UnknownTransportIsInvalid) {
  ProbeStackOptions o;
  o.transport = "carrier-pigeon";
  absl::Status s = StartProbeStack(o).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("carrier-pigeon"), absl::string_view::npos);
}

}  // namespace
}  // namespace rocetune
