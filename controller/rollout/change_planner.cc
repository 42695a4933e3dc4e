#include "controller/rollout/change_planner.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <set>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "controller/policy/knob_spec.h"
#include "controller/rollout/switch_plan.h"
#include "model/cc_params.h"
#include "openssl/sha.h"

namespace rocetune::controller {
namespace {

const v1::Knob* FindKnob(const v1::Policy& policy, const std::string& name) {
  for (const v1::Knob& k : policy.knobs()) {
    if (k.parameter() == name) return &k;
  }
  return nullptr;
}

uint64_t OrderKey(const std::string& seed, const std::string& host) {
  return PlanOrderKey(seed, host);
}

// Switch knobs among `knobs` ("" when none): they never go to a host's NIC.
std::string FirstSwitchKnob(const Knobs& knobs) {
  for (const auto& [name, value] : knobs) {
    std::optional<KnobSpec> spec = FindKnobSpec(name);
    if (spec.has_value() && spec->is_switch) return name;
  }
  return "";
}

absl::Status SetKnob(v1::DeviceParameters* d, const std::string& name, int64_t value) {
  if (name == kRpEnableMask) {
    d->set_rp_enable_mask(static_cast<uint32_t>(value));
  } else if (name == kNpEnableMask) {
    d->set_np_enable_mask(static_cast<uint32_t>(value));
  } else if (absl::StartsWith(name, "pfc.")) {
    if (!d->has_pfc()) {
      return absl::FailedPreconditionError(absl::StrCat(d->device(), ": knob ", name,
                                                        " needs the device's PFC state, which the ",
                                                        "host has not reported"));
    }
    if (name == "pfc.delay") {
      d->mutable_pfc()->set_delay(static_cast<uint32_t>(value));
    } else if (name == "pfc.prevention_timeout_ms") {
      d->mutable_pfc()->set_prevention_timeout_ms(static_cast<uint32_t>(value));
    } else {
      return absl::InvalidArgumentError(absl::StrCat("unknown PFC knob ", name));
    }
  } else {
    (*d->mutable_dcqcn())[name] = value;
  }
  return absl::OkStatus();
}

}  // namespace

uint64_t PlanOrderKey(const std::string& seed, const std::string& text) {
  const std::string keyed = absl::StrCat(seed, "/", text);
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(keyed.data()), keyed.size(), digest);
  uint64_t k = 0;
  for (int i = 0; i < 8; ++i) k = (k << 8) | digest[i];
  return k;
}

absl::Status CheckKnobs(const v1::Policy& policy, const Knobs& knobs) {
  if (knobs.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("no knob values given; policy ", policy.name(), " has knobs ",
                     absl::StrJoin(policy.knobs(), ", ", [](std::string* out, const v1::Knob& k) {
                       absl::StrAppend(out, k.parameter());
                     })));
  }
  for (const auto& [name, value] : knobs) {
    const v1::Knob* k = FindKnob(policy, name);
    if (k == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat(name, " is not a knob of policy ", policy.name()));
    }
    if (value < k->min() || value > k->max()) {
      return absl::InvalidArgumentError(
          absl::StrCat(name, "=", value, " outside the policy's [", k->min(), ", ", k->max(), "]"));
    }
  }
  return absl::OkStatus();
}

v1::ParameterSet MergeParameterSets(const v1::ParameterSet& base, const v1::ParameterSet& overlay) {
  v1::ParameterSet out = base;
  for (const v1::DeviceParameters& o : overlay.devices()) {
    v1::DeviceParameters* d = nullptr;
    for (v1::DeviceParameters& b : *out.mutable_devices()) {
      if (b.device() == o.device()) d = &b;
    }
    if (d == nullptr) {
      *out.add_devices() = o;
      continue;
    }
    for (const auto& [name, value] : o.dcqcn()) (*d->mutable_dcqcn())[name] = value;
    if (o.has_rp_enable_mask()) d->set_rp_enable_mask(o.rp_enable_mask());
    if (o.has_np_enable_mask()) d->set_np_enable_mask(o.np_enable_mask());
    if (o.has_pfc()) {
      v1::PfcSettings* pfc = d->mutable_pfc();
      pfc->set_enable_mask(o.pfc().enable_mask());
      if (o.pfc().has_delay()) pfc->set_delay(o.pfc().delay());
      if (o.pfc().has_prevention_timeout_ms()) {
        pfc->set_prevention_timeout_ms(o.pfc().prevention_timeout_ms());
      }
    }
  }
  return out;
}

v1::ParameterSet PreviousParameters(const StoredHost& host) {
  if (host.desired_seq != 0) return host.desired;
  return host.info.current_parameters();
}

absl::StatusOr<v1::ParameterSet> ApplyKnobs(const StoredHost& host,
                                            const v1::ParameterSet& previous, const Knobs& knobs) {
  if (IsSwitchMember(host.info)) return ApplySwitchKnobs(host, previous, knobs);
  if (const std::string sw = FirstSwitchKnob(knobs); !sw.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("host ", host.info.host_id(), ": ", sw,
                                                   " is a switch knob; the host is not a switch"));
  }
  v1::ParameterSet out = previous;
  if (out.devices().empty()) {
    for (const v1::NicDevice& d : host.info.devices()) {
      if (d.cc_param_layout().empty() || d.cc_param_layout() == "none") continue;
      out.add_devices()->set_device(d.name());
    }
  }
  if (out.devices().empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("host ", host.info.host_id(),
                     " has no RDMA device with writable congestion-control parameters"));
  }
  for (v1::DeviceParameters& d : *out.mutable_devices()) {
    for (const auto& [name, value] : knobs) {
      if (absl::Status s = SetKnob(&d, name, value); !s.ok()) {
        return absl::Status(s.code(),
                            absl::StrCat("host ", host.info.host_id(), ": ", s.message()));
      }
    }
  }
  std::vector<CcRangeViolation> ignored;
  if (absl::Status s = ValidateParameterSetExceptDcqcnRanges(out, &ignored); !s.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("host ", host.info.host_id(), ": ", s.message()));
  }
  // Values carried over from the host may sit outside the table's ranges
  // (firmware defaults vary); the knobs' own values may not.
  for (const CcRangeViolation& v : ignored) {
    if (knobs.count(v.name) != 0) {
      return absl::InvalidArgumentError(absl::StrCat("host ", host.info.host_id(), ": ", v.text));
    }
  }
  return out;
}

