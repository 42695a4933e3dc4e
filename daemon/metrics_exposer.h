#ifndef ROCETUNE_DAEMON_METRICS_EXPOSER_H_
#define ROCETUNE_DAEMON_METRICS_EXPOSER_H_

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "prometheus/collectable.h"
#include "prometheus/registry.h"

namespace rocetune {

// Serves a prometheus::Registry at http://<address>/metrics.
//
// A small event-driven HTTP/1.1 server: one thread poll()s the listening
// socket, an eventfd that wakes it for shutdown, and every open connection;
// no thread per connection, so slow clients cannot hold it up. Each
// connection gets one answer and is then closed (`Connection: close`):
//   - GET or HEAD /metrics (a query string is ignored): 200, text exposition
//     format 0.0.4 of the registry's families followed by every
//     AddCollectable's; GET / points at /metrics; other paths 404, other
//     methods 405, a malformed request line 400.
//   - The request header may be at most 8 KiB (else 431) and must end within
//     5 s of the accept (else the connection is closed without an answer).
//   - The answer must be written within 5 s of the end of the header (else
//     the connection is closed); afterwards the write side is shut down and
//     whatever the client still sends is read and dropped for up to 2 s, so
//     that the close does not reset the connection under the answer.
//   - At most 256 connections are open at once. A new connection at the cap
//     closes the oldest one that has already been answered and is only
//     lingering, else the oldest one that has not finished sending its
//     header; if every connection is being answered, the new one is closed.
//     So a flood of slow or idle clients is evicted by new arrivals and a
//     real scrape, which completes in milliseconds, gets through.
// Collection (Registry::Collect, Collectable::Collect) and serialization run
// on the server thread; a collectable that throws gets the scrape a 500.
class MetricsExposer {
 public:
  // `address` is "host:port" or "[v6]:port"; port 0 picks a free port (see
  // port()); a host of 0.0.0.0 or :: listens on every address. Returns
  // kInvalidArgument when `address` is not of that form and kUnavailable,
  // naming the address and the reason, when it cannot be bound.
  static absl::StatusOr<std::unique_ptr<MetricsExposer>> Start(
      const std::string& address, std::shared_ptr<prometheus::Registry> registry);

  // Stops serving and closes every connection; returns within milliseconds.
  ~MetricsExposer();
  MetricsExposer(const MetricsExposer&) = delete;
  MetricsExposer& operator=(const MetricsExposer&) = delete;

  // Serves `collectable`'s series beside the registry's from the next scrape
  // on (e.g. ProcessMetrics); kept alive until the exposer is destroyed.
  // Thread-safe; may be called while serving.
  void AddCollectable(std::shared_ptr<prometheus::Collectable> collectable);

  int port() const { return port_; }
  // "host:port" with the port actually bound (brackets kept for IPv6).
  const std::string& address() const { return address_; }

 private:
  MetricsExposer() = default;

  // The server thread: runs until wake_fd_ becomes readable.
  void Serve();
  // The text exposition of the registry and every collectable.
  std::string Render() const;

  std::shared_ptr<prometheus::Registry> registry_;
  mutable absl::Mutex mu_;
  std::vector<std::shared_ptr<prometheus::Collectable>> extra_ ABSL_GUARDED_BY(mu_);
  int listen_fd_ = -1;
  int wake_fd_ = -1;  // eventfd; written once by the destructor
  std::thread thread_;
  int port_ = 0;
  std::string address_;
};

}  // namespace rocetune

#endif  // ROCETUNE_DAEMON_METRICS_EXPOSER_H_
