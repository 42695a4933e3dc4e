// Fabric: the notification point (marks to CNPs) and the reaction point
// (CNP delivery, DCQCN rate state via ReactionPoint).
#include <algorithm>
#include <random>
#include <string>

#include "absl/strings/str_cat.h"
#include "sim/fabric.h"
#include "sim/fabric_internal.h"

namespace rocetune::sim {

using fabric_internal::Invalid;
using fabric_internal::kByteDust;

absl::Status Fabric::ConfigureHosts() {
  absl::StatusOr<DcqcnConfig> dcqcn = ResolveDcqcn(scenario_.dcqcn());
  if (!dcqcn.ok()) return Invalid("dcqcn", std::string(dcqcn.status().message()));
  for (HostState& h : hosts_) {
    h.rp = dcqcn->rp;
    h.min_cnp_gap_ns = dcqcn->min_time_between_cnps_us * 1000;
    h.dcqcn = dcqcn->enabled;
  }
  return absl::OkStatus();
}

void Fabric::Notify(Flow& f, bool measure) {
  const double marks = f.marks;
  f.marks = 0;
  if (marks > 0) {
    const uint64_t k = marks < 1e-12 ? 0 : std::poisson_distribution<uint64_t>(marks)(rng_);
    if (k > 0) {
      HostState& rcv = hosts_[f.dst];
      rcv.marked += static_cast<double>(k);
      if (measure) marked_ += static_cast<double>(k);
      // A notification point off on this priority turns no mark into a CNP.
      if (!(rcv.np_mask >> f.prio & 1)) return;
      const int64_t np_ns = now_ns_ + f.one_way_ns;
      const int64_t gap = rcv.min_cnp_gap_ns;
      if (!f.sent_cnp || np_ns - f.last_cnp_ns >= gap) {
        f.sent_cnp = true;
        f.last_cnp_ns = np_ns;
        const uint64_t n =
            gap <= 0 ? k : std::min<uint64_t>(k, std::max<int64_t>(1, step_ns_ / gap));
        rcv.cnp_sent += static_cast<double>(n);
        if (measure) cnp_sent_ += static_cast<double>(n);
        if (f.cnp_count < kCnpRing) {
          f.cnps[(f.cnp_head + f.cnp_count) % kCnpRing] =
              CnpBatch{np_ns + f.one_way_ns, static_cast<uint32_t>(n), measure};
          ++f.cnp_count;
        } else {  // a full ring: the newest batch arrives with the last one
          f.cnps[(f.cnp_head + f.cnp_count - 1) % kCnpRing].count += static_cast<uint32_t>(n);
        }
      }
    }
  }
}

bool Fabric::React(Flow& f) {
  while (f.cnp_count > 0 && f.cnps[f.cnp_head].at_ns <= now_ns_) {
    const CnpBatch& c = f.cnps[f.cnp_head];
    if (f.dcqcn) {
      for (uint32_t i = 0; i < c.count; ++i) f.rp->OnCnp(c.at_ns);
    }
    hosts_[f.src].cnp_handled += c.count;
    if (c.measured) cnp_handled_ += c.count;
    f.cnp_head = (f.cnp_head + 1) % kCnpRing;
    --f.cnp_count;
  }
  if (f.dcqcn) f.rp->AdvanceTo(now_ns_);
  return f.size - f.delivered < kByteDust;
}

}  // namespace rocetune::sim
