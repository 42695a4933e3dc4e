#include "model/in_effect.h"

#include <cstdint>
#include <map>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "model/cc_params.h"

namespace rocetune {
namespace {

constexpr uint32_t kAllPriorities = 0xff;

std::string Priorities(uint32_t mask) {
  std::vector<int> p;
  for (int i = 0; i < 8; ++i) {
    if (mask >> i & 1) p.push_back(i);
  }
  return absl::StrJoin(p, ",");
}

// Why a block with enable mask `enable` does not act on the traffic's
// priorities, or "" when it does (or the mask is unknown).
std::string OffReason(const char* block, const char* mask_name, bool has_enable, uint32_t enable,
                      const v1::DeviceParameters& held) {
  if (!has_enable) return "";
  const bool lossless_known = held.has_pfc() && (held.pfc().enable_mask() & kAllPriorities) != 0;
  const uint32_t traffic =
      lossless_known ? held.pfc().enable_mask() & kAllPriorities : kAllPriorities;
  if ((enable & traffic) != 0) return "";
  if (!lossless_known) {
    return absl::StrFormat("the DCQCN %s is off on every priority (%s 0x%02x)", block, mask_name,
                           enable);
  }
  return absl::StrFormat(
      "the DCQCN %s is off on the lossless priorities %s (%s 0x%02x, pfc "
      "enable_mask 0x%02x)",
      block, Priorities(traffic), mask_name, enable, traffic);
}

v1::ParameterNote Note(const std::string& device, const std::string& parameter,
                       const std::string& reason) {
  v1::ParameterNote n;
  n.set_device(device);
  n.set_parameter(parameter);
  n.set_reason(reason);
  return n;
}

}  // namespace

std::vector<v1::ParameterNote> NotInEffect(const v1::DeviceParameters& wanted,
                                           const v1::DeviceParameters& held) {
  std::vector<v1::ParameterNote> out;
  const std::string rp_off = OffReason("reaction point", kRpEnableMask, held.has_rp_enable_mask(),
                                       held.rp_enable_mask(), held);
  const std::string np_off = OffReason("notification point", kNpEnableMask,
                                       held.has_np_enable_mask(), held.np_enable_mask(), held);
  const std::map<std::string, int64_t> sorted(wanted.dcqcn().begin(), wanted.dcqcn().end());
  for (const auto& [name, value] : sorted) {
    const CcParamSpec* spec = FindCcParam(name);
    if (spec == nullptr) continue;
    if (spec->side == CcSide::kRp && !rp_off.empty()) {
      out.push_back(Note(wanted.device(), name, rp_off));
    } else if (spec->side == CcSide::kNp && !np_off.empty()) {
      out.push_back(Note(wanted.device(), name, np_off));
    }
  }
  if (wanted.has_pfc() && held.has_pfc() && (held.pfc().enable_mask() & kAllPriorities) == 0) {
    const std::string why = "PFC is off on every priority (pfc enable_mask 0x00)";
    if (wanted.pfc().has_delay()) out.push_back(Note(wanted.device(), "pfc.delay", why));
    if (wanted.pfc().has_prevention_timeout_ms()) {
      out.push_back(Note(wanted.device(), "pfc.prevention_timeout_ms", why));
    }
  }
  return out;
}

const char* DecidingKnob(absl::string_view parameter) {
  if (parameter == "pfc.delay" || parameter == "pfc.prevention_timeout_ms") {
    return "pfc.enable_mask";
  }
  const CcParamSpec* spec = FindCcParam(parameter);
  if (spec == nullptr) return "";
  switch (spec->side) {
    case CcSide::kRp:
      return kRpEnableMask;
    case CcSide::kNp:
      return kNpEnableMask;
    default:
      return "";
  }
}

std::vector<v1::ParameterNote> NotInEffect(const v1::ParameterSet& wanted,
                                           const v1::ParameterSet& held) {
  std::vector<v1::ParameterNote> out;
  for (const v1::DeviceParameters& w : wanted.devices()) {
    for (const v1::DeviceParameters& h : held.devices()) {
      if (h.device() != w.device()) continue;
      for (v1::ParameterNote& n : NotInEffect(w, h)) out.push_back(std::move(n));
      break;
    }
  }
  return out;
}

}  // namespace rocetune
