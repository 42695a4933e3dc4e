// Fabric: construction, the step loop, synchronisation with the host-facing
// (thread-safe) API.
#include "sim/fabric.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "sim/fabric_internal.h"

namespace rocetune::sim {

using fabric_internal::Invalid;

Fabric::Fabric(const v1::Scenario& scenario) : scenario_(scenario), rng_(scenario.seed()) {}
Fabric::~Fabric() = default;

absl::StatusOr<std::unique_ptr<Fabric>> Fabric::Create(const v1::Scenario& scenario) {
  std::unique_ptr<Fabric> f(new Fabric(scenario));
  absl::Status s = f->Init();
  if (!s.ok()) return s;
  return f;
}

std::string Fabric::NodeName(int node) const {
  if (node < num_hosts_) return absl::StrCat("h", node);
  if (node < num_hosts_ + num_tors_) return absl::StrCat("tor", node - num_hosts_);
  return absl::StrCat("spine", node - num_hosts_ - num_tors_);
}

std::string Fabric::HostName(int host) const { return absl::StrCat("h", host); }

int Fabric::HostIndex(const std::string& name) const {
  for (int h = 0; h < num_hosts_; ++h) {
    if (name == HostName(h)) return h;
  }
  return -1;
}

uint64_t Fabric::Hash(uint64_t a, uint64_t b) const {
  uint64_t x = a * 0x9E3779B97F4A7C15ULL ^ (b + scenario_.seed() + 0x632BE59BD9B4E019ULL);
  x ^= x >> 31;
  x *= 0xBF58476D1CE4E5B9ULL;
  x ^= x >> 29;
  return x;
}

void Fabric::Step() {
  if (steps_ % sync_every_steps_ == 0) Sync();
  Generate();
  MoveBytes();
  UpdatePfc();
  RunProbes();
  Sample();
  now_ns_ += step_ns_;
  ++steps_;
}

void Fabric::RunUntil(int64_t t_ns) {
  const int64_t stop = std::min(t_ns, end_ns_);
  while (now_ns_ < stop) Step();
  Sync();
}

void Fabric::Sync() {
  absl::MutexLock lock(&mu_);
  if (ecn_dirty_) {
    for (EcnMarker& m : switch_ecn_) m = EcnMarker::FromSettings(pending_ecn_);
    ecn_dirty_ = false;
  }
  SyncTors();
  for (int h = 0; h < num_hosts_; ++h) {
    HostState& hs = hosts_[h];
    Shared& sh = shared_[h];
    HostCounters& c = sh.counters;
    c.tx_bytes = static_cast<uint64_t>(hs.tx_bytes);
    c.rx_bytes = static_cast<uint64_t>(hs.rx_bytes);
    c.tx_packets = static_cast<uint64_t>(std::ceil(hs.tx_bytes / mtu_));
    c.rx_packets = static_cast<uint64_t>(std::ceil(hs.rx_bytes / mtu_));
    c.cnp_sent = static_cast<uint64_t>(hs.cnp_sent);
    c.cnp_handled = static_cast<uint64_t>(hs.cnp_handled);
    c.ecn_marked_packets = static_cast<uint64_t>(hs.marked);
    for (int p = 0; p < 8; ++p) {
      c.rx_pause_frames[p] = static_cast<uint64_t>(hs.rx_pause_frames[p]);
      c.rx_pause_us[p] = static_cast<uint64_t>(hs.rx_pause_ns[p] / 1000);
    }
    if (sh.dcqcn_dirty) {
      sh.dcqcn_dirty = false;
      absl::StatusOr<DcqcnConfig> c2 = ResolveDcqcn(sh.dcqcn);
      if (c2.ok()) {
        hs.rp = c2->rp;
        hs.min_cnp_gap_ns = c2->min_time_between_cnps_us * 1000;
        hs.dcqcn = c2->enabled;
        for (int slot : active_) {
          Flow& f = flows_[slot];
          if (f.src == h) f.rp->SetParams(hs.rp, now_ns_);
        }
      }
    }
    hs.pfc_mask = sh.pfc_mask;
    hs.rp_mask = sh.rp_mask;
    hs.np_mask = sh.np_mask;
    if (sh.plan_dirty) {
      sh.plan_dirty = false;
      hs.probe_peers.clear();
      hs.probe_cls.clear();
      hs.class_names.clear();
      for (const v1::ProbePeer& peer : sh.plan.peers()) {
        const std::string cls = peer.peer_class().empty() ? "default" : peer.peer_class();
        auto it = std::find(hs.class_names.begin(), hs.class_names.end(), cls);
        if (it == hs.class_names.end()) it = hs.class_names.insert(hs.class_names.end(), cls);
        hs.probe_peers.push_back(HostIndex(peer.host_id()));
        hs.probe_cls.push_back(static_cast<int>(it - hs.class_names.begin()));
      }
      hs.window.assign(hs.class_names.size(), QuantileSketch());
      hs.window_sent.assign(hs.class_names.size(), 0);
      const double pps = sh.plan.probes_per_second() * static_cast<double>(hs.probe_peers.size());
      hs.probe_interval_ns = pps > 0 ? 1e9 / pps : 0;
      hs.next_probe_ns = now_ns_;
    }
    for (size_t cls = 0; cls < hs.window.size(); ++cls) {
      if (hs.window[cls].empty() && hs.window_sent[cls] == 0) continue;
      WindowAcc& acc = sh.windows[hs.class_names[cls]];
      // Both sketches use the default accuracy, so Merge cannot fail.
      acc.rtt.Merge(hs.window[cls]).IgnoreError();
      acc.sent += hs.window_sent[cls];
      hs.window[cls].Clear();
      hs.window_sent[cls] = 0;
    }
  }
  synced_ns_.store(now_ns_, std::memory_order_release);
}

HostCounters Fabric::Counters(int host) const {
  absl::MutexLock lock(&mu_);
  return shared_[host].counters;
}

std::map<std::string, int64_t> Fabric::HostDcqcn(int host) const {
  absl::MutexLock lock(&mu_);
  return DcqcnValues(shared_[host].dcqcn);
}

absl::Status Fabric::SetHostDcqcn(int host, const std::string& name, int64_t value) {
  absl::MutexLock lock(&mu_);
  absl::Status s = SetDcqcnValue(&shared_[host].dcqcn, name, value);
  if (s.ok()) shared_[host].dcqcn_dirty = true;
  return s;
}

uint8_t Fabric::HostPfcMask(int host) const {
  absl::MutexLock lock(&mu_);
  return shared_[host].pfc_mask;
}

absl::Status Fabric::SetHostPfcMask(int host, uint8_t mask) {
  absl::MutexLock lock(&mu_);
  shared_[host].pfc_mask = mask;
  return absl::OkStatus();
}

uint8_t Fabric::HostRpEnableMask(int host) const {
  absl::MutexLock lock(&mu_);
  return shared_[host].rp_mask;
}

uint8_t Fabric::HostNpEnableMask(int host) const {
  absl::MutexLock lock(&mu_);
  return shared_[host].np_mask;
}

void Fabric::SetHostEnableMasks(int host, uint8_t rp, uint8_t np) {
  absl::MutexLock lock(&mu_);
  shared_[host].rp_mask = rp;
  shared_[host].np_mask = np;
}

absl::Status Fabric::SetProbePlan(int host, const v1::ProbePlan& plan) {
  if (plan.peers_size() > 0 &&
      !(plan.probes_per_second() >= 0.001 && plan.probes_per_second() <= 1e7)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "probe plan: probes_per_second=", plan.probes_per_second(), " outside [0.001, 1e7]"));
  }
  for (int i = 0; i < plan.peers_size(); ++i) {
    const int peer = HostIndex(plan.peers(i).host_id());
    if (peer < 0) {
      return absl::InvalidArgumentError(absl::StrCat("probe plan: peers[", i, "]: unknown host \"",
                                                     plan.peers(i).host_id(), "\""));
    }
    if (peer == host) {
      return absl::InvalidArgumentError(
          absl::StrCat("probe plan: peers[", i, "]: a host cannot probe itself"));
    }
  }
  absl::MutexLock lock(&mu_);
  shared_[host].plan = plan;
  shared_[host].plan_dirty = true;
  return absl::OkStatus();
}

