#ifndef ROCETUNE_DAEMON_METRICS_EXPOSER_H_
#define ROCETUNE_DAEMON_METRICS_EXPOSER_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "prometheus/collectable.h"
#include "prometheus/exposer.h"
#include "prometheus/registry.h"

namespace rocetune {

// Serves a prometheus::Registry at http://<address>/metrics.
class MetricsExposer {
 public:
  // `address` is "host:port"; port 0 picks a free port (see port()).
  // Returns kUnavailable when the address cannot be bound.
  static absl::StatusOr<std::unique_ptr<MetricsExposer>> Start(
      const std::string& address, std::shared_ptr<prometheus::Registry> registry);

  // Stops serving; returns within milliseconds (see the .cc).
  ~MetricsExposer();
  MetricsExposer(const MetricsExposer&) = delete;
  MetricsExposer& operator=(const MetricsExposer&) = delete;

  // Serves `collectable`'s series beside the registry's from the next scrape
  // on (e.g. ProcessMetrics); kept alive until the exposer is destroyed.
  void AddCollectable(std::shared_ptr<prometheus::Collectable> collectable);

  int port() const { return port_; }
  const std::string& address() const { return address_; }

 private:
  MetricsExposer() = default;
  // Kept alive here: prometheus-cpp's exposer holds only a weak pointer.
  std::shared_ptr<prometheus::Registry> registry_;
  std::vector<std::shared_ptr<prometheus::Collectable>> extra_;
  std::unique_ptr<prometheus::Exposer> exposer_;
  int port_ = 0;
  std::string address_;
  std::string host_;  // as given to Start, without brackets
};

}  // namespace rocetune

#endif  // ROCETUNE_DAEMON_METRICS_EXPOSER_H_
