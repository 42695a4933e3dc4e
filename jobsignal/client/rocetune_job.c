/* rocetune job signal client (rocetune_job.h): formats wire version RTJ1 (model/job_event.h),
 * one line per event, and writes it without blocking to a stream connection to the agent's
 * Unix socket, connecting (again) when needed, at most once a second while it fails. */
#include "rocetune_job.h"

#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

struct rocetune_job {
  int fd;            /* -1: not connected */
  double retry_at;   /* monotonic seconds: no connect before then */
  int connect_errno; /* why the last connect failed */
  struct sockaddr_un addr;
  socklen_t addr_len;
  char job[65];
  uint64_t sent;
  uint64_t dropped;
};

static int valid_chars(const char* s, size_t max, int (*ok)(char)) {
  size_t n = 0;
  if (s == NULL) return 0;
  for (; s[n] != '\0'; ++n) {
    if (n >= max || !ok(s[n])) return 0;
  }
  return n > 0;
}

static int job_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '_' || c == ':' || c == '@' || c == '/' || c == '-';
}

static int op_char(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_'; }

rocetune_job* rocetune_job_open(const char* socket_path, const char* job) {
  if (!valid_chars(job, 64, job_char)) {
    errno = EINVAL;
    return NULL;
  }
  const char* path = socket_path;
  if (path == NULL || path[0] == '\0') path = getenv("ROCETUNE_JOB_SOCKET");
  if (path == NULL || path[0] == '\0') path = ROCETUNE_JOB_DEFAULT_SOCKET;
  rocetune_job* h = calloc(1, sizeof *h);
  if (h == NULL) return NULL;
  if (strlen(path) >= sizeof h->addr.sun_path) {
    free(h);
    errno = ENAMETOOLONG;
    return NULL;
  }
  h->fd = -1;
  h->addr.sun_family = AF_UNIX;
  memcpy(h->addr.sun_path, path, strlen(path) + 1);
  h->addr_len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + strlen(path) + 1);
  memcpy(h->job, job, strlen(job) + 1);
  return h;
}

static double monotonic_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void disconnect(rocetune_job* h) {
  if (h->fd >= 0) close(h->fd);
  h->fd = -1;
}

/* 0 when connected; a negative errno when not (then no new try for a second). */
static int ensure_connected(rocetune_job* h) {
  if (h->fd >= 0) return 0;
  const double now = monotonic_seconds();
  if (now < h->retry_at) return -h->connect_errno;
  h->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (h->fd >= 0 && connect(h->fd, (const struct sockaddr*)&h->addr, h->addr_len) == 0) return 0;
  h->connect_errno = errno != 0 ? errno : ECONNREFUSED;
  h->retry_at = now + 1.0;
  disconnect(h);
  return -h->connect_errno;
}

int rocetune_job_report(rocetune_job* h, const char* op, double seconds, int64_t rank,
                        uint64_t bytes) {
  if (h == NULL) return -EINVAL;
  if (!valid_chars(op, 32, op_char) || !isfinite(seconds) || seconds < 0 || seconds > 3600 ||
      rank < -1 || rank >= (1 << 24) || bytes > (1ULL << 50)) {
    h->dropped++;
    return -EINVAL;
  }
  char msg[512];
  int n = snprintf(msg, sizeof msg, "RTJ1 job=%s op=%s us=%.3f", h->job, op, seconds * 1e6);
  if (rank >= 0) n += snprintf(msg + n, sizeof msg - (size_t)n, " rank=%lld", (long long)rank);
  if (bytes > 0) {
    n += snprintf(msg + n, sizeof msg - (size_t)n, " bytes=%llu", (unsigned long long)bytes);
  }
  msg[n++] = '\n';
  const int c = ensure_connected(h);
  if (c != 0) {
    h->dropped++;
    return c;
  }
  const ssize_t w = send(h->fd, msg, (size_t)n, MSG_DONTWAIT | MSG_NOSIGNAL);
  if (w == (ssize_t)n) {
    h->sent++;
    return 0;
  }
  h->dropped++;
  if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return -EAGAIN; /* agent behind */
  /* The agent went away, or wrote part of the line (the agent counts the cut line): start
   * a fresh connection next time. */
  const int e = w < 0 ? errno : EPIPE;
  disconnect(h);
  return -e;
}

uint64_t rocetune_job_sent(const rocetune_job* h) { return h == NULL ? 0 : h->sent; }
uint64_t rocetune_job_dropped(const rocetune_job* h) { return h == NULL ? 0 : h->dropped; }

void rocetune_job_close(rocetune_job* h) {
  if (h == NULL) return;
  disconnect(h);
  free(h);
}