std::vector<v1::LatencyWindow> Fabric::TakeProbeWindow(int host) {
  absl::MutexLock lock(&mu_);
  std::vector<v1::LatencyWindow> out;
  for (auto& [cls, acc] : shared_[host].windows) {
    v1::LatencyWindow w;
    w.set_peer_class(cls);
    w.set_clock("sim");
    acc.rtt.ToProto(w.mutable_network_rtt_seconds());
    QuantileSketch host_delay;  // the simulated responder answers at once
    host_delay.Insert(0, acc.rtt.count());
    host_delay.ToProto(w.mutable_host_delay_seconds());
    w.set_probes_sent(acc.sent);
    out.push_back(std::move(w));
  }
  shared_[host].windows.clear();
  return out;
}

v1::EcnSettings Fabric::Ecn() const {
  absl::MutexLock lock(&mu_);
  return pending_ecn_;
}

absl::Status Fabric::SetEcn(const v1::EcnSettings& ecn) {
  if (ecn.pmax() < 0 || ecn.pmax() > 1) {
    return absl::InvalidArgumentError(absl::StrCat("ecn.pmax=", ecn.pmax(), " outside [0, 1]"));
  }
  if (ecn.kmin_bytes() > ecn.kmax_bytes()) {
    return absl::InvalidArgumentError(absl::StrCat("ecn.kmin_bytes=", ecn.kmin_bytes(),
                                                   " above ecn.kmax_bytes=", ecn.kmax_bytes()));
  }
  absl::MutexLock lock(&mu_);
  pending_ecn_ = ecn;
  ecn_dirty_ = true;
  for (TorShared& t : tor_shared_) {
    t.ecn = ecn;
    t.ecn_dirty = true;
    ++t.version;
  }
  return absl::OkStatus();
}

