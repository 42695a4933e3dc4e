#include "controller/fleet/probe_planner.h"

#include <gtest/gtest.h>

#include <set>

#include "absl/strings/str_cat.h"

namespace rocetune::controller {
namespace {

std::vector<ProbeTarget> Fleet(int tors, int per_tor) {
  std::vector<ProbeTarget> hosts;
  for (int t = 0; t < tors; ++t) {
    for (int i = 0; i < per_tor; ++i) {
      ProbeTarget h;
      h.host_id = absl::StrCat("h", t, "-", i);
      h.labels["tor"] = absl::StrCat(t);
      h.endpoint.set_udp_address(absl::StrCat("127.0.0.", 1 + t, ":", 7000 + i));
      hosts.push_back(h);
    }
  }
  return hosts;
}

TEST(ProbePlannerTest, BoundedPeersMixedClassesNoSelf) {
  ProbePlannerOptions o;
  o.max_peers = 8;
  auto plans = PlanProbes(Fleet(4, 10), o);
  ASSERT_EQ(plans.size(), 40u);
  for (const auto& [host, plan] : plans) {
    EXPECT_EQ(plan.peers_size(), 8) << host;
    int intra = 0, inter = 0;
    std::set<std::string> seen;
    for (const auto& p : plan.peers()) {
      EXPECT_NE(p.host_id(), host);
      EXPECT_TRUE(seen.insert(p.host_id()).second) << "duplicate peer " << p.host_id();
      (p.peer_class() == "intra_tor" ? intra : inter)++;
      EXPECT_FALSE(p.udp_address().empty());
    }
    EXPECT_EQ(intra, 4) << host;
    EXPECT_EQ(inter, 4) << host;
    EXPECT_EQ(plan.traffic_class(), 106u);
  }
}

TEST(ProbePlannerTest, EveryHostIsProbedAboutEquallyOften) {
  ProbePlannerOptions o;
  o.max_peers = 6;
  auto plans = PlanProbes(Fleet(3, 8), o);
  std::map<std::string, int> probed_by;
  for (const auto& [host, plan] : plans) {
    for (const auto& p : plan.peers()) probed_by[p.host_id()]++;
  }
  ASSERT_EQ(probed_by.size(), 24u);  // nobody is left out
  for (const auto& [host, n] : probed_by) {
    EXPECT_GE(n, 4) << host;
    EXPECT_LE(n, 8) << host;
  }
}

TEST(ProbePlannerTest, VersionIsStableAndChangesWithContent) {
  ProbePlannerOptions o;
  auto hosts = Fleet(2, 3);
  auto a = PlanProbes(hosts, o);
  auto b = PlanProbes(hosts, o);
  EXPECT_EQ(a.at("h0-0").version(), b.at("h0-0").version());
  hosts[1].endpoint.set_udp_address("127.0.0.9:1");
  auto c = PlanProbes(hosts, o);
  EXPECT_NE(a.at("h0-0").version(), c.at("h0-0").version());
}

TEST(ProbePlannerTest, VerbsEndpointPreferredAndHostsWithoutEndpointSkipped) {
  std::vector<ProbeTarget> hosts = Fleet(1, 3);
  hosts[1].endpoint.set_gid("fe80::1");
  hosts[1].endpoint.set_qpn(17);
  hosts[1].endpoint.set_qkey(0x11111111);
  hosts[2].endpoint.Clear();
  auto plans = PlanProbes(hosts, ProbePlannerOptions());
  const v1::ProbePlan& p0 = plans.at(hosts[0].host_id);
  ASSERT_EQ(p0.peers_size(), 1);
  EXPECT_EQ(p0.peers(0).host_id(), hosts[1].host_id);
  EXPECT_EQ(p0.peers(0).gid(), "fe80::1");
  EXPECT_EQ(p0.peers(0).qpn(), 17u);
  EXPECT_TRUE(p0.peers(0).udp_address().empty());
  // The host without an endpoint still gets a plan (it can probe others).
  EXPECT_EQ(plans.at(hosts[2].host_id).peers_size(), 2);
}

TEST(ProbePlannerTest, PartitionsNeverMix) {
  std::vector<ProbeTarget> hosts = Fleet(2, 3);
  for (int i = 0; i < 3; ++i) hosts[i].labels["fabric"] = "sim";
  auto plans = PlanProbes(hosts, ProbePlannerOptions());
  for (int i = 0; i < 6; ++i) {
    bool sim = i < 3;
    for (const auto& p : plans.at(hosts[i].host_id).peers()) {
      bool peer_sim = p.host_id().rfind("h0-", 0) == 0;
      EXPECT_EQ(sim, peer_sim) << hosts[i].host_id << " -> " << p.host_id();
    }
    EXPECT_EQ(plans.at(hosts[i].host_id).peers_size(), 2);
  }
}

TEST(ProbePlannerTest, SingleHostHasEmptyPlan) {
  auto plans = PlanProbes(Fleet(1, 1), ProbePlannerOptions());
  EXPECT_EQ(plans.begin()->second.peers_size(), 0);
}

}  // namespace
}  // namespace rocetune::controller
