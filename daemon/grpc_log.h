#ifndef ROCETUNE_DAEMON_GRPC_LOG_H_
#define ROCETUNE_DAEMON_GRPC_LOG_H_

#include <cstdint>

#include "absl/time/time.h"

namespace rocetune {

// Routes gRPC's own log lines (gpr_log: handshake failures, malformed HTTP/2
// from a client, ...) into rocetune's logfmt log (component "grpc"), bounded:
// each message cut to 300 bytes with control and non-ASCII bytes escaped, and
// at most `burst` lines per `period`. What is held back is counted and
// reported in one "gRPC log lines suppressed" line when the next period
// starts. Without this, garbage sent to a daemon's port produces one raw,
// unbounded line per connection on stderr. Calling it again sets the limits and
// starts a new period.
void RouteGrpcLogs(int burst = 20, absl::Duration period = absl::Seconds(10));

// Lines held back since the process started (tests).
uint64_t GrpcLogLinesSuppressed();

}  // namespace rocetune

#endif  // ROCETUNE_DAEMON_GRPC_LOG_H_
