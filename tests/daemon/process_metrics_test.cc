#include "daemon/process_metrics.h"

#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <fstream>
#include <map>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "prometheus/text_serializer.h"
#include "tests/testing/test_support.h"

namespace rocetune {
namespace {

// A command name with spaces and parentheses: fields are counted from the last ')'.
constexpr char kStat[] =
    "4242 (rocetune (x) y) S 1 4242 4242 0 -1 4194560 5000 0 0 0 "
    "250 150 0 0 20 0 9 0 12000 123456789 2048 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 "
    "17 1 0 0 0 0 0\n";

TEST(ProcessMetricsTest, ParsesProcStat) {
  ProcessStats s;
  ASSERT_TRUE(ParseProcStat(kStat, 100, 4096, 1'700'000'000, &s).ok());
  EXPECT_DOUBLE_EQ(s.cpu_seconds, 4.0);  // (250 + 150) ticks / 100
  EXPECT_DOUBLE_EQ(s.start_time_seconds, 1'700'000'120.0);
  EXPECT_DOUBLE_EQ(s.virtual_bytes, 123456789.0);
  EXPECT_DOUBLE_EQ(s.resident_bytes, 2048.0 * 4096);
}

TEST(ProcessMetricsTest, RejectsMalformedStat) {
  ProcessStats s;
  EXPECT_FALSE(ParseProcStat("4242 no parenthesis S 1", 100, 4096, 0, &s).ok());
  EXPECT_FALSE(ParseProcStat("4242 (x) S 1 2 3", 100, 4096, 0, &s).ok());
  std::string bad = kStat;
  bad.replace(bad.find(" 250 "), 5, " abc ");
  EXPECT_FALSE(ParseProcStat(bad, 100, 4096, 0, &s).ok());
  EXPECT_DOUBLE_EQ(s.cpu_seconds, 0);  // bad input changes nothing
}

TEST(ProcessMetricsTest, ParsesBootTimeAndLimits) {
  EXPECT_EQ(*ParseBootTime("cpu 1 2 3\nbtime 1699990000\nprocesses 5\n"), 1699990000.0);
  EXPECT_FALSE(ParseBootTime("cpu 1 2 3\n").ok());
  const char limits[] =
      "Limit                     Soft Limit           Hard Limit           Units     \n"
      "Max cpu time              unlimited            unlimited            seconds   \n"
      "Max open files            1024                 524288               files     \n";
  EXPECT_EQ(*ParseMaxOpenFiles(limits), 1024.0);
  EXPECT_TRUE(std::isinf(*ParseMaxOpenFiles("Max open files  unlimited unlimited files\n")));
  EXPECT_FALSE(ParseMaxOpenFiles("Max cpu time unlimited unlimited seconds\n").ok());
}

TEST(ProcessMetricsTest, ReadsThisProcess) {
  absl::StatusOr<ProcessStats> before = ReadProcessStats();
  ASSERT_TRUE(before.ok()) << before.status();
  int fds[4];
  for (int& fd : fds) fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
  absl::StatusOr<ProcessStats> s = ReadProcessStats();
  for (int fd : fds) close(fd);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->open_fds, before->open_fds + 4);
  EXPECT_GE(s->max_fds, s->open_fds);
  EXPECT_GT(s->resident_bytes, 1 << 20);
  EXPECT_GE(s->virtual_bytes, s->resident_bytes);
  const double now = absl::ToDoubleSeconds(absl::Now() - absl::UnixEpoch());
  EXPECT_LE(s->start_time_seconds, now + 1);
  EXPECT_GT(s->start_time_seconds, now - 3600);
  EXPECT_GE(s->cpu_seconds, 0);
}

std::map<std::string, const prometheus::MetricFamily*> ByName(
    const std::vector<prometheus::MetricFamily>& families) {
  std::map<std::string, const prometheus::MetricFamily*> out;
  for (const auto& f : families) out[f.name] = &f;
  return out;
}

TEST(ProcessMetricsTest, CollectsBuildInfoAndProcessSeries) {
  ProcessMetrics m("controller");
  const std::vector<prometheus::MetricFamily> families = m.Collect();
  auto by_name = ByName(families);
  for (const char* name : {"rocetune_build_info", "process_cpu_seconds_total",
                           "process_resident_memory_bytes", "process_virtual_memory_bytes",
                           "process_open_fds", "process_max_fds", "process_start_time_seconds"}) {
    ASSERT_TRUE(by_name.contains(name)) << name;
    ASSERT_EQ(by_name[name]->metric.size(), 1u) << name;
  }
  EXPECT_EQ(by_name["process_cpu_seconds_total"]->type, prometheus::MetricType::Counter);
  EXPECT_GT(by_name["process_open_fds"]->metric[0].gauge.value, 2);
  const prometheus::ClientMetric& info = by_name["rocetune_build_info"]->metric[0];
  EXPECT_EQ(info.gauge.value, 1);
  std::map<std::string, std::string> labels;
  for (const auto& l : info.label) labels[l.name] = l.value;
  EXPECT_EQ(labels["component"], "controller");
  EXPECT_EQ(labels["version"], BuildVersion());
  EXPECT_EQ(labels["revision"], BuildRevision());
  EXPECT_FALSE(labels["version"].empty());
  EXPECT_NE(labels["version"], "unknown");  // set by CMake from the project version

  // The text format passes promtool's lint.
  const std::string text = prometheus::TextSerializer().Serialize(families);
  const ::rocetune::testing::TempDir dir("process-metrics");
  const std::string path = dir.path() + "/process_metrics.prom";
  std::ofstream(path) << text;
  FILE* p = popen(("promtool check metrics < " + path + " 2>&1").c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string out;
  char buf[512];
  while (fgets(buf, sizeof(buf), p)) out += buf;
  const int status = pclose(p);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << out << "\non:\n" << text;
}

// Without a readable /proc only build_info is served.
TEST(ProcessMetricsTest, MissingProcKeepsBuildInfo) {
  ProcessMetrics m("agent", ::testing::TempDir() + "/no-such-proc");
  auto families = m.Collect();
  ASSERT_EQ(families.size(), 1u);
  EXPECT_EQ(families[0].name, "rocetune_build_info");
}

}  // namespace
}  // namespace rocetune
