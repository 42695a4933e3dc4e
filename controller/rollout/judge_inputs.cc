#include "controller/rollout/judge_inputs.h"

#include "absl/strings/str_cat.h"
#include "model/counter_names.h"

namespace rocetune::controller {
namespace {

uint64_t Get(const PeriodAggregate& a, const std::string& key) {
  auto it = a.deltas.find(key);
  return it == a.deltas.end() ? 0 : it->second;
}

}  // namespace

HostPeriod ToHostPeriod(const PeriodAggregate& a, int windows_expected,
                        const v1::Objective& objective) {
  namespace cn = counter_names;
  HostPeriod p;
  p.rtt = a.rtt;
  if (!objective.op().empty()) {
    for (const auto& [key, period] : a.jobs) {
      if (key.second != objective.op() ||
          (!objective.job().empty() && key.first != objective.job())) {
        continue;
      }
      // Sketches of one store share its accuracy: a merge cannot fail.
      p.job.Merge(period.seconds).IgnoreError();
    }
  }
  p.probes_sent = a.probes_sent;
  p.probes_lost = a.probes_lost;
  p.windows_present = a.windows_present;
  p.windows_expected = windows_expected;
  p.covered_seconds = a.covered_seconds;
  p.cnp = Get(a, cn::kCnpHandled) + Get(a, cn::kCnpSent);
  p.retransmits =
      Get(a, cn::kRetransmits) + Get(a, cn::kLocalAckTimeoutErr) + Get(a, cn::kPacketSeqErr);
  p.tx_bytes = Get(a, cn::kTxBytes);
  for (int prio = 0; prio < 8; ++prio) {
    p.pause_us[prio] = Get(a, PriorityCounterName(cn::kRxPfcPauseDurationUs, prio)) +
                       Get(a, PriorityCounterName(cn::kTxPfcPauseDurationUs, prio));
  }
  return p;
}

}  // namespace rocetune::controller
