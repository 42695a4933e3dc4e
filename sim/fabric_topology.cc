// Fabric: scenario validation, topology (hosts, ToRs, spines, links) and routing.
#include <algorithm>
#include <cmath>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "sim/fabric.h"
#include "sim/fabric_internal.h"

namespace rocetune::sim {

using fabric_internal::Invalid;
using fabric_internal::PrioOr3;
using fabric_internal::UsToNs;

int Fabric::AddLink(int from, int to, double gbps, bool from_switch, bool to_switch) {
  Link l;
  l.from = from;
  l.to = to;
  l.from_switch = from_switch;
  l.to_switch = to_switch;
  l.bytes_per_ns = gbps / 8.0;
  l.bytes_per_step = l.bytes_per_ns * static_cast<double>(step_ns_);
  const double delay =
      scenario_.topology().link_delay_ns() > 0 ? scenario_.topology().link_delay_ns() : 1000.0;
  l.delay_steps = std::max<int>(1, static_cast<int>(std::lround(delay / step_ns_)));
  l.delay_ns = static_cast<double>(l.delay_steps * step_ns_);
  l.name = absl::StrCat(NodeName(from), "->", NodeName(to));
  l.stat.fill(-1);
  links_.push_back(std::move(l));
  const int id = static_cast<int>(links_.size()) - 1;
  if (from_switch) switch_links_.push_back(id);
  if (to_switch) ingress_links_.push_back(id);
  return id;
}

absl::Status Fabric::Init() {
  const v1::Scenario& s = scenario_;
  const v1::Topology& t = s.topology();
  if (s.step_ns() < 0) return Invalid("step_ns", "must be >= 0");
  step_ns_ = s.step_ns() > 0 ? static_cast<int64_t>(std::llround(s.step_ns())) : 1000;
  if (step_ns_ < 10) return Invalid("step_ns", "must be at least 10 ns");
  if (!(s.duration_ms() > 0) || s.duration_ms() > 1e9) {
    return Invalid("duration_ms", "must be in (0, 1e9]");
  }
  if (s.step_ns() > 1e6) return Invalid("step_ns", "must be at most 1e6 ns");
  if (s.warmup_ms() < 0 || s.warmup_ms() >= s.duration_ms()) {
    return Invalid("warmup_ms", "must be in [0, duration_ms)");
  }
  end_ns_ = static_cast<int64_t>(std::llround(s.duration_ms() * 1e6));
  warmup_ns_ = static_cast<int64_t>(std::llround(s.warmup_ms() * 1e6));
  mtu_ = s.mtu_bytes() > 0 ? s.mtu_bytes() : 1024;
  if (t.hosts() < 2) return Invalid("topology.hosts", "need at least 2 hosts");
  if (t.hosts() > 100000) return Invalid("topology.hosts", "at most 100000");
  num_hosts_ = static_cast<int>(t.hosts());
  const int per_tor = t.hosts_per_tor() == 0 ? num_hosts_ : static_cast<int>(t.hosts_per_tor());
  num_tors_ = (num_hosts_ + per_tor - 1) / per_tor;
  num_spines_ = static_cast<int>(t.spines());
  if (num_tors_ > 1 && num_spines_ == 0) {
    return Invalid("topology.spines",
                   absl::StrCat("need at least 1 spine for ", num_tors_, " ToRs"));
  }
  if (num_tors_ == 1) num_spines_ = 0;
  if (t.host_link_gbps() < 0 || t.uplink_gbps() < 0) {
    return Invalid("topology.host_link_gbps", "link speeds must be >= 0");
  }
  host_gbps_ = t.host_link_gbps() > 0 ? t.host_link_gbps() : 100.0;
  const double up_gbps = t.uplink_gbps() > 0
                             ? t.uplink_gbps()
                             : (num_spines_ > 0 ? host_gbps_ * per_tor / num_spines_ : host_gbps_);
  switch_buffer_ = t.switch_buffer_bytes() > 0 ? static_cast<double>(t.switch_buffer_bytes())
                                               : 32.0 * 1024 * 1024;
  if (s.stats_interval_us() < 0 || s.stats_interval_us() > 1e9) {
    return Invalid("stats_interval_us", "must be in [0, 1e9]");
  }
  if (t.link_delay_ns() < 0 || t.link_delay_ns() > 1e7) {
    return Invalid("topology.link_delay_ns", "must be in [0, 1e7]");
  }
  const double stats_ns = s.stats_interval_us() > 0 ? s.stats_interval_us() * 1000 : 10000;
  stats_every_steps_ = std::max<int64_t>(1, std::llround(stats_ns / step_ns_));
  sync_every_steps_ = std::max<int64_t>(1, 100000 / step_ns_);

  // Topology: hosts, then ToRs, then spines.
  hosts_.resize(num_hosts_);
  for (int h = 0; h < num_hosts_; ++h) {
    const int tor = num_hosts_ + h / per_tor;
    hosts_[h].tor = h / per_tor;
    hosts_[h].up = AddLink(h, tor, host_gbps_, false, true);
    hosts_[h].down = AddLink(tor, h, host_gbps_, true, false);
  }
  tor_up_.assign(num_tors_, std::vector<int>(num_spines_));
  spine_down_.assign(num_spines_, std::vector<int>(num_tors_));
  for (int tor = 0; tor < num_tors_; ++tor) {
    for (int sp = 0; sp < num_spines_; ++sp) {
      const int tn = num_hosts_ + tor, sn = num_hosts_ + num_tors_ + sp;
      tor_up_[tor][sp] = AddLink(tn, sn, up_gbps, true, true);
      spine_down_[sp][tor] = AddLink(sn, tn, up_gbps, true, true);
    }
  }
  switch_total_.assign(num_hosts_ + num_tors_ + num_spines_, 0.0);

  // DCQCN, ECN, PFC.
  absl::StatusOr<DcqcnConfig> dcqcn = ResolveDcqcn(s.dcqcn());
  if (!dcqcn.ok()) return Invalid("dcqcn", std::string(dcqcn.status().message()));
  ecn_ = s.ecn();
  if (ecn_.pmax() < 0 || ecn_.pmax() > 1) return Invalid("ecn.pmax", "must be in [0, 1]");
  if (ecn_.kmin_bytes() > ecn_.kmax_bytes()) {
    return Invalid("ecn.kmin_bytes", "must be <= ecn.kmax_bytes");
  }
  const v1::PfcFabricSettings& pfc = s.pfc();
  pfc_enabled_ = pfc.enabled();
  if (pfc.priority_mask() > 255) return Invalid("pfc.priority_mask", "must be in [0, 255]");
  pfc_prio_mask_ = pfc.priority_mask() == 0 ? 0xff : static_cast<uint8_t>(pfc.priority_mask());
  if (pfc.dynamic_alpha() < 0) return Invalid("pfc.dynamic_alpha", "must be >= 0");
  if (pfc.refresh_us() < 0 || pfc.refresh_us() > 1e9) {
    return Invalid("pfc.refresh_us", "must be in [0, 1e9]");
  }
  xoff_static_ = static_cast<double>(pfc.xoff_bytes());
  pfc_alpha_ = pfc.dynamic_alpha() > 0 ? pfc.dynamic_alpha() : 0.125;
  xon_hyst_ =
      pfc.xon_hysteresis_bytes() > 0 ? static_cast<double>(pfc.xon_hysteresis_bytes()) : 2 * mtu_;
  const double fastest = std::max(host_gbps_, up_gbps) / 8.0;  // bytes per ns
  const int delay_steps = links_[0].delay_steps;
  headroom_ = pfc.headroom_bytes() > 0
                  ? static_cast<double>(pfc.headroom_bytes())
                  : (2.0 * delay_steps + 2.0) * fastest * static_cast<double>(step_ns_) + 2 * mtu_;
  refresh_ns_ = pfc.refresh_us() > 0 ? UsToNs(pfc.refresh_us())
                                     : static_cast<int64_t>(65535.0 * 512.0 / host_gbps_ / 2.0);
  refresh_ns_ = std::max<int64_t>(refresh_ns_, step_ns_);

  for (HostState& h : hosts_) {
    h.rp = dcqcn->rp;
    h.min_cnp_gap_ns = dcqcn->min_time_between_cnps_us * 1000;
    h.dcqcn = dcqcn->enabled;
  }

  // Workload validation.
  const v1::Workload& w = s.workload();
  auto check_host = [&](const std::string& field, uint32_t h) -> absl::Status {
    if (h >= static_cast<uint32_t>(num_hosts_)) {
      return Invalid(field, absl::StrCat("host ", h, " does not exist (hosts: ", num_hosts_, ")"));
    }
    return absl::OkStatus();
  };
  auto check_prio = [&](const std::string& field, uint32_t p) -> absl::Status {
    if (p > 7) return Invalid(field, absl::StrCat("priority ", p, " outside [0, 7]"));
    return absl::OkStatus();
  };
  uint8_t used = 0;
  for (int i = 0; i < w.long_flows_size(); ++i) {
    const auto& lf = w.long_flows(i);
    const std::string f = absl::StrCat("workload.long_flows[", i, "]");
    if (auto st = check_host(f + ".src", lf.src()); !st.ok()) return st;
    if (auto st = check_host(f + ".dst", lf.dst()); !st.ok()) return st;
    if (lf.src() == lf.dst()) return Invalid(f, "src and dst are the same host");
    if (lf.start_us() < 0) return Invalid(f + ".start_us", "must be >= 0");
    if (auto st = check_prio(f + ".priority", lf.priority()); !st.ok()) return st;
    used |= 1 << PrioOr3(lf.priority());
    long_order_.push_back(i);
  }
  std::stable_sort(long_order_.begin(), long_order_.end(), [&](int a, int b) {
    return w.long_flows(a).start_us() < w.long_flows(b).start_us();
  });
  long_flow_slot_.assign(w.long_flows_size(), -1);
  long_results_.resize(w.long_flows_size());
  for (int i = 0; i < w.incast_size(); ++i) {
    const auto& in = w.incast(i);
    const std::string f = absl::StrCat("workload.incast[", i, "]");
    if (auto st = check_host(f + ".receiver", in.receiver()); !st.ok()) return st;
    for (uint32_t snd : in.senders()) {
      if (auto st = check_host(f + ".senders", snd); !st.ok()) return st;
      if (snd == in.receiver()) return Invalid(f + ".senders", "contains the receiver");
    }
    if (in.senders_size() == 0 && in.sender_count() >= static_cast<uint32_t>(num_hosts_)) {
      return Invalid(f + ".sender_count", absl::StrCat("at most ", num_hosts_ - 1));
    }
    if (in.bytes_per_sender() == 0) return Invalid(f + ".bytes_per_sender", "must be > 0");
    if (in.start_us() < 0 || in.period_us() < 0) {
      return Invalid(f + ".start_us", "start_us and period_us must be >= 0");
    }
    if (auto st = check_prio(f + ".priority", in.priority()); !st.ok()) return st;
    used |= 1 << PrioOr3(in.priority());
    incast_next_ns_.push_back(UsToNs(in.start_us()));
    incast_done_.push_back(0);
  }
  if (w.has_allreduce()) {
    const auto& ar = w.allreduce();
    for (uint32_t h : ar.hosts()) {
      if (auto st = check_host("workload.allreduce.hosts", h); !st.ok()) return st;
      ring_.push_back(static_cast<int>(h));
    }
    if (ring_.empty()) {
      if (ar.host_count() > static_cast<uint32_t>(num_hosts_)) {
        return Invalid("workload.allreduce.host_count", absl::StrCat("at most ", num_hosts_));
      }
      for (uint32_t h = 0; h < ar.host_count(); ++h) ring_.push_back(static_cast<int>(h));
    }
    if (!ring_.empty()) {
      if (ring_.size() < 2) return Invalid("workload.allreduce", "a ring needs at least 2 hosts");
      if (ar.chunk_bytes() == 0) return Invalid("workload.allreduce.chunk_bytes", "must be > 0");
      if (ar.gap_us() < 0) return Invalid("workload.allreduce.gap_us", "must be >= 0");
      if (auto st = check_prio("workload.allreduce.priority", ar.priority()); !st.ok()) return st;
      used |= 1 << PrioOr3(ar.priority());
      ar_next_ns_ = UsToNs(ar.start_us());
    }
  }
  if (w.has_background() && w.background().load() != 0) {
    const auto& bg = w.background();
    if (bg.load() < 0 || bg.load() >= 1)
      return Invalid("workload.background.load", "must be in [0, 1)");
    for (uint32_t h : bg.hosts()) {
      if (auto st = check_host("workload.background.hosts", h); !st.ok()) return st;
      bg_hosts_.push_back(static_cast<int>(h));
    }
    if (bg_hosts_.empty()) {
      for (int h = 0; h < num_hosts_; ++h) bg_hosts_.push_back(h);
    }
    if (bg_hosts_.size() < 2) return Invalid("workload.background.hosts", "need at least 2 hosts");
    if (auto st = check_prio("workload.background.priority", bg.priority()); !st.ok()) return st;
    used |= 1 << PrioOr3(bg.priority());
    bg_cdf_ = std::make_unique<FlowSizeCdf>(FlowSizeCdf::For(bg.distribution()));
    bg_mean_gap_ns_ = bg_cdf_->MeanBytes() * 8.0 / (host_gbps_ * bg.load());
    std::exponential_distribution<double> gap(1.0 / bg_mean_gap_ns_);
    for (size_t i = 0; i < bg_hosts_.size(); ++i) {
      bg_next_ns_.push_back(UsToNs(bg.start_us() + gap(rng_) / 1000));
    }
  }
  // Probes (standalone plan: every probing host round-robins over its targets).
  const v1::ProbeSettings& pr = s.probe();
  if (pr.interval_us() < 0 || pr.interval_us() > 1e9) {
    return Invalid("probe.interval_us", "must be in [0, 1e9]");
  }
  if (auto st = check_prio("probe.priority", pr.priority()); !st.ok()) return st;
  used |= 1 << PrioOr3(pr.priority());
  for (uint32_t h : pr.hosts()) {
    if (auto st = check_host("probe.hosts", h); !st.ok()) return st;
  }
  for (uint32_t h : pr.targets()) {
    if (auto st = check_host("probe.targets", h); !st.ok()) return st;
  }
  if (pr.interval_us() > 0) {
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
  }
  for (int p = 0; p < 8; ++p) {
    if (used & (1 << p)) used_prios_.push_back(p);
  }
  for (int l : switch_links_) {
    for (int p : used_prios_) {
      links_[l].stat[p] = static_cast<int>(queue_stats_.size());
      QueueStat qs;
      qs.link = l;
      qs.prio = p;
      queue_stats_.push_back(std::move(qs));
    }
  }
  // FCT bins.
  for (uint64_t b : s.fct_bin_bounds_bytes()) fct_bounds_.push_back(b);
  if (fct_bounds_.empty()) fct_bounds_ = {10000, 100000, 1000000, 10000000};
  for (size_t i = 1; i < fct_bounds_.size(); ++i) {
    if (fct_bounds_[i] <= fct_bounds_[i - 1]) {
      return Invalid("fct_bin_bounds_bytes", "must be strictly increasing");
    }
  }
  fct_bins_.resize(fct_bounds_.size() + 1);

  absl::MutexLock lock(&mu_);
  shared_.resize(num_hosts_);
  for (Shared& sh : shared_) sh.dcqcn = s.dcqcn();
  pending_ecn_ = ecn_;
  return absl::OkStatus();
}

void Fabric::Route(int src, int dst, uint64_t hash, std::vector<int>* links) const {
  links->clear();
  links->push_back(hosts_[src].up);
  const int ts = hosts_[src].tor, td = hosts_[dst].tor;
  if (ts != td) {
    const int sp = static_cast<int>(hash % static_cast<uint64_t>(num_spines_));
    links->push_back(tor_up_[ts][sp]);
    links->push_back(spine_down_[sp][td]);
  }
  links->push_back(hosts_[dst].down);
}

}  // namespace rocetune::sim
