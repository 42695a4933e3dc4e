// A load generator for AgentService.Connect that speaks HTTP/2 and gRPC's
// message framing itself, over nonblocking sockets driven by one epoll loop
// (as h2load does for HTTP): N TCP connections to a server on loopback, one
// Connect stream on each (stream id 1), a Hello and then Reports whose bytes are
// spliced per send. The server cannot tell it from a gRPC client (same frames on
// the wire), and a Report costs the generator little more than its send().
//
// Commands, one per line on `command_fd`, after it has printed
// "CONNECTED <up> <failed>" (every connection up or failed, or the connect
// deadline passed):
//   flood      every stream sends Reports in a closed loop: the next one as
//              soon as the server has read the previous (at most
//              `flood_inflight` not yet credited back, never beyond the HTTP/2
//              windows);
//   pace <R>   R Reports/s in total, round-robin over the streams; a stream that
//              cannot send now (failed, unsent bytes, no window) is skipped;
//   idle       stop sending;
//   sent       prints "SENT <Reports passed to send()>";
//   quit       returns (EOF on `command_fd` too).
#ifndef ROCETUNE_BENCH_H2_AGENT_LOAD_H_
#define ROCETUNE_BENCH_H2_AGENT_LOAD_H_

#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace rocetune::bench {

struct H2AgentLoadOptions {
  int port = 0;     // on 127.0.0.1
  int streams = 0;  // connections, one stream each
  int first = 0;    // index passed to `hello` and `report_body` for the first stream
  // Serialized AgentMessage (a Hello) that stream `i` sends first.
  std::function<std::string(int i)> hello;
  // Serialized Report of stream `i` without seq, start_unix_nanos and
  // end_unix_nanos: those are serialized in front of it per send (protobuf
  // messages concatenate), end_unix_nanos = the time of the send.
  std::function<std::string(int i)> report_body;
  // Flood: Reports a stream may have sent that the server has not yet credited
  // back with a stream WINDOW_UPDATE. 2: the server finds the next Report
  // waiting when it has read one (with 1 every read wakes it for one Report;
  // 10k streams against the controller: 25.5k Reports/s at 58.7 µs of server CPU
  // each with 1, 41.7k/s at 36.4 µs with 2).
  int flood_inflight = 2;
  // Connections being set up at once.
  int connect_batch = 200;
  absl::Duration connect_deadline = absl::Seconds(180);
  // Logs every frame the first connection receives to stderr (debugging).
  bool trace = false;
};

// What the generator saw; also printed as one line to stderr at quit.
struct H2AgentLoadStats {
  int up = 0;      // streams that completed the handshake (Hello written, SETTINGS read)
  int failed = 0;  // streams that failed, before or after being up
  // Reports started: passed to send() whole, or as much as the HTTP/2 windows
  // allowed (split_by_window) with the rest sent as credit returns. What the
  // kernel refused stays queued and goes out on EPOLLOUT: the server gets
  // every one while the loop runs.
  uint64_t sent = 0;
  uint64_t frames_in[10] = {};  // received, by HTTP/2 frame type (0 DATA .. 9 CONTINUATION)
  uint64_t frames_in_other = 0;
  uint64_t data_bytes_in = 0;
  uint64_t window_updates_out = 0;
  // Failure causes.
  int connect_errors = 0;
  int eof = 0;  // the server closed the connection, or a socket error
  int rst_stream = 0;
  int goaway = 0;
  int end_stream = 0;  // the server ended the stream (trailers)
  int protocol_errors = 0;
  // Send side.
  uint64_t send_calls = 0;
  uint64_t partial_sends = 0;   // send() took part of a buffer (rest queued, EPOLLOUT)
  uint64_t window_blocked = 0;  // a send wanted was refused by an HTTP/2 window
  // Reports larger than the send window when sent: what the window allowed
  // went at once, the rest as the server returned credit.
  uint64_t split_by_window = 0;
  std::string first_failure;  // which stream failed first, and why
  // At quit: open streams with a message the server has not credited back yet
  // (after a drained idle phase 0 if the server returns window per message read).
  int awaiting_credit = 0;

  std::string Summary() const;
};

// Runs until "quit" or EOF on `command_fd`; replies go to `reply` (flushed per
// line). Errors: the event loop's own setup (epoll, timerfd) failing.
absl::StatusOr<H2AgentLoadStats> RunH2AgentLoad(const H2AgentLoadOptions& options, int command_fd,
                                                FILE* reply);

}  // namespace rocetune::bench

#endif  // ROCETUNE_BENCH_H2_AGENT_LOAD_H_
