#include "agent/probe/probe_tracker.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "daemon/logging.h"

namespace rocetune {
namespace {

// How many finished sequence numbers are remembered to tell late and duplicate
// answers apart from foreign ones.
constexpr size_t kFinishedMemory = 1 << 16;

const char* OutcomeName(ProbeTracker::Outcome o) {
  switch (o) {
    case ProbeTracker::Outcome::kLate:
      return "late";
    case ProbeTracker::Outcome::kDuplicate:
      return "duplicate";
    case ProbeTracker::Outcome::kForeign:
      return "foreign";
    case ProbeTracker::Outcome::kBogus:
      return "bogus";
    default:
      return "ok";
  }
}

}  // namespace

ProbeTracker::ProbeTracker(std::string kind, std::string clock)
    : kind_(std::move(kind)), clock_(std::move(clock)) {}

void ProbeTracker::set_clock(std::string clock) {
  absl::MutexLock l(&mu_);
  clock_ = std::move(clock);
}

uint64_t ProbeTracker::OnSent(const std::string& peer_class, absl::Duration t_send,
                              absl::Duration timeout) {
  absl::MutexLock l(&mu_);
  const uint64_t seq = next_seq_++;
  Pending& p = pending_[seq];
  p.peer_class = peer_class;
  p.t_send = t_send;
  p.deadline = t_send + timeout;
  windows_[peer_class].sent++;
  return seq;
}

void ProbeTracker::OnSendFailed(const std::string& peer_class, absl::string_view why) {
  absl::MutexLock l(&mu_);
  Window& w = windows_[peer_class];
  w.sent++;
  w.lost++;
  anomalies_.send_errors++;
  LogOnce(absl::StrCat("probe.", kind_, ".send_error.", peer_class), LogLevel::kWarning,
          "probe could not be sent; counted as lost",
          {{"prober", kind_}, {"peer_class", peer_class}, {"error", std::string(why)}});
}

void ProbeTracker::OnSendCompleted(uint64_t seq, absl::Duration t_send) {
  absl::MutexLock l(&mu_);
  auto it = pending_.find(seq);
  if (it == pending_.end()) return;
  it->second.t_send = t_send;
}

ProbeTracker::Outcome ProbeTracker::OnReply(uint64_t seq, absl::Duration t_recv,
                                            absl::Duration host_delay) {
  absl::MutexLock l(&mu_);
  return Update(seq, &t_recv, &host_delay);
}

ProbeTracker::Outcome ProbeTracker::OnEcho(uint64_t seq, absl::Duration t_recv) {
  absl::MutexLock l(&mu_);
  return Update(seq, &t_recv, nullptr);
}

ProbeTracker::Outcome ProbeTracker::OnDelay(uint64_t seq, absl::Duration host_delay) {
  absl::MutexLock l(&mu_);
  return Update(seq, nullptr, &host_delay);
}

ProbeTracker::Outcome ProbeTracker::Anomaly(Outcome o, uint64_t seq) {
  switch (o) {
    case Outcome::kLate:
      anomalies_.late++;
      break;
    case Outcome::kDuplicate:
      anomalies_.duplicate++;
      break;
    case Outcome::kForeign:
      anomalies_.foreign++;
      break;
    case Outcome::kBogus:
      anomalies_.bogus++;
      break;
    default:
      break;
  }
  LogOnce(absl::StrCat("probe.", kind_, ".", OutcomeName(o)), LogLevel::kWarning,
          "probe answer ignored",
          {{"prober", kind_}, {"reason", OutcomeName(o)}, {"seq", absl::StrCat(seq)}});
  return o;
}

ProbeTracker::Outcome ProbeTracker::Update(uint64_t seq, const absl::Duration* t_recv,
                                           const absl::Duration* delay) {
  auto it = pending_.find(seq);
  if (it == pending_.end()) {
    auto f = finished_.find(seq);
    if (f == finished_.end()) {
      // Older than the remembered range: an answer far too late; else never sent.
      const bool old = seq < next_seq_ && !finished_order_.empty() && seq < finished_order_.front();
      return Anomaly(old ? Outcome::kLate : Outcome::kForeign, seq);
    }
    return Anomaly(f->second == Finished::kExpired ? Outcome::kLate : Outcome::kDuplicate, seq);
  }
  Pending& p = it->second;
  if (t_recv != nullptr) {
    if (p.echoed) return Anomaly(Outcome::kDuplicate, seq);
    p.echoed = true;
    p.t_recv = *t_recv;
  }
  if (delay != nullptr) {
    if (p.has_delay) return Anomaly(Outcome::kDuplicate, seq);
    p.has_delay = true;
    p.host_delay = *delay;
  }
  if (!p.echoed || !p.has_delay) return Outcome::kPending;
  p.rtt = p.t_recv - p.t_send;
  Window& w = windows_[p.peer_class];
  if (p.host_delay < absl::ZeroDuration() || p.rtt < p.host_delay) {
    w.lost++;
    Finish(seq, Finished::kCompleted);
    return Anomaly(Outcome::kBogus, seq);
  }
  w.network_rtt.Insert(absl::ToDoubleSeconds(p.rtt - p.host_delay));
  w.host_delay.Insert(absl::ToDoubleSeconds(p.host_delay));
  Finish(seq, Finished::kCompleted);
  return Outcome::kSample;
}

void ProbeTracker::Finish(uint64_t seq, Finished how) {
  pending_.erase(seq);
  finished_[seq] = how;
  finished_order_.push_back(seq);
  while (finished_order_.size() > kFinishedMemory) {
    finished_.erase(finished_order_.front());
    finished_order_.pop_front();
  }
}

void ProbeTracker::OnMalformed(absl::string_view why) {
  absl::MutexLock l(&mu_);
  anomalies_.malformed++;
  LogOnce(absl::StrCat("probe.", kind_, ".malformed"), LogLevel::kWarning,
          "malformed probe packet ignored", {{"prober", kind_}, {"error", std::string(why)}});
}

void ProbeTracker::OnForeign(absl::string_view why) {
  absl::MutexLock l(&mu_);
  anomalies_.foreign++;
  LogOnce(absl::StrCat("probe.", kind_, ".foreign"), LogLevel::kWarning,
          "foreign probe packet ignored", {{"prober", kind_}, {"reason", std::string(why)}});
}

void ProbeTracker::ExpireDue(absl::Duration now) {
  absl::MutexLock l(&mu_);
  std::vector<uint64_t> expired;
  for (const auto& [seq, p] : pending_) {
    if (p.deadline <= now) expired.push_back(seq);
  }
  std::sort(expired.begin(), expired.end());
  for (uint64_t seq : expired) {
    windows_[pending_[seq].peer_class].lost++;
    Finish(seq, Finished::kExpired);
  }
}

size_t ProbeTracker::outstanding() const {
  absl::MutexLock l(&mu_);
  return pending_.size();
}

std::vector<v1::LatencyWindow> ProbeTracker::TakeWindow() {
  absl::MutexLock l(&mu_);
  std::vector<v1::LatencyWindow> out;
  for (auto& [peer_class, w] : windows_) {
    v1::LatencyWindow lw;
    lw.set_peer_class(peer_class);
    w.network_rtt.ToProto(lw.mutable_network_rtt_seconds());
    w.host_delay.ToProto(lw.mutable_host_delay_seconds());
    lw.set_probes_sent(w.sent);
    lw.set_probes_lost(w.lost);
    lw.set_clock(clock_);
    out.push_back(std::move(lw));
  }
  windows_.clear();
  return out;
}

ProbeAnomalies ProbeTracker::anomalies() const {
  absl::MutexLock l(&mu_);
  return anomalies_;
}

}  // namespace rocetune
