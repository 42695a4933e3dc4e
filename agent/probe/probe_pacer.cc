#include "agent/probe/probe_pacer.h"

#include <algorithm>

namespace rocetune {

ProbePacer::ProbePacer(int peers, double rate_per_peer, absl::Duration now, uint64_t seed)
    : interval_(peers > 0 ? absl::Seconds(1.0 / rate_per_peer) : absl::InfiniteDuration()),
      rng_(seed) {
  std::uniform_real_distribution<double> u(0.0, 1.0);
  due_.reserve(peers);
  for (int i = 0; i < peers; ++i) due_.push_back(now + interval_ * u(rng_));
}

absl::Duration ProbePacer::Gap() {
  std::uniform_real_distribution<double> u(0.5, 1.5);
  return interval_ * u(rng_);
}

std::vector<int> ProbePacer::TakeDue(absl::Duration now) {
  std::vector<int> due;
  for (size_t i = 0; i < due_.size(); ++i) {
    if (due_[i] > now) continue;
    due.push_back(static_cast<int>(i));
    due_[i] += Gap();
    if (due_[i] < now) due_[i] = now + Gap() / 2;
  }
  return due;
}

absl::Duration ProbePacer::NextDue() const {
  if (due_.empty()) return absl::InfiniteDuration();
  return *std::min_element(due_.begin(), due_.end());
}

}  // namespace rocetune
