// Fabric: latency probes crossing the fabric hop by hop.
#include <algorithm>
#include <random>
#include <vector>

#include "absl/strings/str_cat.h"
#include "sim/fabric.h"
#include "sim/fabric_internal.h"

namespace rocetune::sim {

using fabric_internal::Invalid;
using fabric_internal::PrioOr3;

absl::Status Fabric::ConfigureProbes(uint8_t* used) {
  const v1::ProbeSettings& pr = scenario_.probe();
  if (pr.interval_us() < 0 || pr.interval_us() > 1e9) {
    return Invalid("probe.interval_us", "must be in [0, 1e9]");
  }
  if (auto st = CheckPriority("probe.priority", pr.priority()); !st.ok()) return st;
  *used |= 1 << PrioOr3(pr.priority());
  for (uint32_t h : pr.hosts()) {
    if (auto st = CheckHost("probe.hosts", h); !st.ok()) return st;
  }
  for (uint32_t h : pr.targets()) {
    if (auto st = CheckHost("probe.targets", h); !st.ok()) return st;
  }
  if (pr.interval_us() == 0) return absl::OkStatus();
  // Standalone plan: every probing host round-robins over its targets, from a
  // random phase.
  std::vector<int> probers;
  for (uint32_t h : pr.hosts()) probers.push_back(static_cast<int>(h));
  if (probers.empty()) {
    for (int h = 0; h < num_hosts_; ++h) probers.push_back(h);
  }
  std::uniform_real_distribution<double> phase(0, pr.interval_us() * 1000);
  for (int h : probers) {
    HostState& hs = hosts_[h];
    hs.class_names = {"intra_tor", "inter_tor"};
    hs.window.assign(2, QuantileSketch());
    hs.window_sent.assign(2, 0);
    for (int peer = 0; peer < num_hosts_; ++peer) {
      if (peer == h) continue;
      if (pr.targets_size() > 0 && std::find(pr.targets().begin(), pr.targets().end(),
                                             static_cast<uint32_t>(peer)) == pr.targets().end()) {
        continue;
      }
      hs.probe_peers.push_back(peer);
      hs.probe_cls.push_back(hosts_[peer].tor == hs.tor ? 0 : 1);
    }
    if (hs.probe_peers.empty()) continue;
    hs.probe_interval_ns = pr.interval_us() * 1000;
    hs.next_probe_ns = static_cast<int64_t>(phase(rng_));
  }
  return absl::OkStatus();
}

void Fabric::SendProbe(int host, int peer, int cls, int prio, double bytes) {
  static thread_local std::vector<int> fwd, rev;
  const uint64_t h = Hash(static_cast<uint64_t>(now_ns_), static_cast<uint64_t>(host) << 20 | peer);
  Route(host, peer, h, &fwd);
  Route(peer, host, h >> 7, &rev);
  Probe p;
  p.host = host;
  p.peer = peer;
  p.cls = cls;
  p.prio = prio;
  p.bytes = bytes;
  for (int l : fwd) p.links[p.nlinks++] = l;
  for (int l : rev) p.links[p.nlinks++] = l;
  p.start_ns = p.ready_ns = now_ns_;
  probes_.push_back(p);
}

void Fabric::RecordProbe(const Probe& p, int64_t done_ns) {
  const double rtt_s = static_cast<double>(done_ns - p.start_ns) * 1e-9;
  HostState& hs = hosts_[p.host];
  if (p.cls < static_cast<int>(hs.window.size())) hs.window[p.cls].Insert(rtt_s);
  if (p.start_ns >= warmup_ns_) {
    probe_rtt_.Insert(rtt_s);
    if (hs.tor == hosts_[p.peer].tor) probe_rtt_intra_tor_.Insert(rtt_s);
  }
}

void Fabric::RunProbes() {
  const int default_prio = PrioOr3(scenario_.probe().priority());
  const double bytes = scenario_.probe().bytes() > 0 ? scenario_.probe().bytes() : 64;
  const int64_t horizon = now_ns_ + step_ns_;
  for (int h = 0; h < num_hosts_; ++h) {
    HostState& hs = hosts_[h];
    if (hs.probe_interval_ns <= 0 || hs.probe_peers.empty()) continue;
    while (hs.next_probe_ns < horizon) {
      const size_t i = hs.next_peer++ % hs.probe_peers.size();
      SendProbe(h, hs.probe_peers[i], hs.probe_cls[i], default_prio, bytes);
      if (hs.probe_cls[i] < static_cast<int>(hs.window_sent.size()))
        ++hs.window_sent[hs.probe_cls[i]];
      hs.next_probe_ns += std::max<int64_t>(1, static_cast<int64_t>(hs.probe_interval_ns));
    }
  }
  for (size_t i = probes_.size(); i-- > 0;) {
    Probe& p = probes_[i];
    bool finished = false;
    while (p.ready_ns < horizon) {
      if (p.hop == p.nlinks) {
        RecordProbe(p, p.ready_ns);
        finished = true;
        break;
      }
      const Link& l = links_[p.links[p.hop]];
      const bool host_nic = !l.from_switch;
      if (l.pfc.paused(p.prio) && (!host_nic || (hosts_[l.from].pfc_mask >> p.prio & 1))) {
        p.ready_ns = horizon;  // waits for the pause to end
        break;
      }
      ++events_;
      const double queue = host_nic ? 0.0 : l.q[p.prio];
      p.ready_ns = std::max(p.ready_ns, now_ns_) +
                   static_cast<int64_t>((queue + p.bytes) / l.bytes_per_ns + l.delay_ns);
      ++p.hop;
    }
    if (finished) {
      probes_[i] = probes_.back();
      probes_.pop_back();
    }
  }
}

}  // namespace rocetune::sim
