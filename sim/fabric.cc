#include "sim/fabric.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"

namespace rocetune::sim {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kEps = 1e-9;
// Bytes below which a flow counts as fully sent or delivered (floating-point
// dust from splitting segments, not data).
constexpr double kByteDust = 1e-3;

absl::Status Invalid(const std::string& field, const std::string& why) {
  return absl::InvalidArgumentError(absl::StrCat("scenario: ", field, ": ", why));
}

// Microseconds to nanoseconds, saturating (scenario times are untrusted doubles).
int64_t UsToNs(double us) {
  if (!(us > 0)) return 0;
  return us >= 4e15 ? int64_t{4000000000000000000} : static_cast<int64_t>(us * 1000);
}

int PrioOr3(uint32_t p) { return p == 0 ? 3 : static_cast<int>(p); }

double Percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t i = std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())));
  return v[i];
}

SimSummary::Distribution Describe(const std::vector<double>& v) {
  SimSummary::Distribution d;
  d.count = v.size();
  if (v.empty()) return d;
  double sum = 0;
  for (double x : v) sum += x;
  d.mean = sum / static_cast<double>(v.size());
  d.p50 = Percentile(v, 0.5);
  d.p99 = Percentile(v, 0.99);
  d.p999 = Percentile(v, 0.999);
  d.max = *std::max_element(v.begin(), v.end());
  return d;
}

std::string SizeLabel(uint64_t b) {
  if (b >= 1000000 && b % 1000000 == 0) return absl::StrCat(b / 1000000, "MB");
  if (b >= 1000 && b % 1000 == 0) return absl::StrCat(b / 1000, "KB");
  return absl::StrCat(b, "B");
}

}  // namespace

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

