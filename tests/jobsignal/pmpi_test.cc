// The PMPI wrapper (jobsignal/pmpi) under Debian's Open MPI: `mpirun -np 4`
// runs a plain all-reduce program (collectives_program.c, which knows nothing
// of rocetune) with librocetune-pmpi.so preloaded, on one machine over shared
// memory; the agent's real job-signal listener, in this process, must receive
// every collective of every rank, with its bytes. Without the wrapper it
// receives nothing. Skipped (and said so) when Open MPI was not installed at
// configure time; scripts/install-deps installs it.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "agent/job/job_listener.h"
#include "daemon/clock.h"
#include "gtest/gtest.h"
#include "rocetune_job.h"
#include "tests/testing/test_support.h"

namespace rocetune {
namespace {

constexpr int kRanks = 4;
constexpr int kSteps = 200;

// Runs `argv` with `env` added to this process's environment; its exit code
// (-1 when it could not run or was killed). Output goes to `log`.
int RunProgram(const std::vector<std::string>& argv, const std::vector<std::string>& env,
               const std::string& log) {
  const pid_t pid = fork();
  if (pid == 0) {
    for (const std::string& e : env) putenv(const_cast<char*>(e.c_str()));
    FILE* out = freopen(log.c_str(), "w", stdout);
    if (out == nullptr || dup2(fileno(stdout), 2) < 0) _exit(127);
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
  int status = 0;
  if (pid < 0 || waitpid(pid, &status, 0) != pid) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

class PmpiTest : public ::testing::Test {
 protected:
  void SetUp() override {
#ifndef ROCETUNE_PMPI_LIB
    GTEST_SKIP() << "Open MPI's C bindings were not found at configure time, so "
                    "librocetune-pmpi.so was not built (scripts/install-deps installs "
                    "libopenmpi-dev)";
#else
    if (access("/usr/bin/mpirun", X_OK) != 0) {
      GTEST_SKIP() << "/usr/bin/mpirun is missing (scripts/install-deps installs openmpi-bin)";
    }
    JobListenerOptions o;
    o.path = dir_.path() + "/job.sock";
    auto l = JobListener::Create(o, Clock::Real());
    ASSERT_TRUE(l.ok()) << l.status();
    listener_ = std::move(*l);
#endif
  }

  std::vector<std::string> Mpirun(bool preload) const {
    std::vector<std::string> argv = {"/usr/bin/mpirun",
                                     "-np",
                                     absl::StrCat(kRanks),
                                     "--oversubscribe",
                                     "--mca",
                                     "btl",
                                     "self,vader",
                                     "-x",
                                     "ROCETUNE_JOB_SOCKET",
                                     "-x",
                                     "ROCETUNE_JOB_ID"};
#ifdef ROCETUNE_PMPI_LIB
    if (preload) {
      argv.push_back("-x");
      argv.push_back(absl::StrCat("LD_PRELOAD=", ROCETUNE_PMPI_LIB));
    }
#endif
    argv.push_back(ROCETUNE_COLLECTIVES_PROGRAM);
    argv.push_back(absl::StrCat(kSteps));
    return argv;
  }

  std::vector<std::string> Env() const {
    return {"OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1",
            absl::StrCat("ROCETUNE_JOB_SOCKET=", listener_->path()), "ROCETUNE_JOB_ID=pmpi-test"};
  }

  testing::TempDir dir_{"pmpi"};
  std::unique_ptr<JobListener> listener_;
};

TEST_F(PmpiTest, TheAgentReceivesEveryCollectiveOfEveryRank) {
  const std::string log = dir_.path() + "/mpirun.log";
  ASSERT_EQ(RunProgram(Mpirun(true), Env(), log), 0) << testing::FixtureTree::ReadFile(log);
  const uint64_t want = kRanks * (kSteps + kSteps / 10 + 5);
  ASSERT_TRUE(
      testing::Eventually([&] { return listener_->counts().accepted == want; }, absl::Seconds(10)))
      << listener_->counts().accepted << " of " << want;
  const JobListenerCounts c = listener_->counts();
  EXPECT_EQ(c.malformed + c.oversized + c.version + c.rate_limited + c.too_many_series, 0u);
  std::map<std::string, const JobSeries*> by_op;
  std::vector<JobSeries> series = listener_->TakeSeries();
  for (const JobSeries& s : series) {
    EXPECT_EQ(s.job, "pmpi-test");
    by_op[s.op] = &s;
  }
  ASSERT_EQ(by_op.size(), 3u);
  EXPECT_EQ(by_op["allreduce"]->seconds.count(), static_cast<uint64_t>(kRanks * kSteps));
  EXPECT_EQ(by_op["allreduce"]->bytes, uint64_t{kRanks} * kSteps * 1024 * sizeof(double));
  EXPECT_EQ(by_op["alltoall"]->seconds.count(), static_cast<uint64_t>(kRanks * kSteps / 10));
  EXPECT_EQ(by_op["alltoall"]->bytes,
            uint64_t{kRanks} * (kSteps / 10) * kRanks * 256 * sizeof(int));
  EXPECT_EQ(by_op["barrier"]->seconds.count(), static_cast<uint64_t>(kRanks * 5));
  EXPECT_GT(by_op["allreduce"]->seconds.Quantile(0.5), 0);
  std::cout << "BENCH pmpi ranks=" << kRanks << " events_sent=" << want
            << " events_received=" << c.accepted
            << " allreduce_p50_us=" << by_op["allreduce"]->seconds.Quantile(0.5) * 1e6
            << " allreduce_p99_us=" << by_op["allreduce"]->seconds.Quantile(0.99) * 1e6 << "\n";
}

TEST_F(PmpiTest, WithoutTheWrapperNothingArrives) {
  const std::string log = dir_.path() + "/mpirun-plain.log";
  ASSERT_EQ(RunProgram(Mpirun(false), Env(), log), 0) << testing::FixtureTree::ReadFile(log);
  // A marker sent after mpirun exited: the listener accepts connections in
  // order and reads them in that order, so once the marker is in, anything
  // the ranks had sent would be in too.
  rocetune_job* marker = rocetune_job_open(listener_->path().c_str(), "marker");
  ASSERT_NE(marker, nullptr);
  ASSERT_EQ(rocetune_job_report(marker, "step", 1e-3, -1, 0), 0);
  rocetune_job_close(marker);
  ASSERT_TRUE(testing::Eventually([&] { return listener_->counts().accepted >= 1; }));
  std::vector<JobSeries> series = listener_->TakeSeries();
  ASSERT_EQ(series.size(), 1u);
  EXPECT_EQ(series[0].job, "marker");
  EXPECT_EQ(listener_->counts().accepted, 1u);
}

}  // namespace
}  // namespace rocetune
