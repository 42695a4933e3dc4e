#include "model/switch_params.h"

#include <algorithm>
#include <optional>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace rocetune {
namespace {

constexpr absl::string_view kColours[] = {"green", "yellow", "red"};
constexpr absl::string_view kSuffixes[] = {"_min_threshold", "_max_threshold", "_drop_probability"};

std::string Key(absl::string_view profile) { return absl::StrCat("WRED_PROFILE|", profile); }

}  // namespace

bool IsTunableWredField(absl::string_view field) {
  for (absl::string_view c : kColours) {
    for (absl::string_view s : kSuffixes) {
      if (field.size() == c.size() + s.size() && absl::StartsWith(field, c) &&
          absl::EndsWith(field, s)) {
        return true;
      }
    }
  }
  return false;
}

absl::StatusOr<SwitchKnob> ParseSwitchKnob(absl::string_view name) {
  // Profile and port names have no dots (SONiC: [a-zA-Z0-9][-a-zA-Z0-9_]*).
  std::vector<absl::string_view> parts = absl::StrSplit(name, '.');
  if (parts.size() == 3 && !parts[1].empty()) {
    SwitchKnob k;
    k.object = std::string(parts[1]);
    k.field = std::string(parts[2]);
    if (parts[0] == "ecn" && IsTunableWredField(parts[2])) {
      k.kind = SwitchKnob::Kind::kEcn;
      return k;
    }
    if (parts[0] == "pfc" && parts[2] == "pfc_enable") {
      k.kind = SwitchKnob::Kind::kPfcEnable;
      return k;
    }
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "switch parameter \"", name,
      "\": want ecn.<profile>.{green,yellow,red}_{min_threshold,max_threshold,drop_probability} "
      "or pfc.<port>.pfc_enable"));
}

std::string EcnKnobName(absl::string_view profile, absl::string_view field) {
  return absl::StrCat("ecn.", profile, ".", field);
}

std::string PfcEnableKnobName(absl::string_view port) {
  return absl::StrCat("pfc.", port, ".pfc_enable");
}

absl::StatusOr<int64_t> ParsePfcEnable(absl::string_view text) {
  int64_t mask = 0;
  if (text.empty()) return mask;
  for (absl::string_view p : absl::StrSplit(text, ',')) {
    int prio = -1;
    if (!absl::SimpleAtoi(p, &prio) || prio < 0 || prio > 7) {
      return absl::InvalidArgumentError(
          absl::StrCat("pfc_enable \"", text, "\": want priorities 0..7 separated by commas"));
    }
    mask |= int64_t{1} << prio;
  }
  return mask;
}

std::vector<int> PfcEnablePriorities(int64_t mask) {
  std::vector<int> out;
  for (int p = 0; p < 8; ++p) {
    if (mask & (int64_t{1} << p)) out.push_back(p);
  }
  return out;
}

std::string FormatPfcEnable(int64_t mask) { return absl::StrJoin(PfcEnablePriorities(mask), ","); }

absl::StatusOr<int64_t> ParseNumericField(absl::string_view key, absl::string_view field,
                                          absl::string_view value) {
  int64_t v = 0;
  if (!absl::SimpleAtoi(value, &v)) {
    return absl::InvalidArgumentError(absl::StrCat("CONFIG_DB ", key, " field ", field, "=\"",
                                                   value, "\" is not a decimal integer"));
  }
  return v;
}

v1::DeviceParameters SwitchStateToParameters(
    const std::map<std::string, std::map<std::string, std::string>>& profiles,
    const std::map<std::string, std::string>& pfc_enable, std::vector<std::string>* errors) {
  v1::DeviceParameters d;
  d.set_device("switch");
  auto* m = d.mutable_dcqcn();
  for (const auto& [profile, fields] : profiles) {
    for (const auto& [field, value] : fields) {
      if (!IsTunableWredField(field)) continue;
      absl::StatusOr<int64_t> v = ParseNumericField(Key(profile), field, value);
      if (!v.ok()) {
        if (errors != nullptr) errors->push_back(std::string(v.status().message()));
        continue;
      }
      (*m)[EcnKnobName(profile, field)] = *v;
    }
  }
  for (const auto& [port, text] : pfc_enable) {
    absl::StatusOr<int64_t> mask = ParsePfcEnable(text);
    if (!mask.ok()) {
      if (errors != nullptr) {
        errors->push_back(
            absl::StrCat("CONFIG_DB PORT_QOS_MAP|", port, ": ", mask.status().message()));
      }
      continue;
    }
    (*m)[PfcEnableKnobName(port)] = *mask;
  }
  return d;
}

std::vector<std::string> CheckWredProfile(const std::string& profile,
                                          const std::map<std::string, std::string>& fields,
                                          const std::vector<std::string>& colours,
                                          int64_t buffer_limit_bytes) {
  std::vector<std::string> out;
  const std::string key = Key(profile);
  const int64_t limit = std::min(buffer_limit_bytes, kMaxWredThresholdBytes);
  for (const std::string& c : colours) {
    std::optional<int64_t> min, max;
    for (absl::string_view suffix : kSuffixes) {
      const std::string field = absl::StrCat(c, suffix);
      auto it = fields.find(field);
      if (it == fields.end()) continue;
      absl::StatusOr<int64_t> v = ParseNumericField(key, field, it->second);
      if (!v.ok()) {
        out.push_back(std::string(v.status().message()));
        continue;
      }
      if (suffix == "_drop_probability") {
        if (*v <= 0 || *v > 100) {
          out.push_back(absl::StrCat(key, " ", field, "=", *v, ": want a percentage in (0, 100]"));
        }
        continue;
      }
      if (*v < 0) out.push_back(absl::StrCat(key, " ", field, "=", *v, ": want >= 0 bytes"));
      (suffix == "_min_threshold" ? min : max) = *v;
    }
    if (max.has_value() && *max > limit) {
      out.push_back(absl::StrCat(key, " ", c, "_max_threshold=", *max, " exceeds the buffer (",
                                 limit, " bytes)"));
    }
    if (min.has_value() && max.has_value() && *min >= *max) {
      out.push_back(absl::StrCat(key, " ", c, "_min_threshold=", *min, " must be below ", c,
                                 "_max_threshold=", *max));
    }
  }
  return out;
}

int64_t BufferLimitFromPools(
    const std::map<std::string, std::map<std::string, std::string>>& pools) {
  std::optional<int64_t> egress, any;
  for (const auto& [name, fields] : pools) {
    auto it = fields.find("size");
    int64_t size = 0;
    if (it == fields.end() || !absl::SimpleAtoi(it->second, &size) || size <= 0) continue;
    any = any.has_value() ? std::min(*any, size) : size;
    auto type = fields.find("type");
    if (type != fields.end() && type->second == "egress") {
      egress = egress.has_value() ? std::min(*egress, size) : size;
    }
  }
  int64_t limit = egress.value_or(any.value_or(kMaxWredThresholdBytes));
  return std::min(limit, kMaxWredThresholdBytes);
}

}  // namespace rocetune
