#ifndef ROCETUNE_BENCH_PROC_STATS_H_
#define ROCETUNE_BENCH_PROC_STATS_H_

#include <sys/types.h>

namespace rocetune::bench {

// utime + stime of process `pid` so far, in seconds (/proc/<pid>/stat); -1 if
// it cannot be read.
double ProcessCpuSeconds(pid_t pid);

// Resident set size of process `pid` in KiB (VmRSS in /proc/<pid>/status);
// -1 if it cannot be read.
long ProcessRssKb(pid_t pid);

}  // namespace rocetune::bench

#endif  // ROCETUNE_BENCH_PROC_STATS_H_
