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
  if (absl::Status st = ConfigureRun(); !st.ok()) return st;
  if (absl::Status st = BuildTopology(); !st.ok()) return st;
  if (absl::Status st = ConfigureHosts(); !st.ok()) return st;
  if (absl::Status st = ConfigureQueues(); !st.ok()) return st;
  // Each workload and the probes report the priorities they use (bit p).
  uint8_t used = 0;
  if (absl::Status st = ConfigureWorkloads(&used); !st.ok()) return st;
  if (absl::Status st = ConfigureProbes(&used); !st.ok()) return st;
  if (absl::Status st = ConfigureStatistics(used); !st.ok()) return st;

  absl::MutexLock lock(&mu_);
  shared_.resize(num_hosts_);
  for (Shared& sh : shared_) sh.dcqcn = scenario_.dcqcn();
  pending_ecn_ = scenario_.ecn();
  tor_shared_.resize(num_tors_);
  const v1::EcnSettings tor_ecn = fabric_internal::TorEcnOf(scenario_);
  for (int t = 0; t < num_tors_; ++t) {
    tor_shared_[t].ecn = tor_ecn;
    tor_shared_[t].ecn_dirty = scenario_.has_tor_ecn();
    tor_shared_[t].pfc_masks.assign(TorPortLinks(t).size(), pfc_prio_mask_);
  }
  SyncTors();
  return absl::OkStatus();
}

absl::Status Fabric::ConfigureRun() {
  const v1::Scenario& s = scenario_;
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
  if (s.stats_interval_us() < 0 || s.stats_interval_us() > 1e9) {
    return Invalid("stats_interval_us", "must be in [0, 1e9]");
  }
  const double stats_ns = s.stats_interval_us() > 0 ? s.stats_interval_us() * 1000 : 10000;
  stats_every_steps_ = std::max<int64_t>(1, std::llround(stats_ns / step_ns_));
  sync_every_steps_ = std::max<int64_t>(1, 100000 / step_ns_);
  return absl::OkStatus();
}

absl::Status Fabric::BuildTopology() {
  const v1::Topology& t = scenario_.topology();
  if (t.hosts() < 2) return Invalid("topology.hosts", "need at least 2 hosts");
  if (t.hosts() > 100000) return Invalid("topology.hosts", "at most 100000");
  num_hosts_ = static_cast<int>(t.hosts());
  const int per_tor = t.hosts_per_tor() == 0 ? num_hosts_ : static_cast<int>(t.hosts_per_tor());
  num_tors_ = (num_hosts_ + per_tor - 1) / per_tor;
  hosts_per_tor_ = per_tor;
  num_spines_ = static_cast<int>(t.spines());
  if (num_tors_ > 1 && num_spines_ == 0) {
    return Invalid("topology.spines",
                   absl::StrCat("need at least 1 spine for ", num_tors_, " ToRs"));
  }
  if (num_tors_ == 1) num_spines_ = 0;
  if (t.host_link_gbps() < 0 || t.uplink_gbps() < 0) {
    return Invalid("topology.host_link_gbps", "link speeds must be >= 0");
  }
  if (t.link_delay_ns() < 0 || t.link_delay_ns() > 1e7) {
    return Invalid("topology.link_delay_ns", "must be in [0, 1e7]");
  }
  host_gbps_ = t.host_link_gbps() > 0 ? t.host_link_gbps() : 100.0;
  uplink_gbps_ = t.uplink_gbps() > 0
                     ? t.uplink_gbps()
                     : (num_spines_ > 0 ? host_gbps_ * per_tor / num_spines_ : host_gbps_);
  switch_buffer_ = t.switch_buffer_bytes() > 0 ? static_cast<double>(t.switch_buffer_bytes())
                                               : 32.0 * 1024 * 1024;
  // Nodes: hosts, then ToRs, then spines.
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
      tor_up_[tor][sp] = AddLink(tn, sn, uplink_gbps_, true, true);
      spine_down_[sp][tor] = AddLink(sn, tn, uplink_gbps_, true, true);
    }
  }
  switch_total_.assign(num_hosts_ + num_tors_ + num_spines_, 0.0);
  return absl::OkStatus();
}

absl::Status Fabric::CheckHost(const std::string& field, uint32_t host) const {
  if (host >= static_cast<uint32_t>(num_hosts_)) {
    return Invalid(field, absl::StrCat("host ", host, " does not exist (hosts: ", num_hosts_, ")"));
  }
  return absl::OkStatus();
}

absl::Status Fabric::CheckPriority(const std::string& field, uint32_t prio) {
  if (prio > 7) return Invalid(field, absl::StrCat("priority ", prio, " outside [0, 7]"));
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