uint64_t Fabric::Hash(uint64_t a, uint64_t b) const {
  uint64_t x = a * 0x9E3779B97F4A7C15ULL ^ (b + scenario_.seed() + 0x632BE59BD9B4E019ULL);
  x ^= x >> 31;
  x *= 0xBF58476D1CE4E5B9ULL;
  x ^= x >> 29;
  return x;
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

int Fabric::StartFlow(FlowKind kind, int group, int src, int dst, double bytes, int prio) {
  int slot;
  if (!free_slots_.empty()) {
    slot = free_slots_.back();
    free_slots_.pop_back();
  } else {
    slot = static_cast<int>(flows_.size());
    flows_.emplace_back();
  }
  Flow& f = flows_[slot];
  f.id = next_flow_id_++;
  f.kind = kind;
  f.group = group;
  f.src = src;
  f.dst = dst;
  f.prio = prio;
  static thread_local std::vector<int> path;
  Route(src, dst, Hash(f.id, 1), &path);
  f.nlinks = static_cast<int>(path.size());
  int total = 0;
  int64_t one_way = 0;
  for (int h = 0; h < f.nlinks; ++h) {
    f.links[h] = path[h];
    f.backlog[h] = 0;
    f.pipe_off[h] = total;
    total += links_[path[h]].delay_steps;
    one_way += static_cast<int64_t>(links_[path[h]].delay_ns);
  }
  f.pipe_inline.fill(0.0);
  f.pipe_heap.clear();
  if (total > kInlinePipe) f.pipe_heap.assign(total, 0.0);
  f.size = bytes > 0 ? bytes : kInf;
  f.sent = f.delivered = f.delivered_measured = f.want = f.byte_acc = f.marks = 0;
  f.start_ns = now_ns_;
  f.one_way_ns = one_way;
  f.base_rtt_ns = 2 * one_way;
  f.last_cnp_ns = 0;
  f.sent_cnp = false;
  f.cnp_head = f.cnp_count = 0;
  const HostState& hs = hosts_[src];
  f.dcqcn = hs.dcqcn;
  if (f.rp == nullptr) {
    f.rp = std::make_unique<ReactionPoint>(hs.rp, host_gbps_ * 1000);
  } else {
    *f.rp = ReactionPoint(hs.rp, host_gbps_ * 1000);
  }
  f.fct_us = -1;
  f.want = std::min(f.size, host_gbps_ * static_cast<double>(step_ns_) / 8.0);
  hosts_[src].demand[prio] += f.want;
  active_.push_back(slot);
  if (measuring()) ++flows_started_;
  return slot;
}

void Fabric::FinishFlow(int slot) {
  Flow& f = flows_[slot];
  // Floating-point dust left in queues (below kByteDust) leaves with the flow.
  for (int h = 1; h < f.nlinks; ++h) {
    const double b = f.backlog[h];
    if (b == 0) continue;
    Link& in = links_[f.links[h - 1]];
    links_[f.links[h]].q[f.prio] = std::max(0.0, links_[f.links[h]].q[f.prio] - b);
    in.ingress[f.prio] = std::max(0.0, in.ingress[f.prio] - b);
    switch_total_[in.to] = std::max(0.0, switch_total_[in.to] - b);
    f.backlog[h] = 0;
  }
  const int64_t done_ns = now_ns_ + step_ns_ + f.one_way_ns;  // last byte acked
  f.fct_us = static_cast<double>(done_ns - f.start_ns) / 1000.0;
  const double ideal_us = (static_cast<double>(f.base_rtt_ns) + f.size * 8.0 / host_gbps_) / 1000.0;
  const double slowdown = std::max(1.0, f.fct_us / ideal_us);
  if (measuring()) ++flows_completed_;
  // CNPs still on their way left the receiver before the last byte did, so
  // they reach the sender before the last byte is acked.
  while (f.cnp_count > 0) {
    const CnpBatch& c = f.cnps[f.cnp_head];
    hosts_[f.src].cnp_handled += c.count;
    if (c.measured) cnp_handled_ += c.count;
    f.cnp_head = (f.cnp_head + 1) % kCnpRing;
    --f.cnp_count;
  }
  if (f.start_ns >= warmup_ns_) {
    size_t bin = 0;
    while (bin < fct_bounds_.size() && f.size >= static_cast<double>(fct_bounds_[bin])) ++bin;
    fct_bins_[bin].push_back(static_cast<float>(slowdown));
  }
  switch (f.kind) {
    case FlowKind::kLong: {
      SimSummary::Flow& r = long_results_[f.group];
      r.fct_us = f.fct_us;
      r.slowdown = slowdown;
      r.throughput_gbps = f.delivered_measured;  // bytes; converted in Summary()
      long_flow_slot_[f.group] = -2;
      break;
    }
    case FlowKind::kIncast: {
      Burst& b = bursts_[f.group];
      b.end_ns = std::max(b.end_ns, done_ns);
      if (--b.remaining == 0 && b.start_ns >= warmup_ns_) {
        burst_us_.push_back(static_cast<double>(b.end_ns - b.start_ns) / 1000.0);
      }
      break;
    }
    case FlowKind::kAllReduce:
      if (--ar_remaining_ == 0) {
        if (ar_step_start_ns_ >= warmup_ns_) {
          ar_step_us_.push_back(static_cast<double>(done_ns - ar_step_start_ns_) / 1000.0);
        }
        ++ar_steps_done_;
        const auto& ar = scenario_.workload().allreduce();
        if (ar.steps() == 0 || ar_steps_done_ < ar.steps()) {
          ar_next_ns_ = done_ns + UsToNs(ar.gap_us());
        }
      }
      break;
    case FlowKind::kBackground:
      break;
  }
  free_slots_.push_back(slot);
}

void Fabric::StartAllReduceStep() {
  const int prio = PrioOr3(scenario_.workload().allreduce().priority());
  const double chunk = static_cast<double>(scenario_.workload().allreduce().chunk_bytes());
  ar_step_start_ns_ = now_ns_;
  ar_remaining_ = static_cast<int>(ring_.size());
  for (size_t i = 0; i < ring_.size(); ++i) {
    StartFlow(FlowKind::kAllReduce, static_cast<int>(ar_steps_done_), ring_[i],
              ring_[(i + 1) % ring_.size()], chunk, prio);
  }
}

void Fabric::Generate() {
  const v1::Workload& w = scenario_.workload();
  const int64_t horizon = now_ns_ + step_ns_;  // events in [now, now + step) start now
  while (next_long_ < long_order_.size()) {
    const int i = long_order_[next_long_];
    const auto& lf = w.long_flows(i);
    if (UsToNs(lf.start_us()) >= horizon) break;
    long_flow_slot_[i] =
        StartFlow(FlowKind::kLong, i, static_cast<int>(lf.src()), static_cast<int>(lf.dst()),
                  static_cast<double>(lf.bytes()), PrioOr3(lf.priority()));
    ++next_long_;
  }
  for (int i = 0; i < w.incast_size(); ++i) {
    const auto& in = w.incast(i);
    if (incast_next_ns_[i] < 0 || incast_next_ns_[i] >= horizon) continue;
    Burst b;
    b.start_ns = now_ns_;
    const int burst = static_cast<int>(bursts_.size());
    std::vector<int> senders;
    for (uint32_t s : in.senders()) senders.push_back(static_cast<int>(s));
    if (senders.empty()) {
      for (int h = 0; h < num_hosts_ && senders.size() < in.sender_count(); ++h) {
        if (h != static_cast<int>(in.receiver())) senders.push_back(h);
      }
    }
    b.remaining = static_cast<int>(senders.size());
    bursts_.push_back(b);
    for (int s : senders) {
      StartFlow(FlowKind::kIncast, burst, s, static_cast<int>(in.receiver()),
                static_cast<double>(in.bytes_per_sender()), PrioOr3(in.priority()));
    }
    ++incast_done_[i];
    if (in.period_us() > 0 && (in.repeats() == 0 || incast_done_[i] < in.repeats())) {
      incast_next_ns_[i] += UsToNs(in.period_us());
    } else {
      incast_next_ns_[i] = -1;
    }
  }
  if (ar_next_ns_ >= 0 && ar_next_ns_ < horizon) {
    ar_next_ns_ = -1;
    StartAllReduceStep();
  }
  if (bg_cdf_ != nullptr) {
    const int prio = PrioOr3(w.background().priority());
    std::exponential_distribution<double> gap(1.0 / bg_mean_gap_ns_);
    std::uniform_int_distribution<size_t> pick(0, bg_hosts_.size() - 2);
    for (size_t i = 0; i < bg_hosts_.size(); ++i) {
      while (bg_next_ns_[i] < horizon) {
        size_t d = pick(rng_);
        if (d >= i) ++d;
        StartFlow(FlowKind::kBackground, -1, bg_hosts_[i], bg_hosts_[d], bg_cdf_->Sample(rng_),
                  prio);
        bg_next_ns_[i] += std::max<int64_t>(1, static_cast<int64_t>(gap(rng_)));
      }
    }
  }
}

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
    const double marks = f.marks;
    f.marks = 0;
    if (marks > 0) {
      const uint64_t k = marks < 1e-12 ? 0 : std::poisson_distribution<uint64_t>(marks)(rng_);
      if (k > 0) {
        HostState& rcv = hosts_[f.dst];
        rcv.marked += static_cast<double>(k);
        if (measure) marked_ += static_cast<double>(k);
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
  if (p.start_ns >= warmup_ns_) probe_rtt_.Insert(rtt_s);
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
      if ((l.paused >> p.prio & 1) && (!host_nic || (hosts_[l.from].pfc_mask >> p.prio & 1))) {
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

void Fabric::Sample() {
  if (!measuring()) return;
  ++measured_steps_;
  const bool sketch = measured_steps_ % stats_every_steps_ == 0;
  for (QueueStat& qs : queue_stats_) {
    const double v = links_[qs.link].q[qs.prio];
    qs.sum += v;
    qs.max = std::max(qs.max, v);
    if (sketch) qs.sketch.Insert(v);
  }
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
    ecn_ = pending_ecn_;
    ecn_dirty_ = false;
  }
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
}

// ---- Host-facing API.

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
  return absl::OkStatus();
}

// ---- Summary.

SimSummary Fabric::Summary(double wall_seconds) const {
  SimSummary s;
  s.scenario = scenario_.name();
  s.seed = scenario_.seed();
  s.sim_seconds = static_cast<double>(now_ns_) * 1e-9;
  const double measured_ns = static_cast<double>(measured_steps_ * step_ns_);
  s.measured_seconds = measured_ns * 1e-9;
  s.wall_seconds = wall_seconds;
  s.steps = steps_;
  s.events = events_;
  for (const QueueStat& qs : queue_stats_) {
    if (qs.max < 1) continue;  // never held a byte: not a queue
    SimSummary::Queue q;
    q.name = links_[qs.link].name;
    q.priority = qs.prio;
    q.mean_bytes = measured_steps_ > 0 ? qs.sum / static_cast<double>(measured_steps_) : 0;
    q.p99_bytes = qs.sketch.Quantile(0.99);
    q.max_bytes = qs.max;
    s.queues.push_back(q);
  }
  for (const Link& l : links_) {
    if (l.tx_bytes_measured <= 0 && l.pause_frames == 0) continue;
    SimSummary::Link out;
    out.name = l.name;
    out.utilization = measured_ns > 0 ? l.tx_bytes_measured / (l.bytes_per_ns * measured_ns) : 0;
    out.pause_frames = l.pause_frames;
    out.paused_us = l.paused_ns / 1000;
    s.links.push_back(out);
  }
  const v1::Workload& w = scenario_.workload();
  double sum = 0, sum_sq = 0;
  for (int i = 0; i < w.long_flows_size(); ++i) {
    SimSummary::Flow r = long_results_[i];
    const auto& lf = w.long_flows(i);
    r.id = static_cast<uint64_t>(i);
    r.src = HostName(static_cast<int>(lf.src()));
    r.dst = HostName(static_cast<int>(lf.dst()));
    r.tag = lf.tag();
    r.bytes = static_cast<double>(lf.bytes());
    double delivered = r.throughput_gbps;  // finished: bytes recorded at finish
    if (long_flow_slot_[i] >= 0) delivered = flows_[long_flow_slot_[i]].delivered_measured;
    if (long_flow_slot_[i] == -1) delivered = 0;
    r.throughput_gbps = measured_ns > 0 ? delivered * 8.0 / measured_ns : 0;
    sum += r.throughput_gbps;
    sum_sq += r.throughput_gbps * r.throughput_gbps;
    s.flows.push_back(r);
  }
  s.jain_index = s.flows.size() < 2 || sum_sq == 0
                     ? 1.0
                     : sum * sum / (static_cast<double>(s.flows.size()) * sum_sq);
  s.delivered_gbps = measured_ns > 0 ? delivered_measured_ * 8.0 / measured_ns : 0;
  for (size_t b = 0; b < fct_bins_.size(); ++b) {
    SimSummary::FctBin bin;
    const std::string lo = b == 0 ? "0" : SizeLabel(fct_bounds_[b - 1]);
    bin.label = b < fct_bounds_.size() ? absl::StrCat(lo, "-", SizeLabel(fct_bounds_[b]))
                                       : absl::StrCat(">=", lo);
    std::vector<double> v(fct_bins_[b].begin(), fct_bins_[b].end());
    bin.count = v.size();
    bin.p50 = Percentile(v, 0.5);
    bin.p95 = Percentile(v, 0.95);
    bin.p99 = Percentile(v, 0.99);
    s.fct_slowdown.push_back(bin);
  }
  s.probe_rtt_us.count = probe_rtt_.count();
  if (!probe_rtt_.empty()) {
    s.probe_rtt_us.mean = probe_rtt_.sum() / static_cast<double>(probe_rtt_.count()) * 1e6;
    s.probe_rtt_us.p50 = probe_rtt_.Quantile(0.5) * 1e6;
    s.probe_rtt_us.p99 = probe_rtt_.Quantile(0.99) * 1e6;
    s.probe_rtt_us.p999 = probe_rtt_.Quantile(0.999) * 1e6;
    s.probe_rtt_us.max = probe_rtt_.max() * 1e6;
  }
  s.incast_burst_us = Describe(burst_us_);
  s.allreduce_step_us = Describe(ar_step_us_);
  s.flows_started = flows_started_;
  s.flows_completed = flows_completed_;
  s.cnp_sent = static_cast<uint64_t>(cnp_sent_);
  s.cnp_handled = static_cast<uint64_t>(cnp_handled_);
  s.ecn_marked_packets = static_cast<uint64_t>(marked_);
  s.pfc_pause_frames = pause_frames_;
  s.pfc_paused_us = paused_ns_ / 1000;
  s.host_rx_pause_frames = host_rx_pause_frames_;
  s.host_rx_paused_us = host_rx_paused_ns_ / 1000;
  s.dropped_bytes = dropped_;
  return s;
}

}  // namespace rocetune::sim
