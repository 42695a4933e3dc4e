/* rocetune job signal client: tells the local rocetune agent how long a training job's
 * step or collective took (docs/job-signal.md). C, callable from C++ and, through ctypes,
 * Python. Link with -lrocetune-job.
 *
 * Sending never blocks and never fails the job: when the agent is not running, its socket
 * is full or the path is wrong, the event is dropped and rocetune_job_report returns a
 * negative errno the caller may ignore. One handle per thread, or lock around it. */
#ifndef ROCETUNE_JOB_H_
#define ROCETUNE_JOB_H_

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The agent's socket when neither the path argument nor ROCETUNE_JOB_SOCKET names one. */
#define ROCETUNE_JOB_DEFAULT_SOCKET "/run/rocetune/job.sock"

typedef struct rocetune_job rocetune_job;

/* A handle that sends to `socket_path` (NULL or "": $ROCETUNE_JOB_SOCKET, else the default)
 * for job `job` (1-64 of A-Z a-z 0-9 . _ : @ / -). NULL when out of memory or when `job` is not
 * a valid job id or the path too long for a Unix socket; errno says which (ENOMEM, EINVAL,
 * ENAMETOOLONG). The agent need not be running yet. */
rocetune_job* rocetune_job_open(const char* socket_path, const char* job);

/* One event: operation `op` (1-32 of a-z 0-9 _, e.g. "allreduce", "step") took `seconds`
 * on rank `rank` (-1: not given) over `bytes` bytes (0: not given). 0 when sent; a negative
 * errno when not (-EINVAL for a bad op or value, -EAGAIN when the agent's queue is full,
 * -ENOENT or -ECONNREFUSED when no agent listens). */
int rocetune_job_report(rocetune_job* h, const char* op, double seconds, int64_t rank,
                        uint64_t bytes);

/* Events sent and dropped by this handle so far. */
uint64_t rocetune_job_sent(const rocetune_job* h);
uint64_t rocetune_job_dropped(const rocetune_job* h);

void rocetune_job_close(rocetune_job* h);

#ifdef __cplusplus
}
#endif

#endif /* ROCETUNE_JOB_H_ */
