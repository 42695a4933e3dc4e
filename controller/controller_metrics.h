#ifndef ROCETUNE_CONTROLLER_CONTROLLER_METRICS_H_
#define ROCETUNE_CONTROLLER_CONTROLLER_METRICS_H_

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "controller/fleet/fleet.h"
#include "controller/rollout/rollout_metrics.h"
#include "controller/telemetry/telemetry_store.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"

namespace rocetune::controller {

// Why an agent message was refused.
enum class Rejection {
  kNoIdentity,     // Hello without host_id / malformed Hello
  kNotRegistered,  // Report / Ack / Nack before Hello
  kBadReport,      // a Report failing validation
  kUnknownNonce,   // Ack / Nack for a nonce or version this stream never sent
  kBadMessage,     // empty or unknown message, second Hello
  kUnparseable,    // bytes that are not an AgentMessage
  kOversized,      // a message over --max_message_bytes
};

// Buckets of rocetune_controller_report_delay_seconds (also used by bench/grpc_sink).
prometheus::Histogram::BucketBoundaries ReportDelayBuckets();

// The controller's Prometheus series (docs/metrics.md). Fleet-level only: no
// per-host labels.
// Thread-safe.
class ControllerMetrics {
 public:
  ControllerMetrics();
  std::shared_ptr<prometheus::Registry> registry() const { return registry_; }
  // The tuning loop's series, on the same registry.
  RolloutMetrics& rollout() { return *rollout_; }

  // `delay_seconds`: ingestion time minus the report's end timestamp.
  void ReportReceived(double delay_seconds) {
    reports_received_->Increment();
    ++reports_received_n_;
    report_delay_->Observe(delay_seconds < 0 ? 0 : delay_seconds);
  }
  // A report the agent held while disconnected: filed in its window
  // (`filed`) or discarded as older than the retention.
  void HeldReport(bool filed) { (filed ? held_filed_ : held_discarded_)->Increment(); }
  void Rejected(Rejection why);
  void OutboundDropped() { outbound_dropped_->Increment(); }
  void Ack() { acks_->Increment(); }
  void Nack() { nacks_->Increment(); }
  void StaleReply() { stale_replies_->Increment(); }
  void StreamOpened() { streams_->Increment(); }
  void StreamClosed() { streams_->Decrement(); }
  void StoreWrite(double seconds) { store_latency_->Observe(seconds); }
  // A store write that failed with `code` (kResourceExhausted: disk full,
  // kFailedPrecondition: read-only, ...: StoreErrorCodes()).
  void StoreError(absl::StatusCode code) {
    store_errors_family_->Add({{"code", StoreErrorLabel(code)}}).Increment();
  }
  // The `code` label of `code`: its name in lower snake case
  // ("resource_exhausted").
  static std::string StoreErrorLabel(absl::StatusCode code);
  void WatchEventDropped() { watch_dropped_->Increment(); }
  // A refused TLS handshake; `reason` is one of TlsRefusalReasons().
  void TlsRefused(const std::string& reason) {
    tls_refusals_family_->Add({{"reason", reason}}).Increment();
  }

  uint64_t reports_received() const { return reports_received_n_.load(); }
  uint64_t reports_dropped() const { return reports_dropped_n_.load(); }

  // Refreshes the host-state and drift gauges.
  void UpdateFleet(const FleetCounts& counts);
  // Refreshes the telemetry footprint gauges (windows held, their memory).
  void UpdateTelemetry(size_t windows, size_t bytes) {
    telemetry_windows_->Set(static_cast<double>(windows));
    telemetry_bytes_->Set(static_cast<double>(bytes));
  }
  // Refreshes the per-group gauges (group = value of the grouping label).
  // Groups absent from `groups` are removed.
  void UpdateGroups(const std::map<std::string, TelemetrySummary>& groups);

 private:
  std::shared_ptr<prometheus::Registry> registry_;
  std::unique_ptr<RolloutMetrics> rollout_;
  prometheus::Gauge* telemetry_windows_;
  prometheus::Gauge* telemetry_bytes_;
  prometheus::Counter* reports_received_;
  prometheus::Counter* held_filed_;
  prometheus::Counter* held_discarded_;
  std::atomic<uint64_t> reports_received_n_{0};
  std::atomic<uint64_t> reports_dropped_n_{0};
  prometheus::Family<prometheus::Counter>* rejected_family_;
  prometheus::Family<prometheus::Counter>* dropped_family_;
  prometheus::Counter* outbound_dropped_;
  prometheus::Counter* acks_;
  prometheus::Counter* nacks_;
  prometheus::Counter* stale_replies_;
  prometheus::Counter* watch_dropped_;
  prometheus::Family<prometheus::Counter>* tls_refusals_family_;
  prometheus::Gauge* streams_;
  prometheus::Histogram* store_latency_;
  prometheus::Family<prometheus::Counter>* store_errors_family_;
  prometheus::Histogram* report_delay_;
  prometheus::Family<prometheus::Gauge>* hosts_family_;
  prometheus::Gauge* hosts_connected_;
  prometheus::Gauge* hosts_stale_;
  prometheus::Gauge* hosts_gone_;
  prometheus::Gauge* hosts_drifted_;
  prometheus::Family<prometheus::Gauge>* group_rtt_;
  prometheus::Family<prometheus::Gauge>* group_cnp_;
  prometheus::Family<prometheus::Gauge>* group_pfc_;
  prometheus::Family<prometheus::Gauge>* group_hosts_;

  absl::Mutex groups_mu_;
  std::map<std::string, std::vector<prometheus::Gauge*>> group_gauges_ ABSL_GUARDED_BY(groups_mu_);
};

}  // namespace rocetune::controller

#endif  // ROCETUNE_CONTROLLER_CONTROLLER_METRICS_H_
