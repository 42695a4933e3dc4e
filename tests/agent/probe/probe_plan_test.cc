#include "agent/probe/probe_plan.h"

#include "gtest/gtest.h"

namespace rocetune {
namespace {

v1::ProbePlan GoodPlan() {
  v1::ProbePlan p;
  p.set_probes_per_second(10);
  p.set_payload_bytes(64);
  p.set_traffic_class(106);
  p.set_timeout_ms(500);
  p.add_peers()->set_peer_class("intra_tor");
  return p;
}

TEST(ProbePlanTest, AcceptsAGoodPlanAndAppliesDefaults) {
  EXPECT_TRUE(ValidateProbePlanCommon(GoodPlan(), 4096).ok());
  v1::ProbePlan p = GoodPlan();
  p.set_payload_bytes(0);
  p.set_timeout_ms(0);
  EXPECT_TRUE(ValidateProbePlanCommon(p, 4096).ok());
  EXPECT_EQ(PlanPayloadBytes(p), ProbePlanLimits::kDefaultPayloadBytes);
  EXPECT_EQ(PlanTimeout(p), absl::Milliseconds(ProbePlanLimits::kDefaultTimeoutMs));
  EXPECT_TRUE(ValidateProbePlanCommon(v1::ProbePlan(), 4096).ok());  // empty pinglist
}

TEST(ProbePlanTest, RejectsEachBadFieldByName) {
  struct Case {
    void (*mutate)(v1::ProbePlan*);
    const char* field;
  } cases[] = {
      {[](v1::ProbePlan* p) { p->set_probes_per_second(0); }, "probes_per_second"},
      {[](v1::ProbePlan* p) { p->set_probes_per_second(-1); }, "probes_per_second"},
      {[](v1::ProbePlan* p) { p->set_probes_per_second(1e9); }, "probes_per_second"},
      {[](v1::ProbePlan* p) { p->set_payload_bytes(8); }, "payload_bytes"},
      {[](v1::ProbePlan* p) { p->set_payload_bytes(5000); }, "payload_bytes"},
      {[](v1::ProbePlan* p) { p->set_traffic_class(256); }, "traffic_class"},
      {[](v1::ProbePlan* p) { p->set_timeout_ms(600000); }, "timeout_ms"},
      {[](v1::ProbePlan* p) { p->mutable_peers(0)->clear_peer_class(); }, "peers[0]"},
  };
  for (const Case& c : cases) {
    v1::ProbePlan p = GoodPlan();
    c.mutate(&p);
    absl::Status s = ValidateProbePlanCommon(p, 4096);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.field;
    EXPECT_NE(s.message().find(c.field), absl::string_view::npos) << s;
  }
}

}  // namespace
}  // namespace rocetune
