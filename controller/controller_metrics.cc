#include "controller/controller_metrics.h"

#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "controller/store/store.h"
#include "daemon/client_cert_verifier.h"

namespace rocetune::controller {
namespace {

const char* RejectionReason(Rejection why) {
  switch (why) {
    case Rejection::kNoIdentity:
      return "no_identity";
    case Rejection::kNotRegistered:
      return "not_registered";
    case Rejection::kBadReport:
      return "bad_report";
    case Rejection::kUnknownNonce:
      return "unknown_nonce";
    case Rejection::kBadMessage:
      return "bad_message";
    case Rejection::kUnparseable:
      return "unparseable";
    case Rejection::kOversized:
      return "oversized";
  }
  return "other";
}

constexpr double kQuantiles[] = {0.5, 0.99, 0.999};
constexpr const char* kQuantileLabels[] = {"0.5", "0.99", "0.999"};

}  // namespace

prometheus::Histogram::BucketBoundaries ReportDelayBuckets() {
  return {0.0001, 0.00025, 0.0005, 0.001, 0.002, 0.003, 0.005, 0.0075, 0.01, 0.015, 0.02, 0.03,
          0.04,   0.05,    0.075,  0.1,   0.15,  0.2,   0.3,   0.5,    1,    2,     5,    10};
}

std::string ControllerMetrics::StoreErrorLabel(absl::StatusCode code) {
  return absl::AsciiStrToLower(absl::StatusCodeToString(code));
}

ControllerMetrics::ControllerMetrics()
    : registry_(std::make_shared<prometheus::Registry>()),
      rollout_(std::make_unique<RolloutMetrics>(*registry_)) {
  auto& r = *registry_;
  reports_received_ = &prometheus::BuildCounter()
                           .Name("rocetune_controller_reports_received_total")
                           .Help("Agent reports accepted into telemetry.")
                           .Register(r)
                           .Add({});
  auto& held = prometheus::BuildCounter()
                   .Name("rocetune_controller_held_reports_total")
                   .Help(
                       "Reports an agent held while disconnected and sent on reconnect: filed "
                       "in the window of their time, or discarded as older than --retention.")
                   .Register(r);
  held_filed_ = &held.Add({{"outcome", "filed"}});
  held_discarded_ = &held.Add({{"outcome", "discarded"}});
  dropped_family_ = &prometheus::BuildCounter()
                         .Name("rocetune_controller_reports_dropped_total")
                         .Help("Agent reports refused and not stored, by reason.")
                         .Register(r);
  rejected_family_ = &prometheus::BuildCounter()
                          .Name("rocetune_controller_agent_messages_rejected_total")
                          .Help("Agent messages refused with an error status, by reason.")
                          .Register(r);
  for (Rejection why : {Rejection::kNoIdentity, Rejection::kNotRegistered, Rejection::kBadReport,
                        Rejection::kUnknownNonce, Rejection::kBadMessage, Rejection::kUnparseable,
                        Rejection::kOversized}) {
    rejected_family_->Add({{"reason", RejectionReason(why)}});
  }
  dropped_family_->Add({{"reason", "bad_report"}});
  tls_refusals_family_ = &prometheus::BuildCounter()
                              .Name("rocetune_controller_tls_refusals_total")
                              .Help("TLS handshakes refused for the client certificate, by reason.")
                              .Register(r);
  for (const std::string& reason : TlsRefusalReasons()) {
    tls_refusals_family_->Add({{"reason", reason}});
  }
  dropped_family_->Add({{"reason", "not_registered"}});
  outbound_dropped_ = &prometheus::BuildCounter()
                           .Name("rocetune_controller_outbound_dropped_total")
                           .Help("Messages to agents dropped because a stream's queue was full.")
                           .Register(r)
                           .Add({});
  auto& replies = prometheus::BuildCounter()
                      .Name("rocetune_controller_desired_state_replies_total")
                      .Help("Agent replies to DesiredState pushes, by result.")
                      .Register(r);
  acks_ = &replies.Add({{"result", "ack"}});
  nacks_ = &replies.Add({{"result", "nack"}});
  stale_replies_ = &replies.Add({{"result", "stale_nonce"}});
  watch_dropped_ = &prometheus::BuildCounter()
                        .Name("rocetune_controller_watch_events_dropped_total")
                        .Help("Events not delivered to a slow Watch stream.")
                        .Register(r)
                        .Add({});
  streams_ = &prometheus::BuildGauge()
                  .Name("rocetune_controller_agent_streams")
                  .Help("Open agent Connect streams.")
                  .Register(r)
                  .Add({});
  store_latency_ = &prometheus::BuildHistogram()
                        .Name("rocetune_controller_store_write_seconds")
                        .Help("Duration of store write transactions.")
                        .Register(r)
                        .Add({}, prometheus::Histogram::BucketBoundaries{
                                     0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
                                     0.05, 0.1, 0.25, 1});
  store_errors_family_ = &prometheus::BuildCounter()
                              .Name("rocetune_controller_store_errors_total")
                              .Help(
                                  "Store write transactions that failed, by status code "
                                  "(resource_exhausted: disk full; failed_precondition: "
                                  "read-only; unavailable: I/O error or locked). Nothing of a "
                                  "failed write is kept.")
                              .Register(r);
  // Every code a store write can fail with exported at 0 from the start: the
  // RocetuneStoreWriteFailing alert takes increase() over 5 minutes, which
  // does not count a series' first sample, so a series born at 1 by the first
  // failure would not fire it.
  for (absl::StatusCode code : StoreErrorCodes()) {
    store_errors_family_->Add({{"code", StoreErrorLabel(code)}});
  }
  report_delay_ = &prometheus::BuildHistogram()
                       .Name("rocetune_controller_report_delay_seconds")
                       .Help("Time from a report's end timestamp (agent clock) to its ingestion.")
                       .Register(r)
                       .Add({}, ReportDelayBuckets());
  hosts_family_ = &prometheus::BuildGauge()
                       .Name("rocetune_controller_hosts")
                       .Help("Registered hosts by state.")
                       .Register(r);
  hosts_connected_ = &hosts_family_->Add({{"state", "connected"}});
  telemetry_windows_ = &prometheus::BuildGauge()
                            .Name("rocetune_controller_telemetry_windows")
                            .Help("Per-host telemetry windows held (bounded by --retention).")
                            .Register(r)
                            .Add({});
  telemetry_bytes_ =
      &prometheus::BuildGauge()
           .Name("rocetune_controller_telemetry_bytes")
           .Help("Approximate memory held by per-host telemetry windows (counter sums, sketches).")
           .Register(r)
           .Add({});
  hosts_stale_ = &hosts_family_->Add({{"state", "stale"}});
  hosts_gone_ = &hosts_family_->Add({{"state", "gone"}});
  hosts_drifted_ = &prometheus::BuildGauge()
                        .Name("rocetune_controller_hosts_drifted")
                        .Help("Hosts whose applied version differs from the desired one.")
                        .Register(r)
                        .Add({});
  group_rtt_ = &prometheus::BuildGauge()
                    .Name("rocetune_controller_group_probe_rtt_seconds")
                    .Help("Probe RTT quantiles per host group over the last complete window.")
                    .Register(r);
  group_cnp_ = &prometheus::BuildGauge()
                    .Name("rocetune_controller_group_cnp_rate_per_second")
                    .Help("CNPs sent per second, summed over a host group, last complete window.")
                    .Register(r);
  group_pfc_ = &prometheus::BuildGauge()
                    .Name("rocetune_controller_group_pfc_pause_rate_per_second")
                    .Help("PFC pause frames received per second, summed over a host group.")
                    .Register(r);
  group_hosts_ = &prometheus::BuildGauge()
                      .Name("rocetune_controller_group_reporting_hosts")
                      .Help("Hosts of a group that reported in the last complete window.")
                      .Register(r);
}

void ControllerMetrics::Rejected(Rejection why) {
  rejected_family_->Add({{"reason", RejectionReason(why)}}).Increment();
  if (why == Rejection::kBadReport || why == Rejection::kNotRegistered) {
    dropped_family_->Add({{"reason", RejectionReason(why)}}).Increment();
    ++reports_dropped_n_;
  }
}

void ControllerMetrics::UpdateFleet(const FleetCounts& c) {
  hosts_connected_->Set(c.connected);
  hosts_stale_->Set(c.stale);
  hosts_gone_->Set(c.gone);
  hosts_drifted_->Set(c.drifted);
}

void ControllerMetrics::UpdateGroups(const std::map<std::string, TelemetrySummary>& groups) {
  absl::MutexLock lock(&groups_mu_);
  for (auto it = group_gauges_.begin(); it != group_gauges_.end();) {
    if (groups.contains(it->first)) {
      ++it;
      continue;
    }
    group_rtt_->Remove(it->second[0]);
    group_rtt_->Remove(it->second[1]);
    group_rtt_->Remove(it->second[2]);
    group_cnp_->Remove(it->second[3]);
    group_pfc_->Remove(it->second[4]);
    group_hosts_->Remove(it->second[5]);
    it = group_gauges_.erase(it);
  }
  for (const auto& [group, s] : groups) {
    auto& g = group_gauges_[group];
    if (g.empty()) {
      for (const char* q : kQuantileLabels) {
        g.push_back(&group_rtt_->Add({{"group", group}, {"q", q}}));
      }
      g.push_back(&group_cnp_->Add({{"group", group}}));
      g.push_back(&group_pfc_->Add({{"group", group}}));
      g.push_back(&group_hosts_->Add({{"group", group}}));
    }
    for (int i = 0; i < 3; ++i) g[i]->Set(s.network_rtt.Quantile(kQuantiles[i]));
    g[3]->Set(s.cnp_rate_per_second);
    g[4]->Set(s.pfc_pause_rate_per_second);
    g[5]->Set(s.hosts);
  }
}

}  // namespace rocetune::controller
