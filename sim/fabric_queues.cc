// Fabric: moving bytes: NIC transmission, link pipes, switch egress queues in
// FIFO order with RED/ECN marking at dequeue, shared buffer, PFC XOFF/XON.
#include <algorithm>
#include <cmath>
#include <random>

#include "absl/strings/str_cat.h"
#include "sim/fabric.h"
#include "sim/fabric_internal.h"

namespace rocetune::sim {

using fabric_internal::Invalid;
using fabric_internal::kByteDust;
using fabric_internal::kEps;
using fabric_internal::kInf;
using fabric_internal::UsToNs;

absl::Status Fabric::ConfigureQueues() {
  const v1::EcnSettings& ecn = scenario_.ecn();
  if (ecn.pmax() < 0 || ecn.pmax() > 1) return Invalid("ecn.pmax", "must be in [0, 1]");
  if (ecn.kmin_bytes() > ecn.kmax_bytes()) {
    return Invalid("ecn.kmin_bytes", "must be <= ecn.kmax_bytes");
  }
  switch_ecn_.assign(num_tors_ + num_spines_, EcnMarker::FromSettings(ecn));
  // The ToRs' own marking (applied per ToR in Init).
  const v1::EcnSettings& tor = scenario_.tor_ecn();
  if (!(tor.pmax() >= 0 && tor.pmax() <= 1)) return Invalid("tor_ecn.pmax", "must be in [0, 1]");
  const v1::EcnSettings merged = fabric_internal::TorEcnOf(scenario_);
  const uint64_t kmin = merged.kmin_bytes();
  const uint64_t kmax = merged.kmax_bytes();
  if (kmin > kmax) {
    // Name the field that was set.
    return tor.kmin_bytes() > 0
               ? Invalid("tor_ecn.kmin_bytes",
                         absl::StrCat("must be <= the ToRs' kmax_bytes (", kmax, ")"))
               : Invalid("tor_ecn.kmax_bytes",
                         absl::StrCat("must be >= the ToRs' kmin_bytes (", kmin, ")"));
  }
  const v1::PfcFabricSettings& pfc = scenario_.pfc();
  pfc_enabled_ = pfc.enabled();
  if (pfc.priority_mask() > 255) return Invalid("pfc.priority_mask", "must be in [0, 255]");
  pfc_prio_mask_ = pfc.priority_mask() == 0 ? 0xff : static_cast<uint8_t>(pfc.priority_mask());
  for (Link& l : links_) l.pfc_mask = pfc_prio_mask_;
  if (pfc.dynamic_alpha() < 0) return Invalid("pfc.dynamic_alpha", "must be >= 0");
  if (pfc.refresh_us() < 0 || pfc.refresh_us() > 1e9) {
    return Invalid("pfc.refresh_us", "must be in [0, 1e9]");
  }
  pfc_.xoff_static_bytes = static_cast<double>(pfc.xoff_bytes());
  pfc_.dynamic_alpha = pfc.dynamic_alpha() > 0 ? pfc.dynamic_alpha() : 0.125;
  pfc_.xon_hysteresis_bytes =
      pfc.xon_hysteresis_bytes() > 0 ? static_cast<double>(pfc.xon_hysteresis_bytes()) : 2 * mtu_;
  // Default headroom: what the fastest link delivers in a round trip of the
  // link delay plus the step granularity, and two packets.
  const double fastest = std::max(host_gbps_, uplink_gbps_) / 8.0;  // bytes per ns
  const int delay_steps = links_[0].delay_steps;
  pfc_.headroom_bytes =
      pfc.headroom_bytes() > 0
          ? static_cast<double>(pfc.headroom_bytes())
          : (2.0 * delay_steps + 2.0) * fastest * static_cast<double>(step_ns_) + 2 * mtu_;
  const int64_t refresh_ns = pfc.refresh_us() > 0
                                 ? UsToNs(pfc.refresh_us())
                                 : static_cast<int64_t>(65535.0 * 512.0 / host_gbps_ / 2.0);
  pfc_.refresh_ns = std::max<int64_t>(refresh_ns, step_ns_);
  return absl::OkStatus();
}

void Fabric::ServeQueues() {
  for (int id : switch_links_) {
    Link& l = links_[id];
    double cap = l.bytes_per_step;
    int n = 0;
    std::array<int, 8> ps;
    for (int p : used_prios_) {
      l.mark_p[p] = 0;
      if (l.q[p] > 0 && !l.pfc.paused(p)) ps[n++] = p;
    }
    if (n == 0) continue;
    std::array<double, 8> served{};
    // Equal shares among unpaused priorities, unused share redistributed.
    bool changed = true;
    std::array<bool, 8> done{};
    int left = n;
    while (changed && left > 0) {
      changed = false;
      const double share = cap / left;
      for (int i = 0; i < n; ++i) {
        if (done[i]) continue;
        if (l.q[ps[i]] <= share) {
          served[i] = l.q[ps[i]];
          cap -= served[i];
          done[i] = true;
          --left;
          changed = true;
        }
      }
    }
    for (int i = 0; i < n; ++i) {
      const int p = ps[i];
      if (!done[i]) served[i] = cap / left;
      l.mark_p[p] = switch_ecn_[l.from - num_hosts_].Probability(l.q[p] - served[i]);
      Dequeue(l, p, served[i]);
    }
  }
}

void Fabric::Dequeue(Link& l, int p, double budget) {
  const bool measure = measuring();
  l.fifo[p].Serve(
      budget, kEps, [this](const ByteRun& run) { return flows_[run.slot].id == run.flow_id; },
      [&](const ByteRun& run, double out) {
        Flow& f = flows_[run.slot];
        ++events_;
        const int h = run.hop;
        f.marks += out / mtu_ * l.mark_p[p];
        l.marked_total[p] += out / mtu_ * l.mark_p[p];
        l.tx_total[p] += out;
        f.backlog[h] = std::max(0.0, f.backlog[h] - out);
        l.q[p] -= out;
        Link& in_link = links_[f.links[h - 1]];
        in_link.ingress[p] = std::max(0.0, in_link.ingress[p] - out);
        switch_total_[in_link.to] = std::max(0.0, switch_total_[in_link.to] - out);
        f.pipe()[f.pipe_off[h] + l.slot] += out;
        if (measure) l.tx_bytes_measured += out;
      });
  // No floating-point residue without bytes behind it.
  if (l.fifo[p].empty() || l.q[p] < 0) l.q[p] = 0;
}

void Fabric::MoveBytes() {
  const bool measure = measuring();
  ArriveBytes(measure);
  ServeQueues();
  ShareNicLinks();
  SendFromNics(measure);
}

void Fabric::ArriveBytes(bool measure) {
  std::vector<double>& admit_limit = admit_limit_;
  admit_limit.assign(switch_total_.size(), kInf);
  if (pfc_enabled_) {
    for (size_t sw = num_hosts_; sw < switch_total_.size(); ++sw) {
      admit_limit[sw] = pfc_.AdmitLimit(XoffThreshold(static_cast<int>(sw)));
    }
  }
  for (Link& l : links_) {
    l.slot = l.delay_steps == 1 ? 0 : static_cast<int>(steps_ % l.delay_steps);
  }
  for (int slot : active_) {
    Flow& f = flows_[slot];
    const int p = f.prio;
    for (int h = 1; h <= f.nlinks; ++h) {
      Link& in_link = links_[f.links[h - 1]];
      double& cell = f.pipe()[f.pipe_off[h - 1] + in_link.slot];
      double in = cell;
      cell = 0;
      if (in <= 0) continue;
      ++events_;
      if (h == f.nlinks) {
        f.delivered += in;
        hosts_[f.dst].rx_bytes += in;
        if (measure) {
          f.delivered_measured += in;
          delivered_measured_ += in;
        }
        continue;
      }
      const int sw = in_link.to;
      double room = switch_buffer_ - switch_total_[sw];
      if (pfc_enabled_ && (in_link.pfc_mask >> p & 1)) {
        room = std::min(room, admit_limit[sw] - in_link.ingress[p]);
      }
      if (in > room) {
        const double drop = in - std::max(0.0, room);
        in -= drop;
        f.sent -= drop;  // resent by the sender
        links_[f.links[h]].dropped_total[p] += drop;
        if (measure) dropped_ += drop;
      }
      f.backlog[h] += in;
      Link& out_link = links_[f.links[h]];
      out_link.q[p] += in;
      out_link.fifo[p].Push(f.id, slot, h, in);
      in_link.ingress[p] += in;
      switch_total_[sw] += in;
    }
  }
}

void Fabric::ShareNicLinks() {
  for (HostState& hs : hosts_) {
    const uint8_t blocked = links_[hs.up].pfc.paused_mask() & hs.pfc_mask;
    double d = 0;
    for (int p : used_prios_) {
      if (!(blocked >> p & 1)) d += hs.demand[p];
    }
    const double cap = links_[hs.up].bytes_per_step;
    hs.scale = d > cap ? cap / d : 1.0;
  }
}

void Fabric::SendFromNics(bool measure) {
  const double step_bytes_per_mbps = static_cast<double>(step_ns_) / 8000.0;
  for (size_t i = active_.size(); i-- > 0;) {
    const int slot = active_[i];
    Flow& f = flows_[slot];
    const int p = f.prio;
    HostState& hs = hosts_[f.src];
    const bool blocked = (links_[hs.up].pfc.paused_mask() & hs.pfc_mask) >> p & 1;
    double x = blocked ? 0.0 : f.want * hs.scale;
    f.sent += x;
    hs.tx_bytes += x;
    if (f.dcqcn && x > 0) {
      f.byte_acc += x;
      if (f.byte_acc >= 1) {
        const double whole = std::floor(f.byte_acc);
        f.byte_acc -= whole;
        f.rp->OnBytesSent(static_cast<int64_t>(whole), now_ns_);
      }
    }
    if (x > 0) {
      Link& l = links_[f.links[0]];
      f.pipe()[f.pipe_off[0] + l.slot] += x;
      if (measure) l.tx_bytes_measured += x;
    }
    Notify(f, measure);
    if (React(f)) {
      active_[i] = active_.back();
      active_.pop_back();
      FinishFlow(slot);
      continue;
    }
    const double rate = f.dcqcn ? f.rp->rate_mbps() : host_gbps_ * 1000;
    const double unsent = f.size - f.sent;
    f.want = unsent < kByteDust ? 0.0 : std::min(rate * step_bytes_per_mbps, unsent);
    hs.next_demand[p] += f.want;
  }
  for (HostState& hs : hosts_) {
    hs.demand = hs.next_demand;
    hs.next_demand.fill(0.0);
  }
}

void Fabric::UpdatePfc() {
  if (!pfc_enabled_) return;
  const bool measure = measuring();
  const double dt = static_cast<double>(step_ns_);
  for (int id : ingress_links_) {
    Link& l = links_[id];
    const double xoff = XoffThreshold(l.to);
    for (int p : used_prios_) {
      if (!(l.pfc_mask >> p & 1)) continue;
      if (l.pfc.Step(p, l.ingress[p], xoff, pfc_, step_ns_)) {
        ++l.pause_total[p];
        if (!l.from_switch) hosts_[l.from].rx_pause_frames[p] += 1;
        if (measure) {
          ++l.pause_frames;
          ++pause_frames_;
          if (!l.from_switch) ++host_rx_pause_frames_;
        }
      }
      if (l.pfc.paused(p)) {
        if (!l.from_switch) hosts_[l.from].rx_pause_ns[p] += dt;
        if (measure) {
          l.paused_ns += dt;
          paused_ns_ += dt;
          if (!l.from_switch) host_rx_paused_ns_ += dt;
        }
      }
    }
  }
}

}  // namespace rocetune::sim
