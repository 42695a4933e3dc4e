#ifndef ROCETUNE_AGENT_JOB_JOB_LISTENER_H_
#define ROCETUNE_AGENT_JOB_JOB_LISTENER_H_

// The agent's end of the job signal (docs/job-signal.md): a Unix stream
// socket to which training jobs (the C client, the PMPI wrapper, a few lines
// of Python) connect and write one line per step or collective, in the wire
// format of model/job_event.h. One thread of its own serves every
// connection, so a flood costs that thread and never the sampling loop; every
// line is either aggregated into a mergeable sketch per (job, op) or dropped
// and counted under why. A stream, not datagrams: a Unix datagram queue holds
// net.unix.max_dgram_qlen messages (10 on a kernel no sysctl raised), which
// one burst of ranks overflows; a stream buffers hundreds of kilobytes.

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "daemon/clock.h"
#include "model/job_event.h"
#include "model/quantile_sketch.h"

namespace rocetune {

struct JobListenerOptions {
  std::string path;  // the socket's path; its directory must exist
  // The group that may write to the socket (mode 0660); "" leaves the
  // agent's own group. A group that does not exist is an error.
  std::string group;
  // Per sending process (its pid, from SO_PEERCRED): a token bucket.
  double max_events_per_second = 10000;
  double burst = 20000;
  // Every sender together (bursts of twice this): a job that forks a
  // process per event gets a bucket per process, but no more than this.
  double max_events_per_second_total = 100000;
  // Distinct (job, op) series kept between two TakeSeries calls; events of
  // further series are dropped and counted.
  size_t max_series = 64;
  // Connections served at once; more are closed at once and counted.
  size_t max_connections = 256;
};

// Lines by outcome since the listener started (a line cut by the sender's
// disconnect counts as malformed), and connections refused for the cap.
struct JobListenerCounts {
  uint64_t accepted = 0;
  uint64_t oversized = 0;
  uint64_t version = 0;
  uint64_t malformed = 0;
  uint64_t rate_limited = 0;
  uint64_t too_many_series = 0;
  uint64_t connections_refused = 0;  // over max_connections, or out of descriptors
};

struct JobSeries {
  std::string job;
  std::string op;
  QuantileSketch seconds;  // one value per event
  uint64_t bytes = 0;      // summed over the events
};

class JobListener {
 public:
  // Binds `options.path` (a stale socket file there is replaced; any other
  // file is an error), sets its group and mode, and starts reading.
  static absl::StatusOr<std::unique_ptr<JobListener>> Create(JobListenerOptions options,
                                                             Clock* clock);
  ~JobListener();  // stops the thread and removes the socket file
  JobListener(const JobListener&) = delete;
  JobListener& operator=(const JobListener&) = delete;

  // The series aggregated since the last call (ordered by job, then op);
  // the listener starts afresh.
  std::vector<JobSeries> TakeSeries();
  JobListenerCounts counts() const;
  // The last refused line's reason ("" when none), for the log.
  std::string last_refusal() const;
  const std::string& path() const { return options_.path; }

 private:
  JobListener(JobListenerOptions options, Clock* clock, int fd, int wake_read, int wake_write);
  struct Connection {
    int fd = -1;
    pid_t pid = 0;
    std::string pending;    // the start of a line not yet ended
    bool skipping = false;  // in an oversized line: drop up to its newline
  };
  void Loop();
  void Accept();
  // Reads what `c` has; false when it closed (or failed) and must go.
  bool Read(Connection* c);
  void Handle(absl::string_view line, pid_t pid);
  void Count(JobEventError e, const std::string& reason);
  void CountLocked(JobEventError e, const std::string& reason) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool Admit(pid_t pid) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  struct Bucket {
    // Adds what `rate` gave since `last`, up to `burst`.
    void Refill(double rate, double burst, absl::Duration now);
    double tokens = 0;
    absl::Duration last;
  };

  const JobListenerOptions options_;
  Clock* const clock_;
  const int fd_;
  const int wake_read_;
  const int wake_write_;
  mutable absl::Mutex mu_;
  std::map<std::pair<std::string, std::string>, JobSeries> series_ ABSL_GUARDED_BY(mu_);
  std::map<pid_t, Bucket> buckets_ ABSL_GUARDED_BY(mu_);
  Bucket total_ ABSL_GUARDED_BY(mu_);
  JobListenerCounts counts_ ABSL_GUARDED_BY(mu_);
  std::string last_refusal_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

}  // namespace rocetune

#endif  // ROCETUNE_AGENT_JOB_JOB_LISTENER_H_
