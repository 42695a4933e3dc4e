// The Python example (jobsignal/examples/report_steps.py): the job signal's C
// client through ctypes, as a Python training loop would use it, against the
// agent's real listener in this process.
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "agent/job/job_listener.h"
#include "daemon/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/test_support.h"

namespace rocetune {
namespace {

using ::testing::HasSubstr;

// Runs the example with `args`; its exit code (-1 when it could not run) and
// output (stdout and stderr).
int RunExample(const std::string& args, std::string* out) {
  return testing::RunShell(
      absl::StrCat("python3 ", ROCETUNE_SOURCE_DIR, "/jobsignal/examples/report_steps.py --lib ",
                   ROCETUNE_JOB_LIB, " ", args),
      out);
}

class PythonExampleTest : public ::testing::Test {
 protected:
  void SetUp() override {
    JobListenerOptions o;
    o.path = dir_.path() + "/job.sock";
    auto l = JobListener::Create(o, Clock::Real());
    ASSERT_TRUE(l.ok()) << l.status();
    listener_ = std::move(*l);
  }
  testing::TempDir dir_{"python-example"};
  std::unique_ptr<JobListener> listener_;
};

TEST_F(PythonExampleTest, EveryTimedStepReachesTheAgent) {
  std::string out;
  ASSERT_EQ(RunExample(absl::StrCat("--job py/run1 --steps 25 --step_ms 2 --rank 3 --socket ",
                                    listener_->path()),
                       &out),
            0)
      << out;
  EXPECT_THAT(out, HasSubstr("sent=25 dropped=0"));
  ASSERT_TRUE(testing::Eventually([&] { return listener_->counts().accepted == 25; }))
      << listener_->counts().accepted;
  const std::vector<JobSeries> series = listener_->TakeSeries();
  ASSERT_EQ(series.size(), 1u);
  EXPECT_EQ(series[0].job, "py/run1");
  EXPECT_EQ(series[0].op, "step");
  EXPECT_EQ(series[0].seconds.count(), 25u);
  EXPECT_GE(series[0].seconds.min(), 2e-3 * 0.98) << "each step slept 2 ms";
}

TEST_F(PythonExampleTest, NoAgentDropsAndABadJobNameIsRefused) {
  std::string out;
  // Nobody listens there: the loop runs, every event is dropped, nothing raises.
  ASSERT_EQ(RunExample(absl::StrCat("--job py/run1 --steps 3 --step_ms 0 --socket ", dir_.path(),
                                    "/nobody.sock"),
                       &out),
            0)
      << out;
  EXPECT_THAT(out, HasSubstr("sent=0 dropped=3"));
  out.clear();
  EXPECT_EQ(
      RunExample(absl::StrCat("--job 'bad name' --steps 1 --socket ", listener_->path()), &out), 2);
  EXPECT_THAT(out, HasSubstr("rocetune_job_open('bad name'): Invalid argument"));
  EXPECT_EQ(listener_->counts().accepted, 0u);
}

}  // namespace
}  // namespace rocetune
