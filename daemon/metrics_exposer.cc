#include "daemon/metrics_exposer.h"

#include <exception>

#include "absl/strings/str_cat.h"

namespace rocetune {

absl::StatusOr<std::unique_ptr<MetricsExposer>> MetricsExposer::Start(
    const std::string& address, std::shared_ptr<prometheus::Registry> registry) {
  auto out = std::unique_ptr<MetricsExposer>(new MetricsExposer());
  // prometheus-cpp (civetweb) reports bind failures by throwing; this is the
  // boundary where that becomes a Status.
  try {
    out->exposer_ = std::make_unique<prometheus::Exposer>(address, /*num_threads=*/1);
  } catch (const std::exception& e) {
    return absl::UnavailableError(
        absl::StrCat("cannot serve metrics on ", address, ": ", e.what()));
  }
  out->exposer_->RegisterCollectable(registry);
  auto ports = out->exposer_->GetListeningPorts();
  if (ports.empty()) {
    return absl::UnavailableError(absl::StrCat("cannot serve metrics on ", address));
  }
  out->port_ = ports.front();
  std::string host = address.substr(0, address.rfind(':'));
  out->address_ = absl::StrCat(host, ":", out->port_);
  return out;
}

}  // namespace rocetune
