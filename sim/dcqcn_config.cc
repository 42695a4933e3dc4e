#include "sim/dcqcn_config.h"

#include <limits>

#include "absl/strings/str_cat.h"
#include "google/protobuf/descriptor.h"

namespace rocetune::sim {
namespace {

constexpr int64_t kI32Max = std::numeric_limits<int32_t>::max();

const google::protobuf::FieldDescriptor* Field(const std::string& name) {
  return v1::DcqcnSettings::descriptor()->FindFieldByName(name);
}

int64_t Get(const v1::DcqcnSettings& s, const std::string& name) {
  const auto& ranges = DcqcnParamRanges();
  const auto* field = Field(name);
  const auto* refl = s.GetReflection();
  if (field != nullptr && refl->HasField(s, field)) return refl->GetInt64(s, field);
  return ranges.at(name).mlx5_default;
}

}  // namespace

const std::map<std::string, DcqcnParamRange>& DcqcnParamRanges() {
  static const auto* ranges = [] {
    auto* m = new std::map<std::string, DcqcnParamRange>;
    const DcqcnParamRange table[] = {
        {"clamp_tgt_rate", 0, 1, 0},
        {"clamp_tgt_rate_after_time_inc", 0, 1, 1},
        {"rpg_time_reset", 1, kI32Max, 300},
        {"rpg_byte_reset", 0, kI32Max, 32767},
        {"rpg_threshold", 1, kI32Max, 1},
        {"rpg_max_rate", 0, kI32Max, 0},
        {"rpg_ai_rate", 1, kI32Max, 5},
        {"rpg_hai_rate", 1, kI32Max, 50},
        {"rpg_gd", 10, 11, 11},
        {"rpg_min_dec_fac", 0, 100, 50},
        {"rpg_min_rate", 1, kI32Max, 1},
        {"rate_to_set_on_first_cnp", 0, kI32Max, 0},
        {"dce_tcp_g", 0, 1023, 1019},
        {"dce_tcp_rtt", 1, 131071, 1},
        {"rate_reduce_monitor_period", 1, kI32Max, 4},
        {"initial_alpha_value", 1, 1023, 1023},
        {"min_time_between_cnps", 0, kI32Max, 2},
        {"cnp_dscp", 0, 63, 48},
        {"cnp_802p_prio", 0, 7, 6},
    };
    for (const auto& r : table) (*m)[r.name] = r;
    return m;
  }();
  return *ranges;
}

std::map<std::string, int64_t> DcqcnValues(const v1::DcqcnSettings& settings) {
  std::map<std::string, int64_t> out;
  for (const auto& [name, range] : DcqcnParamRanges()) out[name] = Get(settings, name);
  return out;
}

absl::StatusOr<DcqcnConfig> ResolveDcqcn(const v1::DcqcnSettings& settings) {
  for (const auto& [name, range] : DcqcnParamRanges()) {
    const int64_t v = Get(settings, name);
    if (v < range.min || v > range.max) {
      return absl::InvalidArgumentError(
          absl::StrCat("dcqcn.", name, "=", v, " outside [", range.min, ", ", range.max, "]"));
    }
  }
  const int64_t unit =
      settings.byte_reset_unit_bytes() == 0 ? 64 : settings.byte_reset_unit_bytes();
  DcqcnConfig c;
  c.enabled = !settings.disabled();
  RpParams& p = c.rp;
  p.clamp_tgt_rate = Get(settings, "clamp_tgt_rate") != 0;
  p.clamp_tgt_rate_after_time_inc = Get(settings, "clamp_tgt_rate_after_time_inc") != 0;
  p.rpg_time_reset_us = Get(settings, "rpg_time_reset");
  p.rpg_byte_reset_bytes = Get(settings, "rpg_byte_reset") * unit;
  p.rpg_threshold = Get(settings, "rpg_threshold");
  p.rpg_max_rate_mbps = static_cast<double>(Get(settings, "rpg_max_rate"));
  p.rpg_ai_rate_mbps = static_cast<double>(Get(settings, "rpg_ai_rate"));
  p.rpg_hai_rate_mbps = static_cast<double>(Get(settings, "rpg_hai_rate"));
  p.rpg_gd = Get(settings, "rpg_gd");
  p.rpg_min_dec_fac = Get(settings, "rpg_min_dec_fac");
  p.rpg_min_rate_mbps = static_cast<double>(Get(settings, "rpg_min_rate"));
  p.rate_to_set_on_first_cnp_mbps = static_cast<double>(Get(settings, "rate_to_set_on_first_cnp"));
  p.dce_tcp_g = Get(settings, "dce_tcp_g");
  p.dce_tcp_rtt_us = Get(settings, "dce_tcp_rtt");
  p.rate_reduce_monitor_period_us = Get(settings, "rate_reduce_monitor_period");
  p.initial_alpha_value = Get(settings, "initial_alpha_value");
  c.min_time_between_cnps_us = Get(settings, "min_time_between_cnps");
  return c;
}

absl::Status SetDcqcnValue(v1::DcqcnSettings* settings, const std::string& name, int64_t value) {
  const auto& ranges = DcqcnParamRanges();
  auto it = ranges.find(name);
  const auto* field = Field(name);
  if (it == ranges.end() || field == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("unknown DCQCN parameter \"", name, "\""));
  }
  if (value < it->second.min || value > it->second.max) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, "=", value, " outside [", it->second.min, ", ", it->second.max, "]"));
  }
  settings->GetReflection()->SetInt64(settings, field, value);
  return absl::OkStatus();
}

}  // namespace rocetune::sim
