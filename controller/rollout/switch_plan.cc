#include "controller/rollout/switch_plan.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "controller/fleet/inventory_check.h"
#include "controller/fleet/switch_member.h"
#include "controller/policy/knob_spec.h"

namespace rocetune::controller {
namespace {

constexpr char kSwitchDevice[] = "switch";
// The judge's rack-level design wants at least this many racks per group.
constexpr size_t kMinRacksPerGroup = 2;

bool HasSwitchDevice(const v1::ParameterSet& set) {
  for (const v1::DeviceParameters& d : set.devices()) {
    if (d.device() == kSwitchDevice) return true;
  }
  return false;
}

// The members of one rack.
struct Rack {
  std::vector<const StoredHost*> switches;
  std::vector<const StoredHost*> hosts;
  bool judgeable() const { return !switches.empty() && !hosts.empty(); }
};

}  // namespace

SplitKnobValues SplitKnobs(const Knobs& knobs) {
  SplitKnobValues out;
  for (const auto& [name, value] : knobs) {
    std::optional<KnobSpec> spec = FindKnobSpec(name);
    (spec.has_value() && spec->is_switch ? out.sw : out.host)[name] = value;
  }
  return out;
}

bool HasSwitchKnobs(const v1::Policy& policy) {
  for (const v1::Knob& k : policy.knobs()) {
    std::optional<KnobSpec> spec = FindKnobSpec(k.parameter());
    if (spec.has_value() && spec->is_switch) return true;
  }
  return false;
}

bool IsSwitchMember(const v1::HostInfo& info) {
  auto it = info.labels().find(kRoleLabel);
  if (it != info.labels().end() && it->second == kSwitchRole) return true;
  for (const v1::NicDevice& d : info.devices()) {
    if (d.name() == kSwitchDevice) return true;
  }
  return false;
}

bool IsSwitchTarget(const v1::HostTarget& t) {
  return HasSwitchDevice(t.target()) || HasSwitchDevice(t.previous());
}

bool IsMeasuredOnly(const v1::HostTarget& t) { return t.target().devices().empty(); }

absl::StatusOr<v1::ParameterSet> ApplySwitchKnobs(const StoredHost& sw,
                                                  const v1::ParameterSet& previous,
                                                  const Knobs& knobs) {
  v1::ParameterSet out = previous;
  v1::DeviceParameters* dev = nullptr;
  for (v1::DeviceParameters& d : *out.mutable_devices()) {
    if (d.device() == kSwitchDevice) dev = &d;
  }
  if (dev == nullptr) {
    bool reported = false;
    for (const v1::NicDevice& d : sw.info.devices()) reported |= d.name() == kSwitchDevice;
    if (!reported) {
      return absl::FailedPreconditionError(
          absl::StrCat("switch ", sw.info.host_id(), " has not reported its device \"switch\""));
    }
    dev = out.add_devices();
    dev->set_device(kSwitchDevice);
  }
  for (const auto& [name, value] : knobs) {
    std::optional<KnobSpec> spec = FindKnobSpec(name);
    if (!spec.has_value() || !spec->is_switch) {
      return absl::InvalidArgumentError(absl::StrCat("switch ", sw.info.host_id(), ": ", name,
                                                     " is a host knob, not a switch knob"));
    }
    (*dev->mutable_dcqcn())[name] = value;
  }
  if (absl::Status s = CheckAgainstInventory(sw.info, out); !s.ok()) {
    return absl::InvalidArgumentError(s.message());
  }
  return out;
}

absl::StatusOr<std::vector<v1::HostTarget>> PlanRacks(const v1::Policy& policy,
                                                      const std::vector<StoredHost>& switches,
                                                      const std::vector<StoredHost>& hosts,
                                                      const Knobs& knobs, const std::string& seed,
                                                      const PlanAvoid& avoid) {
  const std::string rack_label =
      policy.rollout().rack_label().empty() ? "rack" : policy.rollout().rack_label();
  const SplitKnobValues split = SplitKnobs(knobs);
  auto rack_of = [&](const StoredHost& h) -> std::optional<std::string> {
    auto it = h.info.labels().find(rack_label);
    if (it == h.info.labels().end()) return std::nullopt;
    return it->second;
  };
  std::map<std::string, Rack> racks;
  for (const StoredHost& s : switches) {
    std::optional<std::string> r = rack_of(s);
    if (!r.has_value()) {
      return absl::InvalidArgumentError(
          absl::StrCat("switch ", s.info.host_id(), " has no label \"", rack_label,
                       "\" (the policy's rollout.rack_label): a switch change needs each "
                       "switch's rack to find the hosts it serves"));
    }
    racks[*r].switches.push_back(&s);
  }
  for (const StoredHost& h : hosts) {
    std::optional<std::string> r = rack_of(h);
    if (!r.has_value()) continue;  // below no known switch: neither changed nor measured
    // Switch-only: only hosts below a selected switch are measured.
    if (split.host.empty() && !racks.contains(*r)) continue;
    racks[*r].hosts.push_back(&h);
  }
  std::vector<std::string> judgeable, unjudgeable;
  for (const auto& [name, rack] : racks) {
    (rack.judgeable() ? judgeable : unjudgeable).push_back(name);
  }
  std::map<std::string, int> rank;  // rack -> its members' highest avoid rank
  for (const auto& [name, rack] : racks) {
    int& r = rank[name];
    for (const auto* members : {&rack.switches, &rack.hosts}) {
      for (const StoredHost* m : *members) {
        auto it = avoid.find(m->info.host_id());
        if (it != avoid.end()) r = std::max(r, it->second);
      }
    }
  }
  auto seeded = [&](const std::string& a, const std::string& b) {
    return std::make_pair(rank[a], PlanOrderKey(seed, "rack:" + a)) <
           std::make_pair(rank[b], PlanOrderKey(seed, "rack:" + b));
  };
  std::sort(judgeable.begin(), judgeable.end(), seeded);
  std::sort(unjudgeable.begin(), unjudgeable.end(), seeded);
  if (judgeable.size() < 2) {
    std::vector<std::string> found;
    for (const auto& [name, rack] : racks) {
      found.push_back(absl::StrCat(rack_label, "=", name, " (", rack.switches.size(), " switch",
                                   rack.switches.size() == 1 ? "" : "es", ", ", rack.hosts.size(),
                                   " host", rack.hosts.size() == 1 ? "" : "s", ")"));
    }
    return absl::FailedPreconditionError(absl::StrCat(
        "a change of switch knobs needs at least 2 racks (label \"", rack_label,
        "\") with a selected switch and hosts below it - one canary rack and one control rack "
        "whose ToR stays unchanged; found ",
        judgeable.size(), ": ", found.empty() ? "no rack" : absl::StrJoin(found, ", ")));
  }
  const size_t total = racks.size();
  size_t want = static_cast<size_t>(std::ceil(policy.rollout().canary_fraction() * total));
  // The judge compares whole racks: two per group at least when there are.
  want = std::max<size_t>(want, kMinRacksPerGroup);
  const size_t cap = judgeable.size() / 2;
  size_t canary_hosts = 0;
  for (size_t i = 0; i < std::min(want, cap); ++i) canary_hosts += racks[judgeable[i]].hosts.size();
  while (want < cap && canary_hosts < policy.rollout().min_canary_hosts()) {
    canary_hosts += racks[judgeable[want]].hosts.size();
    ++want;
  }
  want = std::min(want, cap);

  // rack -> (role, stage)
  std::map<std::string, std::pair<v1::HostTarget::Role, uint32_t>> plan;
  for (size_t i = 0; i < judgeable.size(); ++i) {
    plan[judgeable[i]] = {i < want ? v1::HostTarget::CANARY : v1::HostTarget::CONTROL, 0};
  }
  for (const std::string& r : unjudgeable) plan[r] = {v1::HostTarget::REST, 0};
  std::vector<std::string> order = unjudgeable;
  order.insert(order.end(), judgeable.begin() + static_cast<std::ptrdiff_t>(want), judgeable.end());
  std::vector<double> stages(policy.rollout().stages().begin(), policy.rollout().stages().end());
  if (stages.empty() || stages.back() < 1.0) stages.push_back(1.0);
  size_t next = 0;
  size_t changed = want;
  for (size_t s = 0; s < stages.size() && next < order.size(); ++s) {
    size_t upto = s + 1 == stages.size()
                      ? total
                      : std::min(total, static_cast<size_t>(std::ceil(stages[s] * total)));
    upto = std::max(upto, changed + 1);
    // One rack left unchanged cannot be judged against: it goes with this stage.
    if (upto + 1 == changed + (order.size() - next)) ++upto;
    while (changed < upto && next < order.size()) {
      plan[order[next++]].second = static_cast<uint32_t>(s + 1);
      ++changed;
    }
  }

  std::vector<v1::HostTarget> out;
  for (const auto& [rack_name, rack] : racks) {
    // Plain copies: clang before 16 cannot capture structured bindings.
    const std::string name = rack_name;
    const v1::HostTarget::Role role = plan.at(name).first;
    const uint32_t stage = plan.at(name).second;
    auto base = [&](const StoredHost& h) {
      v1::HostTarget t;
      t.set_host_id(h.info.host_id());
      t.set_role(role);
      t.set_rack(name);
      t.set_stage(stage);
      return t;
    };
    for (const StoredHost* s : rack.switches) {
      v1::HostTarget t = base(*s);
      const v1::ParameterSet previous = PreviousParameters(*s);
      absl::StatusOr<v1::ParameterSet> target = ApplySwitchKnobs(*s, previous, split.sw);
      if (!target.ok()) return target.status();
      *t.mutable_previous() = previous;
      t.set_previous_version(s->info.desired_version());
      *t.mutable_target() = *std::move(target);
      out.push_back(std::move(t));
    }
    for (const StoredHost* h : rack.hosts) {
      v1::HostTarget t = base(*h);
      if (!split.host.empty()) {
        const v1::ParameterSet previous = PreviousParameters(*h);
        absl::StatusOr<v1::ParameterSet> target = ApplyKnobs(*h, previous, split.host);
        if (!target.ok()) return target.status();
        *t.mutable_previous() = previous;
        *t.mutable_target() = *std::move(target);
      }
      t.set_previous_version(h->info.desired_version());
      out.push_back(std::move(t));
    }
  }
  std::sort(out.begin(), out.end(), [](const v1::HostTarget& a, const v1::HostTarget& b) {
    return a.host_id() < b.host_id();
  });
  return out;
}

}  // namespace rocetune::controller
