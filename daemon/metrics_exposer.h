#ifndef ROCETUNE_DAEMON_METRICS_EXPOSER_H_
#define ROCETUNE_DAEMON_METRICS_EXPOSER_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
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

  int port() const { return port_; }
  const std::string& address() const { return address_; }

 private:
  MetricsExposer() = default;
  std::unique_ptr<prometheus::Exposer> exposer_;
  int port_ = 0;
  std::string address_;
};

}  // namespace rocetune

#endif  // ROCETUNE_DAEMON_METRICS_EXPOSER_H_
