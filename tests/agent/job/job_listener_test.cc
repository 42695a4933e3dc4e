// The agent's job-signal socket (agent/job/job_listener.h) fed by the real C
// client (jobsignal/client) and by raw connections: events aggregated per
// (job, op); garbage, oversized datagrams, a wrong version, a flood from one
// process and too many series dropped and counted; the socket file's mode,
// replacement of a stale socket and refusal of another file.
#include "agent/job/job_listener.h"

#include <linux/sockios.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "daemon/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "rocetune_job.h"
#include "tests/testing/test_support.h"

namespace rocetune {
namespace {

using ::testing::HasSubstr;

class JobListenerTest : public ::testing::Test {
 protected:
  void SetUp() override { path_ = dir_.path() + "/job.sock"; }

  std::unique_ptr<JobListener> Listen(JobListenerOptions o = {}) {
    o.path = path_;
    absl::StatusOr<std::unique_ptr<JobListener>> l = JobListener::Create(o, &clock_);
    EXPECT_TRUE(l.ok()) << l.status();
    return l.ok() ? std::move(*l) : nullptr;
  }

  // `bytes` written as they are on a connection of their own, then closed;
  // false when that failed.
  bool SendRaw(const std::string& bytes) {
    const int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path_.c_str(), sizeof addr.sun_path - 1);
    bool ok = connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) == 0;
    size_t off = 0;
    while (ok && off < bytes.size()) {
      const ssize_t n = send(fd, bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL);
      ok = n > 0;
      if (ok) off += static_cast<size_t>(n);
    }
    close(fd);
    return ok;
  }

  static uint64_t Handled(const JobListenerCounts& c) {
    return c.accepted + c.oversized + c.version + c.malformed + c.rate_limited + c.too_many_series;
  }

  testing::TempDir dir_{"job-listener"};
  std::string path_;
  FakeClock clock_;
};

TEST_F(JobListenerTest, TheCClientsEventsArriveAsOneSketchPerJobAndOp) {
  auto l = Listen();
  ASSERT_NE(l, nullptr);
  rocetune_job* h = rocetune_job_open(path_.c_str(), "train-1");
  ASSERT_NE(h, nullptr);
  for (int i = 1; i <= 100; ++i) {
    ASSERT_EQ(rocetune_job_report(h, "allreduce", i * 1e-3, i % 4, 1 << 20), 0);
  }
  ASSERT_EQ(rocetune_job_report(h, "step", 0.5, -1, 0), 0);
  EXPECT_EQ(rocetune_job_sent(h), 101u);
  rocetune_job_close(h);
  ASSERT_TRUE(testing::Eventually([&] { return l->counts().accepted == 101; }))
      << l->counts().accepted;
  std::vector<JobSeries> s = l->TakeSeries();
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0].job, "train-1");
  EXPECT_EQ(s[0].op, "allreduce");
  EXPECT_EQ(s[0].seconds.count(), 100u);
  EXPECT_EQ(s[0].bytes, 100u << 20);
  EXPECT_NEAR(s[0].seconds.Quantile(0.99), 0.099, 0.099 * 0.02);
  EXPECT_EQ(s[1].op, "step");
  EXPECT_EQ(s[1].seconds.count(), 1u);
  EXPECT_TRUE(l->TakeSeries().empty());  // taken: the next window starts empty
}

