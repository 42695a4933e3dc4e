// Fabric: traffic: flow start and completion, and the workload generators
// (long flows, incasts, ring all-reduce, Poisson background).
#include <algorithm>
#include <memory>
#include <random>
#include <string>

#include "absl/strings/str_cat.h"
#include "sim/fabric.h"
#include "sim/fabric_internal.h"

namespace rocetune::sim {

using fabric_internal::Invalid;
using fabric_internal::kByteDust;
using fabric_internal::kInf;
using fabric_internal::PrioOr3;
using fabric_internal::UsToNs;

absl::Status Fabric::ConfigureWorkloads(uint8_t* used) {
  if (absl::Status st = ConfigureLongFlows(used); !st.ok()) return st;
  if (absl::Status st = ConfigureIncasts(used); !st.ok()) return st;
  if (absl::Status st = ConfigureAllReduce(used); !st.ok()) return st;
  return ConfigureBackground(used);
}

absl::Status Fabric::ConfigureLongFlows(uint8_t* used) {
  const v1::Workload& w = scenario_.workload();
  for (int i = 0; i < w.long_flows_size(); ++i) {
    const auto& lf = w.long_flows(i);
    const std::string f = absl::StrCat("workload.long_flows[", i, "]");
    if (auto st = CheckHost(f + ".src", lf.src()); !st.ok()) return st;
    if (auto st = CheckHost(f + ".dst", lf.dst()); !st.ok()) return st;
    if (lf.src() == lf.dst()) return Invalid(f, "src and dst are the same host");
    if (lf.start_us() < 0) return Invalid(f + ".start_us", "must be >= 0");
    if (auto st = CheckPriority(f + ".priority", lf.priority()); !st.ok()) return st;
    *used |= 1 << PrioOr3(lf.priority());
    long_order_.push_back(i);
  }
  std::stable_sort(long_order_.begin(), long_order_.end(), [&](int a, int b) {
    return w.long_flows(a).start_us() < w.long_flows(b).start_us();
  });
  long_flow_slot_.assign(w.long_flows_size(), -1);
  long_results_.resize(w.long_flows_size());
  return absl::OkStatus();
}

absl::Status Fabric::ConfigureIncasts(uint8_t* used) {
  const v1::Workload& w = scenario_.workload();
  for (int i = 0; i < w.incast_size(); ++i) {
    const auto& in = w.incast(i);
    const std::string f = absl::StrCat("workload.incast[", i, "]");
    if (auto st = CheckHost(f + ".receiver", in.receiver()); !st.ok()) return st;
    for (uint32_t snd : in.senders()) {
      if (auto st = CheckHost(f + ".senders", snd); !st.ok()) return st;
      if (snd == in.receiver()) return Invalid(f + ".senders", "contains the receiver");
    }
    if (in.senders_size() == 0 && in.sender_count() >= static_cast<uint32_t>(num_hosts_)) {
      return Invalid(f + ".sender_count", absl::StrCat("at most ", num_hosts_ - 1));
    }
    if (in.bytes_per_sender() == 0) return Invalid(f + ".bytes_per_sender", "must be > 0");
    if (in.start_us() < 0 || in.period_us() < 0) {
      return Invalid(f + ".start_us", "start_us and period_us must be >= 0");
    }
    if (auto st = CheckPriority(f + ".priority", in.priority()); !st.ok()) return st;
    *used |= 1 << PrioOr3(in.priority());
    incast_next_ns_.push_back(UsToNs(in.start_us()));
    incast_done_.push_back(0);
  }
  return absl::OkStatus();
}

absl::Status Fabric::ConfigureAllReduce(uint8_t* used) {
  if (!scenario_.workload().has_allreduce()) return absl::OkStatus();
  const auto& ar = scenario_.workload().allreduce();
  for (uint32_t h : ar.hosts()) {
    if (auto st = CheckHost("workload.allreduce.hosts", h); !st.ok()) return st;
    ring_.push_back(static_cast<int>(h));
  }
  if (ring_.empty()) {
    if (ar.host_count() > static_cast<uint32_t>(num_hosts_)) {
      return Invalid("workload.allreduce.host_count", absl::StrCat("at most ", num_hosts_));
    }
    for (uint32_t h = 0; h < ar.host_count(); ++h) ring_.push_back(static_cast<int>(h));
  }
  if (ring_.empty()) return absl::OkStatus();
  if (ring_.size() < 2) return Invalid("workload.allreduce", "a ring needs at least 2 hosts");
  if (ar.chunk_bytes() == 0) return Invalid("workload.allreduce.chunk_bytes", "must be > 0");
  if (ar.gap_us() < 0) return Invalid("workload.allreduce.gap_us", "must be >= 0");
  if (auto st = CheckPriority("workload.allreduce.priority", ar.priority()); !st.ok()) return st;
  *used |= 1 << PrioOr3(ar.priority());
  ar_next_ns_ = UsToNs(ar.start_us());
  return absl::OkStatus();
}

absl::Status Fabric::ConfigureBackground(uint8_t* used) {
  const v1::Workload& w = scenario_.workload();
  if (!w.has_background()) return absl::OkStatus();
  const auto& bg = w.background();
  // Checked before anything else, NaN included: a bad step is refused even
  // when there is no background without it.
  if (!(bg.load() >= 0 && bg.load() < 1)) {
    return Invalid("workload.background.load", "must be in [0, 1)");
  }
  if (!(bg.step_load() >= 0 && bg.step_load() < 1)) {
    return Invalid("workload.background.step_load", "must be in [0, 1)");
  }
  if (!(bg.step_at_us() >= 0 && bg.step_at_us() <= 1e12)) {
    return Invalid("workload.background.step_at_us", "must be in [0, 1e12]");
  }
  if (!(bg.step_period_us() >= 0 && bg.step_period_us() <= 1e12)) {
    return Invalid("workload.background.step_period_us", "must be in [0, 1e12]");
  }
  if (bg.step_load() == 0 && (bg.step_at_us() > 0 || bg.step_period_us() > 0)) {
    return Invalid("workload.background.step_load",
                   "must be set (> 0) when step_at_us or step_period_us is");
  }
  if (bg.step_load() > 0 && bg.step_period_us() > 0 && UsToNs(bg.step_period_us()) < step_ns_) {
    return Invalid("workload.background.step_period_us", "must be at least one step (step_ns)");
  }
  if (bg.load() == 0 && bg.step_load() == 0) return absl::OkStatus();
  for (uint32_t h : bg.hosts()) {
    if (auto st = CheckHost("workload.background.hosts", h); !st.ok()) return st;
    bg_hosts_.push_back(static_cast<int>(h));
  }
  if (bg_hosts_.empty()) {
    for (int h = 0; h < num_hosts_; ++h) bg_hosts_.push_back(h);
  }
  if (bg_hosts_.size() < 2) return Invalid("workload.background.hosts", "need at least 2 hosts");
  if (auto st = CheckPriority("workload.background.priority", bg.priority()); !st.ok()) return st;
  *used |= 1 << PrioOr3(bg.priority());
  bg_cdf_ = std::make_unique<FlowSizeCdf>(FlowSizeCdf::For(bg.distribution()));
  // Arrivals are drawn at the higher of the two loads and thinned to the
  // load in force (BackgroundLoadAt).
  bg_max_load_ = std::max(bg.load(), bg.step_load());
  bg_mean_gap_ns_ = bg_cdf_->MeanBytes() * 8.0 / (host_gbps_ * bg_max_load_);
  std::exponential_distribution<double> gap(1.0 / bg_mean_gap_ns_);
  for (size_t i = 0; i < bg_hosts_.size(); ++i) {
    bg_next_ns_.push_back(UsToNs(bg.start_us() + gap(rng_) / 1000));
  }
  return absl::OkStatus();
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
  f.dcqcn = hs.dcqcn && (hs.rp_mask >> prio & 1);  // the reaction point on this priority
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
      if (job_events_on_) b.sender_done.emplace_back(f.src, done_ns);
      if (--b.remaining == 0) {
        if (b.start_ns >= warmup_ns_) {
          burst_us_.push_back(static_cast<double>(b.end_ns - b.start_ns) / 1000.0);
        }
        if (job_events_on_) {
          for (const auto& [sender, end] : b.sender_done) {
            job_events_.push_back({sender, "incast", static_cast<double>(end - b.start_ns) * 1e-9,
                                   b.bytes_per_sender});
          }
          job_events_.push_back({b.receiver, "incast",
                                 static_cast<double>(b.end_ns - b.start_ns) * 1e-9,
                                 b.bytes_per_sender * b.sender_done.size()});
          b.sender_done.clear();
          b.sender_done.shrink_to_fit();
        }
      }
      break;
    }
    case FlowKind::kAllReduce:
      if (job_events_on_) {
        for (int h : {f.src, f.dst}) ar_host_done_ns_[h] = std::max(ar_host_done_ns_[h], done_ns);
      }
      if (--ar_remaining_ == 0) {
        if (ar_step_start_ns_ >= warmup_ns_) {
          ar_step_us_.push_back(static_cast<double>(done_ns - ar_step_start_ns_) / 1000.0);
        }
        if (job_events_on_) {
          const uint64_t chunk = scenario_.workload().allreduce().chunk_bytes();
          for (int h : ring_) {
            job_events_.push_back(
                {h, "allreduce",
                 static_cast<double>(ar_host_done_ns_[h] - ar_step_start_ns_) * 1e-9, chunk});
          }
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

std::vector<Fabric::SimJobEvent> Fabric::TakeJobEvents() {
  std::vector<SimJobEvent> out;
  out.swap(job_events_);
  return out;
}

void Fabric::StartAllReduceStep() {
  const int prio = PrioOr3(scenario_.workload().allreduce().priority());
  const double chunk = static_cast<double>(scenario_.workload().allreduce().chunk_bytes());
  ar_step_start_ns_ = now_ns_;
  ar_remaining_ = static_cast<int>(ring_.size());
  if (job_events_on_) ar_host_done_ns_.assign(num_hosts_, now_ns_);
  for (size_t i = 0; i < ring_.size(); ++i) {
    StartFlow(FlowKind::kAllReduce, static_cast<int>(ar_steps_done_), ring_[i],
              ring_[(i + 1) % ring_.size()], chunk, prio);
  }
}

double Fabric::BackgroundLoadAt(int64_t t_ns) const {
  const auto& bg = scenario_.workload().background();
  if (bg.step_load() == 0 || t_ns < UsToNs(bg.step_at_us())) return bg.load();
  if (bg.step_period_us() <= 0) return bg.step_load();
  const int64_t phase = (t_ns - UsToNs(bg.step_at_us())) / UsToNs(bg.step_period_us());
  return phase % 2 == 0 ? bg.step_load() : bg.load();
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
    b.receiver = static_cast<int>(in.receiver());
    b.bytes_per_sender = in.bytes_per_sender();
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
    std::uniform_real_distribution<double> keep(0, 1);
    const double share = BackgroundLoadAt(now_ns_) / bg_max_load_;
    for (size_t i = 0; i < bg_hosts_.size(); ++i) {
      while (bg_next_ns_[i] < horizon) {
        size_t d = pick(rng_);
        if (d >= i) ++d;
        // Without a load step every arrival is kept and no draw is made, so
        // such runs stay what they were for a seed.
        if (share >= 1 || keep(rng_) < share) {
          StartFlow(FlowKind::kBackground, -1, bg_hosts_[i], bg_hosts_[d], bg_cdf_->Sample(rng_),
                    prio);
        }
        bg_next_ns_[i] += std::max<int64_t>(1, static_cast<int64_t>(gap(rng_)));
      }
    }
  }
}

}  // namespace rocetune::sim
