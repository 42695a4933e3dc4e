#include "sim/dcqcn_config.h"

#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"
#include "google/protobuf/descriptor.h"
#include "model/cc_params.h"

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
  // The agent's canonical table (model/cc_params.h) is the one source of
  // names, hard ranges and firmware defaults; the simulator models the
  // parameters that v1::DcqcnSettings has a field for.
  static const auto* ranges = [] {
    auto* m = new std::map<std::string, DcqcnParamRange>;
    for (const CcParamSpec& spec : CcParamTable()) {
      if (Field(spec.name) == nullptr || !spec.mlx5_default.has_value()) continue;
      (*m)[spec.name] =
          DcqcnParamRange{spec.name, spec.min, std::min(spec.max, kI32Max), *spec.mlx5_default};
    }
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
  p.alpha_integer_10bit = settings.alpha_integer_10bit();
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