std::string Fabric::TorName(int tor) const { return absl::StrCat("tor", tor); }

std::vector<std::pair<int, int>> Fabric::TorPortLinks(int tor) const {
  std::vector<std::pair<int, int>> out;
  const int first = tor * hosts_per_tor_;
  const int last = std::min(num_hosts_, first + hosts_per_tor_);
  for (int h = first; h < last; ++h) out.emplace_back(hosts_[h].down, hosts_[h].up);
  for (int sp = 0; sp < num_spines_; ++sp) {
    out.emplace_back(tor_up_[tor][sp], spine_down_[sp][tor]);
  }
  return out;
}

std::vector<TorPort> Fabric::TorPorts(int tor) const {
  std::vector<TorPort> out;
  int i = 0;
  for (const auto& [egress, ingress] : TorPortLinks(tor)) {
    const Link& l = links_[egress];
    out.push_back({absl::StrCat("Ethernet", 4 * i++), NodeName(l.to), l.bytes_per_ns * 8.0});
  }
  return out;
}

void Fabric::SyncTors() {
  for (int t = 0; t < num_tors_; ++t) {
    TorShared& ts = tor_shared_[t];
    if (ts.ecn_dirty) {
      switch_ecn_[t] = EcnMarker::FromSettings(ts.ecn);
      ts.ecn_dirty = false;
    }
    const std::vector<std::pair<int, int>> ports = TorPortLinks(t);
    if (ts.pfc_dirty) {
      for (size_t i = 0; i < ports.size(); ++i) {
        Link& in = links_[ports[i].second];
        in.pfc_mask = ts.pfc_masks[i];
        in.pfc.ResumeAllBut(in.pfc_mask);
      }
      ts.pfc_dirty = false;
    }
    ts.counters.resize(ports.size());
    for (size_t i = 0; i < ports.size(); ++i) {
      const Link& out = links_[ports[i].first];
      const Link& in = links_[ports[i].second];
      TorPortCounters& c = ts.counters[i];
      for (int p = 0; p < 8; ++p) {
        TorQueueCounters& q = c.queues[p];
        q.bytes = static_cast<uint64_t>(out.tx_total[p]);
        q.packets = static_cast<uint64_t>(std::ceil(out.tx_total[p] / mtu_));
        q.ecn_marked_packets = static_cast<uint64_t>(out.marked_total[p]);
        q.dropped_bytes = static_cast<uint64_t>(out.dropped_total[p]);
        q.dropped_packets = static_cast<uint64_t>(std::ceil(out.dropped_total[p] / mtu_));
        q.occupancy_bytes = static_cast<uint64_t>(std::max(0.0, out.q[p]));
        c.tx_pfc_frames[p] = in.pause_total[p];
        c.rx_pfc_frames[p] = out.pause_total[p];
      }
    }
  }
}

