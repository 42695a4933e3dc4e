#include "controller/fleet/probe_planner.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace rocetune::controller {
namespace {

bool HasEndpoint(const ProbeTarget& t) {
  return !t.endpoint.udp_address().empty() || !t.endpoint.gid().empty();
}

uint64_t Fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

std::string Locality(const ProbeTarget& t, const std::string& label) {
  auto it = t.labels.find(label);
  return it == t.labels.end() ? std::string() : it->second;
}

// Up to `n` members of `group` other than `self`, starting at index `start`
// and rotating.
void PickRotating(const std::vector<const ProbeTarget*>& group, const std::string& self,
                  size_t start, int n, std::vector<const ProbeTarget*>* out) {
  if (n <= 0 || group.empty()) return;
  for (size_t k = 0; k < group.size() && n > 0; ++k) {
    const ProbeTarget* t = group[(start + k) % group.size()];
    if (t->host_id == self) continue;
    out->push_back(t);
    --n;
  }
}

}  // namespace

std::map<std::string, v1::ProbePlan> PlanProbes(const std::vector<ProbeTarget>& hosts,
                                                const ProbePlannerOptions& options) {
  std::vector<const ProbeTarget*> probed;
  for (const auto& h : hosts) {
    if (HasEndpoint(h)) probed.push_back(&h);
  }
  std::sort(probed.begin(), probed.end(),
            [](const ProbeTarget* a, const ProbeTarget* b) { return a->host_id < b->host_id; });
  std::map<std::string, std::vector<const ProbeTarget*>> by_locality;
  for (const ProbeTarget* t : probed)
    by_locality[Locality(*t, options.partition_label) + "\n" + Locality(*t, options.locality_label)]
        .push_back(t);

  std::map<std::string, v1::ProbePlan> plans;
  for (const auto& h : hosts) {
    v1::ProbePlan plan;
    plan.set_probes_per_second(options.probes_per_second);
    plan.set_payload_bytes(options.payload_bytes);
    plan.set_traffic_class(options.traffic_class);
    plan.set_timeout_ms(options.timeout_ms);
    std::string mine = Locality(h, options.locality_label);
    std::string partition = Locality(h, options.partition_label);
    std::vector<const ProbeTarget*> near, far;
    for (const ProbeTarget* t : probed) {
      if (t->host_id == h.host_id) continue;
      if (Locality(*t, options.partition_label) != partition) continue;
      (Locality(*t, options.locality_label) == mine ? near : far).push_back(t);
    }
    int budget = std::max(options.max_peers, 0);
    int want_near = far.empty() ? budget : std::min<int>(near.size(), budget / 2);
    int want_far = std::min<int>(far.size(), budget - want_near);
    want_near = std::min<int>(near.size(), budget - want_far);
    // Rank of this host in its own locality group (sorted): near peers follow it
    // in that order; far peers start at a rank-dependent offset so that the
    // probing load spreads over the whole far set.
    const auto& own = by_locality[partition + "\n" + mine];
    size_t rank = 0;
    while (rank < own.size() && own[rank]->host_id < h.host_id) ++rank;
    std::vector<const ProbeTarget*> peers;
    size_t near_start = 0;
    while (near_start < near.size() && near[near_start]->host_id < h.host_id) ++near_start;
    PickRotating(near, h.host_id, near_start, want_near, &peers);
    size_t far_start = far.empty() ? 0 : (rank * std::max(want_far, 1)) % far.size();
    PickRotating(far, h.host_id, far_start, want_far, &peers);
    std::string canonical;
    for (const ProbeTarget* p : peers) {
      v1::ProbePeer* peer = plan.add_peers();
      peer->set_host_id(p->host_id);
      bool same = Locality(*p, options.locality_label) == mine;
      peer->set_peer_class(absl::StrCat(same ? "intra_" : "inter_", options.locality_label));
      if (!p->endpoint.gid().empty()) {
        peer->set_gid(p->endpoint.gid());
        peer->set_qpn(p->endpoint.qpn());
        peer->set_qkey(p->endpoint.qkey());
      } else {
        peer->set_udp_address(p->endpoint.udp_address());
      }
      absl::StrAppend(&canonical, peer->host_id(), "|", peer->peer_class(), "|", peer->gid(), "|",
                      peer->qpn(), "|", peer->qkey(), "|", peer->udp_address(), ";");
    }
    absl::StrAppend(&canonical, options.probes_per_second, "|", options.payload_bytes, "|",
                    options.traffic_class, "|", options.timeout_ms);
    plan.set_version(absl::StrFormat("pp-%016x", Fnv1a(canonical)));
    plans[h.host_id] = std::move(plan);
  }
  return plans;
}

}  // namespace rocetune::controller
