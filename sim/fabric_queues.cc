// Fabric: moving bytes: NIC transmission, link pipes, switch egress queues in
// FIFO order with RED/ECN marking at dequeue, shared buffer, PFC XOFF/XON.
#include <algorithm>
#include <cmath>
#include <random>

#include "absl/strings/str_cat.h"
#include "sim/fabric.h"
#include "sim/fabric_internal.h"

namespace rocetune::sim {

using fabric_internal::kByteDust;
using fabric_internal::kEps;
using fabric_internal::kInf;

double Fabric::MarkProbability(double q) const {
  if (ecn_.disabled()) return 0;
  const double kmin = static_cast<double>(ecn_.kmin_bytes());
  const double kmax = static_cast<double>(ecn_.kmax_bytes());
  if (q <= kmin) return 0;
  if (q > kmax) return 1;
  return ecn_.pmax() * (q - kmin) / (kmax - kmin);
}

double Fabric::XoffThreshold(int sw) const {
  if (xoff_static_ > 0) return xoff_static_;
  return pfc_alpha_ * std::max(0.0, switch_buffer_ - switch_total_[sw]);
}

void Fabric::ServeQueues() {
  for (int id : switch_links_) {
    Link& l = links_[id];
    double cap = l.bytes_per_step;
    int n = 0;
    std::array<int, 8> ps;
    for (int p : used_prios_) {
      l.mark_p[p] = 0;
      if (l.q[p] > 0 && !(l.paused >> p & 1)) ps[n++] = p;
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
      l.mark_p[p] = MarkProbability(l.q[p] - served[i]);
      Dequeue(l, p, served[i]);
    }
  }
}

void Fabric::Dequeue(Link& l, int p, double budget) {
  const bool measure = measuring();
  SegmentFifo& fifo = l.fifo[p];
  while (!fifo.empty()) {
    Segment& seg = fifo.items[fifo.head];
    Flow& f = flows_[seg.slot];
    if (f.id != seg.flow_id) {  // the flow finished; its dust left with it
      ++fifo.head;
      continue;
    }
    if (budget <= 0) break;
    double out = std::min(seg.bytes, budget);
    if (seg.bytes - out < kEps) out = seg.bytes;
    ++events_;
    budget -= out;
    seg.bytes -= out;
    const int h = seg.hop;
    f.marks += out / mtu_ * l.mark_p[p];
    f.backlog[h] = std::max(0.0, f.backlog[h] - out);
    l.q[p] -= out;
    Link& in_link = links_[f.links[h - 1]];
    in_link.ingress[p] = std::max(0.0, in_link.ingress[p] - out);
    switch_total_[in_link.to] = std::max(0.0, switch_total_[in_link.to] - out);
    f.pipe()[f.pipe_off[h] + l.slot] += out;
    if (measure) l.tx_bytes_measured += out;
    if (seg.bytes <= 0) ++fifo.head;
  }
  if (fifo.empty()) {
    fifo.items.clear();
    fifo.head = 0;
    l.q[p] = 0;  // no floating-point residue without bytes behind it
  } else if (fifo.head > 64 && fifo.head * 2 > fifo.items.size()) {
    fifo.items.erase(fifo.items.begin(), fifo.items.begin() + static_cast<ptrdiff_t>(fifo.head));
    fifo.head = 0;
  }
  if (l.q[p] < 0) l.q[p] = 0;
}

void Fabric::MoveBytes() {
  const bool measure = measuring();
  // Arrivals: bytes that finished crossing a link this step.
  std::vector<double>& admit_limit = admit_limit_;
  admit_limit.assign(switch_total_.size(), kInf);
  if (pfc_enabled_) {
    for (size_t sw = num_hosts_; sw < switch_total_.size(); ++sw) {
      admit_limit[sw] = XoffThreshold(static_cast<int>(sw)) + headroom_;
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
      if (pfc_enabled_ && (pfc_prio_mask_ >> p & 1)) {
        room = std::min(room, admit_limit[sw] - in_link.ingress[p]);
      }
      if (in > room) {
        const double drop = in - std::max(0.0, room);
        in -= drop;
        f.sent -= drop;  // resent by the sender
        if (measure) dropped_ += drop;
      }
      f.backlog[h] += in;
      Link& out_link = links_[f.links[h]];
      out_link.q[p] += in;
      SegmentFifo& fifo = out_link.fifo[p];
      if (!fifo.empty() && fifo.items.back().slot == slot && fifo.items.back().flow_id == f.id &&
          fifo.items.back().hop == h) {
        fifo.items.back().bytes += in;
      } else {
        fifo.items.push_back(Segment{f.id, slot, h, in});
      }
      in_link.ingress[p] += in;
      switch_total_[sw] += in;
    }
  }
  ServeQueues();
  // NIC: flows of one host share its link in proportion to demand; nothing
  // is sent on a priority the ToR has paused (when the host honours PFC on it).
  const double step_bytes_per_mbps = static_cast<double>(step_ns_) / 8000.0;
  for (HostState& hs : hosts_) {
    const uint8_t blocked = links_[hs.up].paused & hs.pfc_mask;
    double d = 0;
    for (int p : used_prios_) {
      if (!(blocked >> p & 1)) d += hs.demand[p];
    }
    const double cap = links_[hs.up].bytes_per_step;
    hs.scale = d > cap ? cap / d : 1.0;
  }
  // Departures, then the notification and reaction points.
  for (size_t i = active_.size(); i-- > 0;) {
    const int slot = active_[i];
    Flow& f = flows_[slot];
    const int p = f.prio;
    HostState& hs = hosts_[f.src];
    const bool blocked = (links_[hs.up].paused & hs.pfc_mask) >> p & 1;
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
  for (int id : ingress_links_) {
    Link& l = links_[id];
    const double thr = XoffThreshold(l.to);
    for (int p : used_prios_) {
      if (!(pfc_prio_mask_ >> p & 1)) continue;
      const uint8_t bit = static_cast<uint8_t>(1 << p);
      bool frame = false;
      if (!(l.paused & bit)) {
        if (l.ingress[p] > thr) {
          l.paused |= bit;
          l.refresh_left_ns[p] = refresh_ns_;
          frame = true;
        }
      } else if (l.ingress[p] <= std::max(0.0, thr - xon_hyst_)) {
        l.paused &= static_cast<uint8_t>(~bit);
      } else {
        l.refresh_left_ns[p] -= step_ns_;
        if (l.refresh_left_ns[p] <= 0) {
          l.refresh_left_ns[p] += refresh_ns_;
          frame = true;
        }
      }
      if (frame) {
        if (!l.from_switch) hosts_[l.from].rx_pause_frames[p] += 1;
        if (measure) {
          ++l.pause_frames;
          ++pause_frames_;
          if (!l.from_switch) ++host_rx_pause_frames_;
        }
      }
      if (l.paused & bit) {
        const double dt = static_cast<double>(step_ns_);
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