TEST_F(JobListenerTest, BadLinesAreDroppedAndCountedByWhy) {
  auto l = Listen();
  ASSERT_NE(l, nullptr);
  // One connection: good and bad lines in one stream, each judged on its own.
  ASSERT_TRUE(SendRaw(std::string("RTJ1 job=j op=step us=1\n") + "\x01\x02garbage\xff\n" +
                      "RTJ9 job=j op=step us=1\n" + "RTJ1 job=j op=step us=-5\n" +
                      std::string(4000, 'A') + "\n" + "\n" + "RTJ1 job=j op=step us=2\n"));
  // A line the sender's disconnect cut short.
  ASSERT_TRUE(SendRaw("RTJ1 job=j op=st"));
  ASSERT_TRUE(testing::Eventually([&] { return Handled(l->counts()) == 8; }))
      << Handled(l->counts());
  const JobListenerCounts c = l->counts();
  EXPECT_EQ(c.accepted, 2u);
  EXPECT_EQ(c.version, 3u);    // garbage, RTJ9 and the empty line
  EXPECT_EQ(c.malformed, 2u);  // us=-5, the cut line
  EXPECT_EQ(c.oversized, 1u);
  EXPECT_THAT(l->last_refusal(), HasSubstr("disconnect"));
  std::vector<JobSeries> s = l->TakeSeries();
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].seconds.count(), 2u);
}

TEST_F(JobListenerTest, ALineSplitAcrossWritesIsOneEvent) {
  auto l = Listen();
  ASSERT_NE(l, nullptr);
  const int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path_.c_str(), sizeof addr.sun_path - 1);
  ASSERT_EQ(connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr), 0);
  for (const char* part :
       {"RTJ1 job=j op=al", "lreduce us=12", "5 rank=1\nRTJ1 job=j op=allreduce", " us=5\n"}) {
    ASSERT_GT(send(fd, part, std::strlen(part), MSG_NOSIGNAL), 0);
    // The next part goes only once the agent has read this one (nothing of
    // it left in the connection's queue), so each arrives in a read of its own.
    ASSERT_TRUE(testing::Eventually([&] {
      int queued = -1;
      return ioctl(fd, SIOCOUTQ, &queued) == 0 && queued == 0;
    }));
  }
  ASSERT_TRUE(testing::Eventually([&] { return l->counts().accepted == 2; }));
  close(fd);
  std::vector<JobSeries> s = l->TakeSeries();
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].op, "allreduce");
  EXPECT_EQ(s[0].seconds.count(), 2u);
  EXPECT_EQ(l->counts().malformed, 0u);
}

TEST_F(JobListenerTest, AFloodFromOneProcessIsCutToItsBucket) {
  JobListenerOptions o;
  o.max_events_per_second = 100;
  o.burst = 50;
  auto l = Listen(o);
  ASSERT_NE(l, nullptr);
  rocetune_job* h = rocetune_job_open(path_.c_str(), "flood");
  ASSERT_NE(h, nullptr);
  int sent = 0;
  for (int i = 0; i < 200; ++i) sent += rocetune_job_report(h, "step", 1e-3, 0, 0) == 0;
  ASSERT_TRUE(
      testing::Eventually([&] { return Handled(l->counts()) == static_cast<uint64_t>(sent); }));
  // The fake clock stands still: the burst of 50 and nothing more.
  EXPECT_EQ(l->counts().accepted, 50u);
  EXPECT_EQ(l->counts().rate_limited, static_cast<uint64_t>(sent - 50));
  clock_.Advance(absl::Seconds(1));  // 100 tokens more, capped at the burst
  for (int i = 0; i < 60; ++i) ASSERT_EQ(rocetune_job_report(h, "step", 1e-3, 0, 0), 0);
  ASSERT_TRUE(testing::Eventually(
      [&] { return Handled(l->counts()) == static_cast<uint64_t>(sent + 60); }));
  EXPECT_EQ(l->counts().accepted, 100u);
  rocetune_job_close(h);
}

TEST_F(JobListenerTest, SeriesBeyondTheCapAreDroppedUntilTaken) {
  JobListenerOptions o;
  o.max_series = 3;
  auto l = Listen(o);
  ASSERT_NE(l, nullptr);
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(SendRaw(absl::StrCat("RTJ1 job=j", i, " op=step us=1\n")));
  }
  ASSERT_TRUE(testing::Eventually([&] { return Handled(l->counts()) == 5; }));
  EXPECT_EQ(l->counts().too_many_series, 2u);
  EXPECT_EQ(l->TakeSeries().size(), 3u);
  ASSERT_TRUE(SendRaw("RTJ1 job=j4 op=step us=1\n"));
  ASSERT_TRUE(testing::Eventually([&] { return Handled(l->counts()) == 6; }));
  EXPECT_EQ(l->TakeSeries().size(), 1u);
}