std::vector<TorPortCounters> Fabric::TorCounters(int tor) const {
  absl::MutexLock lock(&mu_);
  return tor_shared_[tor].counters;
}

v1::EcnSettings Fabric::TorEcn(int tor, uint64_t* version) const {
  absl::MutexLock lock(&mu_);
  if (version != nullptr) *version = tor_shared_[tor].version;
  return tor_shared_[tor].ecn;
}

std::vector<uint8_t> Fabric::TorPfcMasks(int tor, uint64_t* version) const {
  absl::MutexLock lock(&mu_);
  if (version != nullptr) *version = tor_shared_[tor].version;
  return tor_shared_[tor].pfc_masks;
}

absl::Status Fabric::SetTorConfig(int tor, const v1::EcnSettings* ecn,
                                  const std::map<int, uint8_t>& pfc_masks,
                                  std::optional<uint64_t> expected_version) {
  if (tor < 0 || tor >= num_tors_) {
    return absl::InvalidArgumentError(absl::StrCat("no ToR ", tor, " (ToRs: ", num_tors_, ")"));
  }
  if (ecn != nullptr) {
    if (ecn->pmax() < 0 || ecn->pmax() > 1) {
      return absl::InvalidArgumentError(
          absl::StrCat(TorName(tor), ": ecn.pmax=", ecn->pmax(), " outside [0, 1]"));
    }
    if (ecn->kmin_bytes() > ecn->kmax_bytes()) {
      return absl::InvalidArgumentError(absl::StrCat(TorName(tor),
                                                     ": ecn.kmin_bytes=", ecn->kmin_bytes(),
                                                     " above ecn.kmax_bytes=", ecn->kmax_bytes()));
    }
    if (static_cast<double>(ecn->kmax_bytes()) > switch_buffer_) {
      return absl::InvalidArgumentError(
          absl::StrCat(TorName(tor), ": ecn.kmax_bytes=", ecn->kmax_bytes(),
                       " above the switch buffer (", switch_buffer_, " bytes)"));
    }
  }
  absl::MutexLock lock(&mu_);
  TorShared& ts = tor_shared_[tor];
  for (const auto& [port, mask] : pfc_masks) {
    if (port < 0 || port >= static_cast<int>(ts.pfc_masks.size())) {
      return absl::InvalidArgumentError(absl::StrCat(TorName(tor), ": no port ", port));
    }
  }
  if (expected_version.has_value() && *expected_version != ts.version) {
    return absl::AbortedError(
        absl::StrCat(TorName(tor), ": the switch configuration changed since it was read"));
  }
  if (ecn != nullptr) {
    ts.ecn = *ecn;
    ts.ecn_dirty = true;
  }
  for (const auto& [port, mask] : pfc_masks) ts.pfc_masks[port] = mask;
  if (!pfc_masks.empty()) ts.pfc_dirty = true;
  ++ts.version;
  return absl::OkStatus();
}

}  // namespace rocetune::sim
