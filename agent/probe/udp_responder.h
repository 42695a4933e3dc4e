#ifndef ROCETUNE_AGENT_PROBE_UDP_RESPONDER_H_
#define ROCETUNE_AGENT_PROBE_UDP_RESPONDER_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "daemon/clock.h"

namespace rocetune {

// Answers UDP probe requests at once, from its own thread. Each reply echoes the
// request's session and sequence number and size, and carries the responder's
// processing delay (receive to send, monotonic clock). Anything that is not a
// well-formed request is counted and logged once, never answered.
class UdpResponder {
 public:
  struct Options {
    std::string listen_address = "127.0.0.1:0";  // port 0 picks a free port
    Clock* clock = nullptr;                      // nullptr: Clock::Real()
    // Held before each reply and included in the reported delay (tests, to
    // emulate a busy host).
    absl::Duration added_delay = absl::ZeroDuration();
  };
  struct Stats {
    uint64_t answered = 0;
    uint64_t malformed = 0;
    uint64_t ignored = 0;  // well-formed but not a request
  };

  // kInvalidArgument for a bad address, kUnavailable when the socket cannot be bound.
  static absl::StatusOr<std::unique_ptr<UdpResponder>> Start(const Options& options);
  ~UdpResponder();
  UdpResponder(const UdpResponder&) = delete;
  UdpResponder& operator=(const UdpResponder&) = delete;

  // Stops answering and joins the thread. Idempotent.
  void Stop();
  // The bound address, e.g. "127.0.0.1:40123".
  std::string address() const { return address_; }
  int port() const { return port_; }
  Stats stats() const;

 private:
  UdpResponder(const Options& options, int fd, int stop_fd);
  void Loop();

  const Options options_;
  Clock* const clock_;
  const int fd_;
  const int stop_fd_;
  std::string address_;
  int port_ = 0;
  std::atomic<uint64_t> answered_{0};
  std::atomic<uint64_t> malformed_{0};
  std::atomic<uint64_t> ignored_{0};
  std::thread thread_;
  bool stopped_ = false;
};

}  // namespace rocetune

#endif  // ROCETUNE_AGENT_PROBE_UDP_RESPONDER_H_