TEST_F(JobListenerTest, TheSocketIsGroupWritableReplacesAStaleOneAndIsRemovedAtTheEnd) {
  {
    auto first = Listen();
    ASSERT_NE(first, nullptr);
  }
  struct stat st {};
  EXPECT_NE(lstat(path_.c_str(), &st), 0);  // removed by the destructor
  // A stale socket left by a killed agent is replaced.
  const int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path_.c_str(), sizeof addr.sun_path - 1);
  ASSERT_EQ(bind(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr), 0);
  close(fd);
  auto l = Listen();
  ASSERT_NE(l, nullptr);
  ASSERT_EQ(lstat(path_.c_str(), &st), 0);
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0660u);
  ASSERT_TRUE(SendRaw("RTJ1 job=j op=step us=1\n"));
  EXPECT_TRUE(testing::Eventually([&] { return l->counts().accepted == 1; }));
}

TEST_F(JobListenerTest, DoesNotTakeOverASocketAnotherListenerServes) {
  auto first = Listen();
  ASSERT_NE(first, nullptr);
  JobListenerOptions o;
  o.path = path_;
  absl::StatusOr<std::unique_ptr<JobListener>> second = JobListener::Create(o, &clock_);
  ASSERT_FALSE(second.ok());
  EXPECT_THAT(second.status().message(), HasSubstr("another process listens on it"));
  // The first one still serves.
  ASSERT_TRUE(SendRaw("RTJ1 job=j op=step us=1\n"));
  EXPECT_TRUE(testing::Eventually([&] { return first->counts().accepted == 1; }));
}

TEST_F(JobListenerTest, RefusesAFileThatIsNotASocketAndAGroupThatDoesNotExist) {
  std::ofstream(path_) << "not a socket";
  JobListenerOptions o;
  o.path = path_;
  absl::StatusOr<std::unique_ptr<JobListener>> l = JobListener::Create(o, &clock_);
  ASSERT_FALSE(l.ok());
  EXPECT_THAT(l.status().message(), HasSubstr("is not a socket"));
  std::ifstream in(path_);
  std::string kept;
  std::getline(in, kept);
  EXPECT_EQ(kept, "not a socket");  // left as it was

  o.path = dir_.path() + "/other.sock";
  o.group = "no-such-group-rocetune";
  l = JobListener::Create(o, &clock_);
  ASSERT_FALSE(l.ok());
  EXPECT_THAT(l.status().message(), HasSubstr("no-such-group-rocetune: no such group"));
  o.path = "";
  o.group = "";
  l = JobListener::Create(o, &clock_);
  ASSERT_FALSE(l.ok());
  EXPECT_THAT(l.status().message(), HasSubstr("--job_socket="));
}

TEST_F(JobListenerTest, TheClientDropsWithoutBlockingWhenNoAgentListens) {
  rocetune_job* h = rocetune_job_open(path_.c_str(), "j");
  ASSERT_NE(h, nullptr);
  const int rc = rocetune_job_report(h, "step", 1e-3, 0, 0);
  EXPECT_TRUE(rc == -ENOENT || rc == -ECONNREFUSED) << rc;
  EXPECT_EQ(rocetune_job_report(h, "Bad Op", 1e-3, 0, 0), -EINVAL);
  EXPECT_EQ(rocetune_job_report(h, "step", -1, 0, 0), -EINVAL);
  EXPECT_EQ(rocetune_job_dropped(h), 3u);
  EXPECT_EQ(rocetune_job_sent(h), 0u);
  rocetune_job_close(h);
  EXPECT_EQ(rocetune_job_open(path_.c_str(), "bad job"), nullptr);
  EXPECT_EQ(errno, EINVAL);
}

}  // namespace
}  // namespace rocetune
