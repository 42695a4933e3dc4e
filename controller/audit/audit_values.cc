#include "controller/audit/audit_values.h"

#include <set>

#include "absl/strings/str_cat.h"

namespace rocetune::controller {

std::map<std::string, std::string> FlattenParameters(const v1::ParameterSet& set) {
  std::map<std::string, std::string> out;
  for (const v1::DeviceParameters& d : set.devices()) {
    const std::string dev = d.device() + "/";
    for (const auto& [name, value] : d.dcqcn()) out[dev + name] = absl::StrCat(value);
    if (d.has_rp_enable_mask()) out[dev + "rp_enable_mask"] = absl::StrCat(d.rp_enable_mask());
    if (d.has_np_enable_mask()) out[dev + "np_enable_mask"] = absl::StrCat(d.np_enable_mask());
    if (d.has_pfc()) {
      out[dev + "pfc.enable_mask"] = absl::StrCat(d.pfc().enable_mask());
      if (d.pfc().has_delay()) out[dev + "pfc.delay"] = absl::StrCat(d.pfc().delay());
      if (d.pfc().has_prevention_timeout_ms()) {
        out[dev + "pfc.prevention_timeout_ms"] = absl::StrCat(d.pfc().prevention_timeout_ms());
      }
    }
  }
  return out;
}

std::vector<v1::ValueChange> DiffParameterSets(const std::string& host_id,
                                               const v1::ParameterSet& before,
                                               const v1::ParameterSet& after) {
  const std::map<std::string, std::string> a = FlattenParameters(before);
  const std::map<std::string, std::string> b = FlattenParameters(after);
  std::set<std::string> keys;
  for (const auto& [k, v] : a) keys.insert(k);
  for (const auto& [k, v] : b) keys.insert(k);
  std::vector<v1::ValueChange> out;
  for (const std::string& k : keys) {
    auto ia = a.find(k);
    auto ib = b.find(k);
    const std::string old_value = ia == a.end() ? "" : ia->second;
    const std::string new_value = ib == b.end() ? "" : ib->second;
    if (old_value == new_value) continue;
    v1::ValueChange c;
    c.set_host_id(host_id);
    const size_t slash = k.find('/');
    c.set_device(k.substr(0, slash));
    c.set_parameter(k.substr(slash + 1));
    c.set_old_value(old_value);
    c.set_new_value(new_value);
    out.push_back(std::move(c));
  }
  return out;
}

}  // namespace rocetune::controller
