#include "model/cc_params.h"

#include <limits>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "google/protobuf/unknown_field_set.h"
#include "rocetune/v1/agent.pb.h"

namespace rocetune {
namespace {

// 32-bit firmware fields are capped at INT32_MAX: the OFED sysfs store parses
// writes with sscanf("%d") and prints them with "%d" (docs/nic-facts.md 1.2), so larger
// values would not survive a round trip through that layout.
constexpr int64_t kU32Max = std::numeric_limits<int32_t>::max();

// Ranges: field widths from mlx5_ifc.h (docs/nic-facts.md 1.4), narrowed where the
// NVIDIA DCQCN parameter page gives a range (1.5). Defaults: ConnectX-5 firmware
// mlxconfig dump (1.5). cnp_prio_mode and rtt_resp_dscp* exist only in debugfs.
constexpr CcParamSpec kTable[] = {
    {"clamp_tgt_rate", "bool", 0, 1, 0, CcSide::kRp, "clamp_tgt_rate", "rp_clamp_tgt_rate"},
    {"clamp_tgt_rate_after_time_inc", "bool", 0, 1, 1, CcSide::kRp, "clamp_tgt_rate_after_time_inc",
     "rp_clamp_tgt_rate_ati"},
    {"rpg_time_reset", "us", 1, kU32Max, 300, CcSide::kRp, "rpg_time_reset", "rp_time_reset"},
    // 0 disables the byte counter; the firmware unit is probably 64 bytes.
    {"rpg_byte_reset", "bytes", 0, kU32Max, 32767, CcSide::kRp, "rpg_byte_reset", "rp_byte_reset"},
    {"rpg_threshold", "count", 1, kU32Max, 1, CcSide::kRp, "rpg_threshold", "rp_threshold"},
    // 0 = no limit (line rate).
    {"rpg_max_rate", "Mbps", 0, kU32Max, 0, CcSide::kRp, "rpg_max_rate", "rp_max_rate"},
    {"rpg_ai_rate", "Mbps", 1, kU32Max, 5, CcSide::kRp, "rpg_ai_rate", "rp_ai_rate"},
    {"rpg_hai_rate", "Mbps", 1, kU32Max, 50, CcSide::kRp, "rpg_hai_rate", "rp_hai_rate"},
    {"rpg_gd", "log2", 10, 11, 11, CcSide::kRp, "rpg_gd", "rp_gd"},
    {"rpg_min_dec_fac", "percent", 0, 100, 50, CcSide::kRp, "rpg_min_dec_fac", "rp_min_dec_fac"},
    {"rpg_min_rate", "Mbps", 1, kU32Max, 1, CcSide::kRp, "rpg_min_rate", "rp_min_rate"},
    // 0 = feature off.
    {"rate_to_set_on_first_cnp", "Mbps", 0, kU32Max, 0, CcSide::kRp, "rate_to_set_on_first_cnp",
     "rp_rate_to_set_on_first_cnp"},
    {"dce_tcp_g", "fixed_1/1024", 0, 1023, 1019, CcSide::kRp, "dce_tcp_g", "rp_dce_tcp_g"},
    {"dce_tcp_rtt", "us", 1, 131071, 1, CcSide::kRp, "dce_tcp_rtt", "rp_dce_tcp_rtt"},
    {"rate_reduce_monitor_period", "us", 1, kU32Max, 4, CcSide::kRp, "rate_reduce_monitor_period",
     "rp_rate_reduce_monitor_period"},
    {"initial_alpha_value", "fixed_1/1024", 1, 1023, 1023, CcSide::kRp, "initial_alpha_value",
     "rp_initial_alpha_value"},
    {"min_time_between_cnps", "us", 0, kU32Max, 2, CcSide::kNp, "min_time_between_cnps",
     "np_min_time_between_cnps"},
    {"cnp_dscp", "dscp", 0, 63, 48, CcSide::kNp, "cnp_dscp", "np_cnp_dscp"},
    {"cnp_802p_prio", "priority", 0, 7, 6, CcSide::kNp, "cnp_802p_prio", "np_cnp_prio"},
    // 0 = use cnp_802p_prio; the kernel forces 0 when np_cnp_prio is written.
    {"cnp_prio_mode", "bool", 0, 1, std::nullopt, CcSide::kNp, nullptr, "np_cnp_prio_mode"},
    {"rtt_resp_dscp_valid", "bool", 0, 1, std::nullopt, CcSide::kGeneral, nullptr,
     "rtt_resp_dscp_valid"},
    {"rtt_resp_dscp", "dscp", 0, 63, std::nullopt, CcSide::kGeneral, nullptr, "rtt_resp_dscp"},
};

constexpr CcWriteSideEffect kSideEffects[] = {
    {"cnp_802p_prio", "cnp_prio_mode", 0},
    {"rtt_resp_dscp", "rtt_resp_dscp_valid", 1},
};

std::string Violation(absl::string_view device, absl::string_view name, int64_t value, int64_t min,
                      int64_t max) {
  return absl::StrCat(device, ": ", name, "=", value, " outside [", min, ", ", max, "]");
}

// DCQCN range violations go to `range` when it is non-null, else to `errors`.
void CheckDevice(const v1::DeviceParameters& params, std::vector<std::string>* errors,
                 std::vector<CcRangeViolation>* range = nullptr) {
  const std::string& dev = params.device();
  // Sorted so the error text is deterministic (proto maps are unordered).
  std::map<std::string, int64_t> dcqcn(params.dcqcn().begin(), params.dcqcn().end());
  for (const auto& [name, value] : dcqcn) {
    const CcParamSpec* spec = FindCcParam(name);
    if (spec == nullptr) {
      errors->push_back(absl::StrCat(dev, ": unknown DCQCN parameter \"", name, "\"=", value));
      continue;
    }
    if (value < spec->min || value > spec->max) {
      std::string text = Violation(dev, name, value, spec->min, spec->max);
      if (range != nullptr) {
        range->push_back({dev, name, value, std::move(text)});
      } else {
        errors->push_back(std::move(text));
      }
    }
  }
  if (params.has_rp_enable_mask() && params.rp_enable_mask() > 255) {
    errors->push_back(Violation(dev, kRpEnableMask, params.rp_enable_mask(), 0, 255));
  }
  if (params.has_np_enable_mask() && params.np_enable_mask() > 255) {
    errors->push_back(Violation(dev, kNpEnableMask, params.np_enable_mask(), 0, 255));
  }
  if (params.has_pfc()) {
    const v1::PfcSettings& pfc = params.pfc();
    if (pfc.enable_mask() > 255) {
      errors->push_back(Violation(dev, "pfc.enable_mask", pfc.enable_mask(), 0, 255));
    }
    if (pfc.has_delay() && pfc.delay() > kPfcDelayMax) {
      errors->push_back(Violation(dev, "pfc.delay", pfc.delay(), 0, kPfcDelayMax));
    }
    if (pfc.has_prevention_timeout_ms()) {
      const int64_t t = pfc.prevention_timeout_ms();
      if (t != 0 && t != kPfcPreventionAuto &&
          (t < kPfcPreventionMinMs || t > kPfcPreventionMaxMs)) {
        errors->push_back(absl::StrCat(dev, ": pfc.prevention_timeout_ms=", t, " outside [",
                                       kPfcPreventionMinMs, ", ", kPfcPreventionMaxMs,
                                       "] (0 = off, ", kPfcPreventionAuto, " = auto)"));
      }
    }
  }
}

absl::Status ErrorsToStatus(const std::vector<std::string>& errors) {
  if (errors.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("invalid parameters (", errors.size(), "): ", absl::StrJoin(errors, "; ")));
}

}  // namespace

absl::Span<const CcParamSpec> CcParamTable() { return kTable; }

absl::Span<const CcWriteSideEffect> CcWriteSideEffects() { return kSideEffects; }

const CcParamSpec* FindCcParam(absl::string_view name) {
  for (const CcParamSpec& spec : kTable) {
    if (name == spec.name) return &spec;
  }
  return nullptr;
}

absl::Status ValidateParameters(const v1::DeviceParameters& params) {
  std::vector<std::string> errors;
  CheckDevice(params, &errors);
  return ErrorsToStatus(errors);
}

absl::Status ValidateParameterSet(const v1::ParameterSet& set) {
  return ValidateParameterSetExceptDcqcnRanges(set, nullptr);
}

absl::Status ValidateParameterSetExceptDcqcnRanges(const v1::ParameterSet& set,
                                                   std::vector<CcRangeViolation>* range) {
  std::vector<std::string> errors;
  std::set<std::string> seen;
  for (int i = 0; i < set.devices_size(); ++i) {
    const v1::DeviceParameters& dev = set.devices(i);
    if (dev.device().empty()) {
      errors.push_back(absl::StrCat("devices[", i, "]: empty device name"));
    } else if (!seen.insert(dev.device()).second) {
      errors.push_back(absl::StrCat("devices[", i, "]: device ", dev.device(), " listed twice"));
    }
    CheckDevice(dev, &errors, range);
  }
  return ErrorsToStatus(errors);
}

namespace {

using google::protobuf::UnknownField;
using google::protobuf::UnknownFieldSet;

// The last length-delimited field `number` of `wire`, parsed as a field set.
bool SubMessage(absl::string_view wire, int number, std::string* out) {
  UnknownFieldSet fields;
  if (!fields.ParseFromArray(wire.data(), static_cast<int>(wire.size()))) return false;
  bool found = false;
  for (int i = 0; i < fields.field_count(); ++i) {
    const UnknownField& f = fields.field(i);
    if (f.number() == number && f.type() == UnknownField::TYPE_LENGTH_DELIMITED) {
      *out = f.length_delimited();
      found = true;
    }
  }
  return found;
}

}  // namespace

std::vector<std::string> RepeatedParameters(absl::string_view parameter_set_wire) {
  std::vector<std::string> out;
  UnknownFieldSet set;
  if (!set.ParseFromArray(parameter_set_wire.data(), static_cast<int>(parameter_set_wire.size()))) {
    return out;
  }
  for (int i = 0; i < set.field_count(); ++i) {
    const UnknownField& dev_field = set.field(i);
    if (dev_field.number() != v1::ParameterSet::kDevicesFieldNumber ||
        dev_field.type() != UnknownField::TYPE_LENGTH_DELIMITED) {
      continue;
    }
    UnknownFieldSet dev;
    if (!dev.ParseFromString(dev_field.length_delimited())) continue;
    std::string device;
    std::vector<std::pair<std::string, int64_t>> entries;  // in wire order
    for (int j = 0; j < dev.field_count(); ++j) {
      const UnknownField& f = dev.field(j);
      if (f.type() != UnknownField::TYPE_LENGTH_DELIMITED) continue;
      if (f.number() == v1::DeviceParameters::kDeviceFieldNumber) device = f.length_delimited();
      if (f.number() != v1::DeviceParameters::kDcqcnFieldNumber) continue;
      // A map entry: key = 1 (string), value = 2 (varint); absent means default.
      UnknownFieldSet entry;
      if (!entry.ParseFromString(f.length_delimited())) continue;
      std::pair<std::string, int64_t> kv{"", 0};
      for (int k = 0; k < entry.field_count(); ++k) {
        const UnknownField& e = entry.field(k);
        if (e.number() == 1 && e.type() == UnknownField::TYPE_LENGTH_DELIMITED) {
          kv.first = e.length_delimited();
        } else if (e.number() == 2 && e.type() == UnknownField::TYPE_VARINT) {
          kv.second = static_cast<int64_t>(e.varint());
        }
      }
      entries.push_back(std::move(kv));
    }
    std::map<std::string, int64_t> first;
    for (const auto& [name, value] : entries) {
      auto [it, inserted] = first.emplace(name, value);
      if (!inserted) {
        out.push_back(absl::StrCat(device, ": parameter ", name, " given twice (", it->second,
                                   ", then ", value, ")"));
      }
    }
  }
  return out;
}

std::vector<std::string> RepeatedParametersInControllerMessage(absl::string_view wire) {
  std::string desired;
  std::string params;
  if (!SubMessage(wire, v1::ControllerMessage::kDesiredStateFieldNumber, &desired) ||
      !SubMessage(desired, v1::DesiredState::kParametersFieldNumber, &params)) {
    return {};
  }
  return RepeatedParameters(params);
}

}  // namespace rocetune
