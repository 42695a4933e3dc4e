#include "controller/fleet/inventory_check.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "model/cc_params.h"
#include "model/switch_params.h"

namespace rocetune::controller {
namespace {

const v1::NicDevice* FindDevice(const v1::HostInfo& host, const std::string& name) {
  for (const v1::NicDevice& d : host.devices()) {
    if (d.name() == name) return &d;
  }
  return nullptr;
}

const v1::DeviceParameters* FindCurrent(const v1::HostInfo& host, const std::string& name) {
  for (const v1::DeviceParameters& d : host.current_parameters().devices()) {
    if (d.device() == name) return &d;
  }
  return nullptr;
}

bool CarriesCc(const v1::DeviceParameters& d) {
  return !d.dcqcn().empty() || d.has_rp_enable_mask() || d.has_np_enable_mask();
}

// Whether `layout` has DCQCN parameter `spec`, from the parameter table
// (std::nullopt: the table does not say, e.g. the simulator's layout).
std::optional<bool> TableHas(const std::string& layout, const CcParamSpec& spec) {
  if (layout == "ofed_sysfs") return spec.ofed_file != nullptr;
  if (layout == "debugfs") return spec.debugfs_file != nullptr;
  return std::nullopt;
}

// Layout checks of one device: the layout exists and has each parameter.
void CheckLayout(const v1::NicDevice& dev, const v1::DeviceParameters& want,
                 const v1::DeviceParameters* current, std::vector<std::string>* errors) {
  const std::string& layout = dev.cc_param_layout();
  if (!CarriesCc(want)) return;
  if (layout.empty() || layout == "none") {
    errors->push_back(absl::StrCat(dev.name(), ": no writable DCQCN parameters (layout ",
                                   layout.empty() ? "none" : layout, ")"));
    return;
  }
  for (const auto& [name, value] : want.dcqcn()) {
    const CcParamSpec* spec = FindCcParam(name);
    if (spec == nullptr) continue;  // named by the range check
    bool has = true;
    if (current != nullptr) {
      has = current->dcqcn().contains(name);
    } else if (std::optional<bool> t = TableHas(layout, *spec); t.has_value()) {
      has = *t;
    }
    if (!has) {
      errors->push_back(
          absl::StrCat(dev.name(), ": parameter ", name, " is not available in layout ", layout));
    }
  }
  const bool masks_known = current != nullptr || layout == "debugfs";
  if (masks_known) {
    if (want.has_rp_enable_mask() && (current == nullptr || !current->has_rp_enable_mask())) {
      errors->push_back(absl::StrCat(dev.name(), ": ", kRpEnableMask,
                                     " (per-priority enable) is not available in layout ", layout));
    }
    if (want.has_np_enable_mask() && (current == nullptr || !current->has_np_enable_mask())) {
      errors->push_back(absl::StrCat(dev.name(), ": ", kNpEnableMask,
                                     " (per-priority enable) is not available in layout ", layout));
    }
  }
}

// Link checks of one device: rates within the fastest port, min <= max rate.
void CheckLink(const v1::NicDevice& dev, const v1::DeviceParameters& want,
               const v1::DeviceParameters* current, std::vector<std::string>* errors) {
  uint64_t speed = 0;
  for (const v1::NicPort& p : dev.ports()) speed = std::max(speed, p.speed_mbps());
  std::vector<std::pair<std::string, int64_t>> sorted(want.dcqcn().begin(), want.dcqcn().end());
  std::sort(sorted.begin(), sorted.end());
  for (const auto& [name, value] : sorted) {
    const CcParamSpec* spec = FindCcParam(name);
    if (spec == nullptr || std::string(spec->unit) != "Mbps" || speed == 0) continue;
    if (value > 0 && static_cast<uint64_t>(value) > speed) {
      errors->push_back(absl::StrCat(dev.name(), ": ", name, " ", value,
                                     " Mb/s exceeds the port speed ", speed, " Mb/s"));
    }
  }
  auto after = [&](const char* name) -> std::optional<int64_t> {
    if (auto it = want.dcqcn().find(name); it != want.dcqcn().end()) return it->second;
    if (current != nullptr) {
      if (auto it = current->dcqcn().find(name); it != current->dcqcn().end()) return it->second;
    }
    return std::nullopt;
  };
  const std::optional<int64_t> lo = after("rpg_min_rate");
  const std::optional<int64_t> hi = after("rpg_max_rate");
  if ((want.dcqcn().contains("rpg_min_rate") || want.dcqcn().contains("rpg_max_rate")) &&
      lo.has_value() && hi.has_value() && *hi != 0 && *lo > *hi) {
    errors->push_back(absl::StrCat(dev.name(), ": rpg_min_rate ", *lo, " Mb/s above rpg_max_rate ",
                                   *hi, " Mb/s"));
  }
}

// A switch's knobs (model/switch_params.h) against its inventory: each
// name is a switch knob the switch reported (its profiles and ports are in
// its current parameters), thresholds within its buffer, Kmin below Kmax as
// they would be after the write, Pmax in (0, 100], PFC masks in 0..255.
void CheckSwitch(const v1::NicDevice& dev, const v1::DeviceParameters& want,
                 const v1::DeviceParameters* current, std::vector<std::string>* errors) {
  if (want.has_rp_enable_mask() || want.has_np_enable_mask() || want.has_pfc()) {
    errors->push_back(absl::StrCat(dev.name(), ": a switch takes only ecn.* and pfc.* knobs"));
  }
  std::map<std::string, int64_t> after;
  if (current != nullptr) after.insert(current->dcqcn().begin(), current->dcqcn().end());
  for (const auto& [name, value] : want.dcqcn()) {
    absl::StatusOr<SwitchKnob> knob = ParseSwitchKnob(name);
    if (!knob.ok()) {
      errors->push_back(absl::StrCat(dev.name(), ": ", knob.status().message()));
      continue;
    }
    if (current != nullptr && !current->dcqcn().contains(name)) {
      errors->push_back(absl::StrCat(
          dev.name(), ": ", name, ": the switch has no ",
          knob->kind == SwitchKnob::Kind::kEcn ? "WRED profile field" : "port", " by that name"));
      continue;
    }
    after[name] = value;
    if (knob->kind == SwitchKnob::Kind::kPfcEnable) {
      if (value < 0 || value > 255) {
        errors->push_back(
            absl::StrCat(dev.name(), ": ", name, "=", value, ": want a priority mask in 0..255"));
      }
    } else if (absl::EndsWith(knob->field, "_drop_probability")) {
      if (value <= 0 || value > 100) {
        errors->push_back(
            absl::StrCat(dev.name(), ": ", name, "=", value, ": want a percentage in (0, 100]"));
      }
    } else {
      const int64_t buffer = dev.switch_buffer_bytes() > 0
                                 ? static_cast<int64_t>(dev.switch_buffer_bytes())
                                 : kMaxWredThresholdBytes;
      if (value < 0 || value > buffer) {
        errors->push_back(absl::StrCat(dev.name(), ": ", name, "=", value,
                                       " bytes exceeds the buffer (", buffer, " bytes)"));
      }
    }
  }
  // Kmin < Kmax per profile and colour, as they would be after the write.
  for (const auto& [name, kmin] : after) {
    if (!want.dcqcn().contains(name) || !absl::EndsWith(name, "_min_threshold")) continue;
    const std::string max_name =
        absl::StrCat(name.substr(0, name.size() - strlen("_min_threshold")), "_max_threshold");
    auto it = after.find(max_name);
    if (it != after.end() && kmin >= it->second) {
      errors->push_back(absl::StrCat(dev.name(), ": ", name, "=", kmin, " is not below ", max_name,
                                     "=", it->second));
    }
  }
  for (const auto& [name, kmax] : want.dcqcn()) {
    if (!absl::EndsWith(name, "_max_threshold")) continue;
    const std::string min_name =
        absl::StrCat(name.substr(0, name.size() - strlen("_max_threshold")), "_min_threshold");
    if (want.dcqcn().contains(min_name)) continue;  // checked above
    auto it = after.find(min_name);
    if (it != after.end() && it->second >= kmax) {
      errors->push_back(absl::StrCat(dev.name(), ": ", name, "=", kmax, " is not above ", min_name,
                                     "=", it->second));
    }
  }
}

bool IsSwitchDevice(const v1::NicDevice& d) { return d.name() == "switch"; }

}  // namespace

absl::Status CheckAgainstInventory(const v1::HostInfo& host, const v1::ParameterSet& set) {
  std::vector<std::string> errors;
  std::vector<CcRangeViolation> range;
  // Switch knobs are checked by CheckSwitch; the NIC rules see the rest.
  v1::ParameterSet nic_set = set;
  nic_set.clear_devices();
  for (const v1::DeviceParameters& d : set.devices()) {
    const v1::NicDevice* dev = FindDevice(host, d.device());
    if (dev == nullptr || !IsSwitchDevice(*dev)) *nic_set.add_devices() = d;
  }
  if (absl::Status s = ValidateParameterSetExceptDcqcnRanges(nic_set, &range); !s.ok()) {
    errors.push_back(std::string(s.message()));
  }
  // Firmware defaults vary: a value outside the table's range that the device
  // already holds is never written, so it passes (as on the agent).
  for (const CcRangeViolation& v : range) {
    const v1::DeviceParameters* cur = FindCurrent(host, v.device);
    const bool held =
        cur != nullptr && cur->dcqcn().contains(v.name) && cur->dcqcn().at(v.name) == v.value;
    if (!held) errors.push_back(v.text);
  }
  for (int i = 0; i < set.devices_size(); ++i) {
    const v1::DeviceParameters& want = set.devices(i);
    const v1::NicDevice* dev = FindDevice(host, want.device());
    if (dev == nullptr) {
      errors.push_back(absl::StrCat("parameters.devices[", i, "]: host ", host.host_id(),
                                    " has no RDMA device \"", want.device(), "\" (it reported ",
                                    absl::StrJoin(host.devices(), ", ",
                                                  [](std::string* out, const v1::NicDevice& d) {
                                                    absl::StrAppend(out, d.name());
                                                  }),
                                    ")"));
      continue;
    }
    const v1::DeviceParameters* current = FindCurrent(host, want.device());
    if (IsSwitchDevice(*dev)) {
      CheckSwitch(*dev, want, current, &errors);
      continue;
    }
    CheckLayout(*dev, want, current, &errors);
    CheckLink(*dev, want, current, &errors);
  }
  if (errors.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("host ", host.host_id(), ": set refused (", errors.size(), " problem",
                   errors.size() == 1 ? "" : "s", "): ", absl::StrJoin(errors, "; ")));
}

}  // namespace rocetune::controller
