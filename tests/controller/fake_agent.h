#ifndef ROCETUNE_TESTS_CONTROLLER_FAKE_AGENT_H_
#define ROCETUNE_TESTS_CONTROLLER_FAKE_AGENT_H_

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "controller/fleet/agent_connection.h"
#include "controller/fleet/fleet.h"
#include "model/in_effect.h"
#include "rocetune/v1/agent.pb.h"

namespace rocetune::controller::testing {

// An agent's stream as the fleet sees it: the one fake of AgentConnection for
// the controller's tests. It records every desired-state push, probe plan and
// Close. Given a fleet, it answers each push as an agent would: an ACK with
// the set as applied, or, once after NackNext(), a NACK that keeps its set.
// After SetReactionPointMask, its ACKs carry that mask read back and the
// values it leaves without effect (model/in_effect.h), as the agent sends.
// Thread-safe (the fleet's planner thread pushes plans).
class FakeAgent : public AgentConnection {
 public:
  explicit FakeAgent(uint64_t stream, Fleet* fleet = nullptr, std::string host = "",
                     v1::ParameterSet initial = v1::ParameterSet())
      : stream_(stream), fleet_(fleet), host_(std::move(host)), applied_(std::move(initial)) {}

  uint64_t stream_id() const override { return stream_; }

  void PushDesiredState(const std::string& version, const v1::ParameterSet& params,
                        uint32_t lease_seconds) override {
    bool nack = false;
    std::string kept;
    {
      absl::MutexLock lock(&mu_);
      pushed_.push_back(version);
      leases_.push_back(lease_seconds);
      nack = nack_next_;
      nack_next_ = false;
      kept = applied_version_;
      if (!nack) {
        applied_ = params;
        applied_version_ = version;
      }
    }
    if (fleet_ == nullptr) return;
    // Answered outside the lock: the fleet may push again from inside.
    if (nack) {
      v1::Nack n;
      n.set_kind(v1::DESIRED_STATE);
      n.set_version(version);
      n.set_kept_version(kept);
      n.set_error("mlx5_0: rpg_time_reset: write failed: Permission denied");
      fleet_->HandleNack(host_, n);
      return;
    }
    v1::Ack a;
    a.set_kind(v1::DESIRED_STATE);
    a.set_version(version);
    *a.mutable_applied() = params;
    std::optional<uint32_t> rp_mask;
    {
      absl::MutexLock lock(&mu_);
      rp_mask = rp_enable_mask_;
    }
    // The device keeps its mask where the set does not carry one; the agent
    // reads it back and says which values it leaves without effect.
    if (rp_mask.has_value()) {
      for (v1::DeviceParameters& d : *a.mutable_applied()->mutable_devices()) {
        if (!d.has_rp_enable_mask()) d.set_rp_enable_mask(*rp_mask);
      }
    }
    for (v1::ParameterNote& n : NotInEffect(params, a.applied())) {
      *a.add_not_in_effect() = std::move(n);
    }
    fleet_->HandleAck(host_, a);
  }

  // The host's devices hold this DCQCN reaction-point enable mask (0: off on
  // every priority), which sets that leave it alone keep.
  void SetReactionPointMask(uint32_t mask) {
    absl::MutexLock lock(&mu_);
    rp_enable_mask_ = mask;
  }

  void PushProbePlan(const v1::ProbePlan& plan) override {
    absl::MutexLock lock(&mu_);
    ++plans_;
    last_plan_version_ = plan.version();
  }

  void Close(const absl::Status& status) override {
    absl::MutexLock lock(&mu_);
    closed_ = status;
  }

  // The next push is refused.
  void NackNext() {
    absl::MutexLock lock(&mu_);
    nack_next_ = true;
  }
  std::vector<std::string> pushed() const {
    absl::MutexLock lock(&mu_);
    return pushed_;
  }
  int pushes() const {
    absl::MutexLock lock(&mu_);
    return static_cast<int>(pushed_.size());
  }
  void ClearPushed() {
    absl::MutexLock lock(&mu_);
    pushed_.clear();
    leases_.clear();
  }
  // The provisional lease of each push, in push order (0: a final set).
  std::vector<uint32_t> leases() const {
    absl::MutexLock lock(&mu_);
    return leases_;
  }
  std::optional<absl::Status> closed() const {
    absl::MutexLock lock(&mu_);
    return closed_;
  }
  int plans() const {
    absl::MutexLock lock(&mu_);
    return plans_;
  }
  std::string last_plan_version() const {
    absl::MutexLock lock(&mu_);
    return last_plan_version_;
  }
  // The value of DCQCN parameter `name` in the set the agent holds (the
  // first device naming it), or `dflt`.
  int64_t Param(const std::string& name, int64_t dflt = -1) const {
    absl::MutexLock lock(&mu_);
    for (const auto& d : applied_.devices()) {
      auto it = d.dcqcn().find(name);
      if (it != d.dcqcn().end()) return it->second;
    }
    return dflt;
  }

 private:
  const uint64_t stream_;
  Fleet* const fleet_;
  const std::string host_;
  mutable absl::Mutex mu_;
  v1::ParameterSet applied_ ABSL_GUARDED_BY(mu_);
  std::string applied_version_ ABSL_GUARDED_BY(mu_);
  std::vector<uint32_t> leases_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> pushed_ ABSL_GUARDED_BY(mu_);
  bool nack_next_ ABSL_GUARDED_BY(mu_) = false;
  std::optional<uint32_t> rp_enable_mask_ ABSL_GUARDED_BY(mu_);
  std::optional<absl::Status> closed_ ABSL_GUARDED_BY(mu_);
  int plans_ ABSL_GUARDED_BY(mu_) = 0;
  std::string last_plan_version_ ABSL_GUARDED_BY(mu_);
};

}  // namespace rocetune::controller::testing

#endif  // ROCETUNE_TESTS_CONTROLLER_FAKE_AGENT_H_