absl::StatusOr<std::vector<v1::HostTarget>> PlanHosts(const v1::Policy& policy,
                                                      const std::vector<StoredHost>& hosts,
                                                      const std::string& seed,
                                                      const PlanAvoid& avoid) {
  const std::string rack_label =
      policy.rollout().rack_label().empty() ? "rack" : policy.rollout().rack_label();
  // rack -> hosts in seeded order
  std::map<std::string, std::vector<std::pair<uint64_t, std::string>>> racks;
  for (const StoredHost& h : hosts) {
    auto it = h.info.labels().find(rack_label);
    const std::string rack = it == h.info.labels().end() ? "" : it->second;
    racks[rack].emplace_back(OrderKey(seed, h.info.host_id()), h.info.host_id());
  }
  // Within a rack, by avoid rank, then in seeded order.
  auto rank = [&avoid](const std::string& id) {
    auto it = avoid.find(id);
    return it == avoid.end() ? 0 : it->second;
  };
  std::map<std::string, int> avoided;  // rack -> its hosts' total rank
  for (auto& [rack, list] : racks) {
    std::sort(list.begin(), list.end(), [&](const auto& a, const auto& b) {
      return std::make_pair(rank(a.second), a.first) < std::make_pair(rank(b.second), b.first);
    });
    for (const auto& [key, id] : list) avoided[rack] += rank(id);
  }
  const size_t n = hosts.size();
  size_t pairable = 0;
  for (const auto& [rack, list] : racks) pairable += list.size() / 2;
  if (pairable == 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "no rack (label \"", rack_label, "\") has two selected hosts: a canary needs a control ",
        "host in its own rack"));
  }
  size_t want = static_cast<size_t>(std::ceil(policy.rollout().canary_fraction() * n));
  want = std::max<size_t>(want, std::max<uint32_t>(1, policy.rollout().min_canary_hosts()));
  want = std::min(want, pairable);

  std::map<std::string, v1::HostTarget> out;
  std::map<std::string, size_t> used;  // rack -> hosts taken
  std::vector<std::string> rack_order;
  for (const auto& [rack, list] : racks) rack_order.push_back(rack);
  // Racks in seeded order too, so small canaries do not always land on the
  // alphabetically first racks.
  std::sort(rack_order.begin(), rack_order.end(), [&](const std::string& a, const std::string& b) {
    return std::make_pair(avoided[a], OrderKey(seed, "rack:" + a)) <
           std::make_pair(avoided[b], OrderKey(seed, "rack:" + b));
  });
  size_t canaries = 0;
  while (canaries < want) {
    bool progress = false;
    for (const std::string& rack : rack_order) {
      if (canaries >= want) break;
      const auto& list = racks[rack];
      size_t& u = used[rack];
      if (u + 2 > list.size()) continue;
      v1::HostTarget c;
      c.set_host_id(list[u].second);
      c.set_role(v1::HostTarget::CANARY);
      c.set_rack(rack);
      c.set_stage(0);
      v1::HostTarget k;
      k.set_host_id(list[u + 1].second);
      k.set_role(v1::HostTarget::CONTROL);
      k.set_rack(rack);
      out[c.host_id()] = c;
      out[k.host_id()] = k;
      u += 2;
      ++canaries;
      progress = true;
    }
    if (!progress) break;
  }
  // The rest, then the control hosts, in stage order.
  std::vector<std::string> rest, controls;
  for (const std::string& rack : rack_order) {
    const auto& list = racks[rack];
    for (size_t i = used[rack]; i < list.size(); ++i) {
      v1::HostTarget r;
      r.set_host_id(list[i].second);
      r.set_role(v1::HostTarget::REST);
      r.set_rack(rack);
      out[r.host_id()] = r;
      rest.push_back(r.host_id());
    }
  }
  for (const auto& [id, t] : out) {
    if (t.role() == v1::HostTarget::CONTROL) controls.push_back(id);
  }
  std::vector<std::string> order = rest;
  order.insert(order.end(), controls.begin(), controls.end());
  std::vector<double> stages(policy.rollout().stages().begin(), policy.rollout().stages().end());
  if (stages.empty() || stages.back() < 1.0) stages.push_back(1.0);
  size_t next = 0;
  size_t changed = canaries;
  for (size_t s = 0; s < stages.size(); ++s) {
    const size_t upto =
        s + 1 == stages.size() ? n : std::min(n, static_cast<size_t>(std::ceil(stages[s] * n)));
    while (changed < upto && next < order.size()) {
      out[order[next++]].set_stage(static_cast<uint32_t>(s + 1));
      ++changed;
    }
  }
  std::vector<v1::HostTarget> result;
  for (auto& [id, t] : out) result.push_back(std::move(t));
  return result;
}

}  // namespace rocetune::controller
