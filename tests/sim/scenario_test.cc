// Scenario files, --set overrides and validation errors.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "absl/strings/match.h"
#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"
#include "sim/fabric.h"
#include "sim/scenario_loader.h"
#include "tests/testing/test_support.h"

namespace rocetune::sim {
namespace {

using ::testing::HasSubstr;

std::string WriteTemp(const std::string& name, const std::string& text) {
  // One directory for the suite, removed at exit.
  static const ::rocetune::testing::TempDir dir("scenario-test");
  const std::string path = dir.path() + "/" + name;
  std::ofstream(path) << text;
  return path;
}

TEST(ScenarioTest, EveryShippedScenarioLoadsAndValidates) {
  // Every file in sim/scenarios/, so a new scenario cannot ship unchecked; the
  // name inside matches the file name.
  int checked = 0;
  for (const auto& entry :
       std::filesystem::directory_iterator(std::string(ROCETUNE_SOURCE_DIR) + "/sim/scenarios")) {
    if (entry.path().extension() != ".textproto") continue;
    const std::string name = entry.path().stem().string();
    absl::StatusOr<v1::Scenario> s = LoadScenario(entry.path().string(), {});
    ASSERT_TRUE(s.ok()) << name << ": " << s.status();
    EXPECT_EQ(s->name(), name);
    EXPECT_TRUE(Fabric::Create(*s).ok()) << name;
    ++checked;
  }
  EXPECT_GE(checked, 11) << "the shipped scenarios";
}

TEST(ScenarioTest, ParseErrorNamesFileLineAndColumn) {
  const std::string path = WriteTemp("bad.textproto",
                                     "name: \"x\"\n"
                                     "topology {\n"
                                     "  hostz: 4\n"
                                     "}\n");
  absl::StatusOr<v1::Scenario> s = LoadScenario(path, {});
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.status().message()), HasSubstr(path));
  EXPECT_THAT(std::string(s.status().message()), HasSubstr("line 3, column"));
  EXPECT_THAT(std::string(s.status().message()), HasSubstr("hostz"));
}

TEST(ScenarioTest, MissingFileIsNotFound) {
  absl::StatusOr<v1::Scenario> s = LoadScenario("/nonexistent/x.textproto", {});
  EXPECT_EQ(s.status().code(), absl::StatusCode::kNotFound);
}

TEST(ScenarioTest, OverridesSetNestedScalarsEnumsBoolsAndRepeatedElements) {
  v1::Scenario s;
  s.mutable_workload()->add_incast()->set_bytes_per_sender(1);
  ASSERT_TRUE(ApplyOverride("dcqcn.rpg_ai_rate=20", &s).ok());
  ASSERT_TRUE(ApplyOverride("ecn.pmax=0.25", &s).ok());
  ASSERT_TRUE(ApplyOverride("pfc.enabled=true", &s).ok());
  ASSERT_TRUE(ApplyOverride("workload.background.distribution=FB_HADOOP", &s).ok());
  ASSERT_TRUE(ApplyOverride("workload.incast[0].bytes_per_sender=65536", &s).ok());
  ASSERT_TRUE(ApplyOverride("workload.incast[1].receiver=3", &s).ok()) << "index == size appends";
  ASSERT_TRUE(ApplyOverride("workload.incast[0].senders[0]=5", &s).ok());
  ASSERT_TRUE(ApplyOverride("name=a=b", &s).ok()) << "the value may contain '='";
  EXPECT_EQ(s.dcqcn().rpg_ai_rate(), 20);
  EXPECT_TRUE(s.dcqcn().has_rpg_ai_rate());
  EXPECT_EQ(s.ecn().pmax(), 0.25);
  EXPECT_TRUE(s.pfc().enabled());
  EXPECT_EQ(s.workload().background().distribution(), v1::FB_HADOOP);
  EXPECT_EQ(s.workload().incast(0).bytes_per_sender(), 65536u);
  EXPECT_EQ(s.workload().incast(1).receiver(), 3u);
  EXPECT_EQ(s.workload().incast(0).senders(0), 5u);
  EXPECT_EQ(s.name(), "a=b");
}

TEST(ScenarioTest, BadOverridesNameThePathAndChangeNothing) {
  v1::Scenario s;
  s.mutable_dcqcn()->set_rpg_ai_rate(7);
  const v1::Scenario before = s;
  struct Case {
    const char* spec;
    const char* want;
  } cases[] = {
      {"dcqcn.rpg_ai_ratee=20", "no field \"rpg_ai_ratee\" in rocetune.v1.DcqcnSettings"},
      {"dcqcn.rpg_ai_rate=fast", "\"fast\" is not a valid int64"},
      {"ecn.pmax=", "is not a valid number"},
      {"pfc.enabled=maybe", "not a valid bool"},
      {"workload.background.distribution=NOPE", "not a valid FlowSizeDistribution"},
      {"workload.incast[3].receiver=1", "index 3 beyond incast (size 0)"},
      {"workload.incast.receiver=1", "is repeated: give an index"},
      {"dcqcn=1", "is a message"},
      {"seed.x=1", "\"seed\" is not a message"},
      {"dcqcn.rpg_ai_rate", "want path=value"},
      {"topology.hosts=-1", "not a valid uint32"},
  };
  for (const Case& c : cases) {
    absl::Status st = ApplyOverride(c.spec, &s);
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << c.spec;
    EXPECT_THAT(std::string(st.message()), HasSubstr(c.want)) << c.spec;
    EXPECT_EQ(s.SerializeAsString(), before.SerializeAsString()) << c.spec;
  }
}

TEST(ScenarioTest, ValidationErrorsNameTheField) {
  struct Case {
    std::string text;
    std::string want;
  } cases[] = {
      {"duration_ms: 1 topology { hosts: 1 }", "topology.hosts"},
      {"duration_ms: 0 topology { hosts: 2 }", "duration_ms"},
      {"duration_ms: 1 topology { hosts: 4 hosts_per_tor: 2 }", "topology.spines"},
      {"duration_ms: 1 topology { hosts: 2 } workload { long_flows { src: 0 dst: 2 } }",
       "workload.long_flows[0].dst"},
      {"duration_ms: 1 topology { hosts: 2 } ecn { kmin_bytes: 10 kmax_bytes: 5 }",
       "ecn.kmin_bytes"},
      {"duration_ms: 1 topology { hosts: 2 } dcqcn { dce_tcp_g: 2000 }", "dce_tcp_g=2000"},
      {"duration_ms: 1 topology { hosts: 3 } workload { incast { receiver: 0 senders: 0 "
       "bytes_per_sender: 1 } }",
       "workload.incast[0].senders"},
      {"duration_ms: 1 topology { hosts: 3 } workload { background { load: 1.5 } }",
       "workload.background.load"},
  };
  for (const Case& c : cases) {
    v1::Scenario s;
    ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(c.text, &s)) << c.text;
    absl::StatusOr<std::unique_ptr<Fabric>> f = Fabric::Create(s);
    ASSERT_FALSE(f.ok()) << c.text;
    EXPECT_EQ(f.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(f.status().message()), HasSubstr(c.want)) << c.text;
  }
}

}  // namespace
}  // namespace rocetune::sim
