#include "agent/switch/switch_applier.h"

#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "agent/switch/switch_inventory.h"
#include "model/switch_params.h"

namespace rocetune {
namespace {

struct Planned {
  SwitchKnob knob;
  int64_t value = 0;
  std::string text;  // as written
};

std::string ColourOf(const std::string& field) { return field.substr(0, field.find('_')); }

}  // namespace

SwitchApplier::SwitchApplier(SwitchQosStore* store, SwitchApplierOptions options)
    : store_(store), options_(std::move(options)) {}

v1::ParameterSet SwitchApplier::ReadCurrent(std::vector<std::string>* errors) {
  absl::MutexLock lock(&mu_);
  v1::ParameterSet out;
  absl::StatusOr<SwitchQosState> state = store_->Read(SwitchQosKeys{});
  if (!state.ok()) {
    if (errors != nullptr) errors->push_back(std::string(state.status().message()));
    return out;
  }
  *out.add_devices() = SwitchStateToParameters(state->profiles, state->pfc_enable, errors);
  return out;
}

absl::StatusOr<ApplyResult> SwitchApplier::Apply(const v1::ParameterSet& set) {
  absl::MutexLock lock(&mu_);
  // 1. Names and ranges.
  std::vector<std::string> problems;
  std::vector<Planned> plan;
  for (const v1::DeviceParameters& d : set.devices()) {
    if (d.device() != kSwitchDevice) {
      problems.push_back(absl::StrCat("device \"", d.device(), "\": a switch has only device \"",
                                      kSwitchDevice, "\""));
      continue;
    }
    if (d.has_rp_enable_mask() || d.has_np_enable_mask() || d.has_pfc()) {
      problems.push_back(
          "switch: rp/np enable masks and NIC PFC settings do not apply to a switch");
    }
    for (const auto& [name, value] : d.dcqcn()) {
      absl::StatusOr<SwitchKnob> knob = ParseSwitchKnob(name);
      if (!knob.ok()) {
        problems.push_back(std::string(knob.status().message()));
        continue;
      }
      Planned p{*knob, value, ""};
      if (knob->kind == SwitchKnob::Kind::kPfcEnable) {
        if (value < 0 || value > 255) {
          problems.push_back(absl::StrCat(name, "=", value, " outside [0, 255]"));
        }
        p.text = FormatPfcEnable(value);
      } else {
        bool prob = knob->field.find("probability") != std::string::npos;
        int64_t lo = prob ? 1 : 0, hi = prob ? 100 : kMaxWredThresholdBytes;
        if (value < lo || value > hi) {
          problems.push_back(absl::StrCat(name, "=", value, " outside [", lo, ", ", hi, "]"));
        }
        p.text = absl::StrCat(value);
      }
      plan.push_back(std::move(p));
    }
  }
  if (!problems.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("switch parameters refused, nothing written: ",
                                                   absl::StrJoin(problems, "; ")));
  }
  // 2. Snapshot (watched).
  SwitchQosKeys keys;
  std::set<std::string> profiles, ports;
  for (const Planned& p : plan) {
    (p.knob.kind == SwitchKnob::Kind::kEcn ? profiles : ports).insert(p.knob.object);
  }
  keys.profiles.assign(profiles.begin(), profiles.end());
  keys.ports.assign(ports.begin(), ports.end());
  ApplyResult result;
  SwitchQosWrite write, undo;
  if (!plan.empty()) {
    absl::StatusOr<SwitchQosState> snap = store_->Snapshot(keys);
    if (!snap.ok()) {
      return absl::Status(
          snap.status().code(),
          absl::StrCat("switch snapshot failed, nothing written: ", snap.status().message()));
    }
    // 3. Presence and bounds as they would be after the write.
    std::map<std::string, std::map<std::string, std::string>> merged;
    std::map<std::string, std::set<std::string>> colours;
    for (const Planned& p : plan) {
      if (p.knob.kind == SwitchKnob::Kind::kPfcEnable) {
        auto it = snap->pfc_enable.find(p.knob.object);
        if (it == snap->pfc_enable.end()) {
          problems.push_back(
              absl::StrCat("port ", p.knob.object, " has no PORT_QOS_MAP entry in CONFIG_DB"));
          continue;
        }
        if (it->second != p.text) {
          write.pfc_enable[p.knob.object] = p.text;
          undo.pfc_enable[p.knob.object] = it->second;
          result.disruptive.push_back(absl::StrCat(p.knob.object, ": pfc_enable \"", it->second,
                                                   "\" -> \"", p.text,
                                                   "\" (lossless priorities change)"));
        }
        continue;
      }
      auto prof = snap->profiles.find(p.knob.object);
      if (prof == snap->profiles.end()) {
        problems.push_back(absl::StrCat("WRED profile ", p.knob.object,
                                        " missing (CONFIG_DB WRED_PROFILE|", p.knob.object, ")"));
        continue;
      }
      auto field = prof->second.find(p.knob.field);
      if (field == prof->second.end()) {
        problems.push_back(absl::StrCat("CONFIG_DB WRED_PROFILE|", p.knob.object, " has no field ",
                                        p.knob.field, " (rocetune never adds fields)"));
        continue;
      }
      if (!merged.count(p.knob.object)) merged[p.knob.object] = prof->second;
      merged[p.knob.object][p.knob.field] = p.text;
      colours[p.knob.object].insert(ColourOf(p.knob.field));
      if (field->second != p.text) {
        write.profile_fields[p.knob.object][p.knob.field] = p.text;
        undo.profile_fields[p.knob.object][p.knob.field] = field->second;
      }
    }
    for (const auto& [profile, fields] : merged) {
      std::vector<std::string> c(colours[profile].begin(), colours[profile].end());
      for (std::string& v : CheckWredProfile(profile, fields, c, snap->buffer_limit_bytes)) {
        problems.push_back(std::move(v));
      }
    }
    if (!problems.empty()) {
      store_->Release();
      bool missing = false;
      for (const std::string& p : problems) {
        missing |=
            p.find("missing") != std::string::npos || p.find(" has no ") != std::string::npos;
      }
      std::string msg = absl::StrCat("switch parameters refused, nothing written: ",
                                     absl::StrJoin(problems, "; "));
      return missing ? absl::FailedPreconditionError(msg) : absl::InvalidArgumentError(msg);
    }
    // 4. One all-or-nothing commit.
    if (write.empty()) {
      store_->Release();
    } else {
      if (options_.before_commit) options_.before_commit();
      absl::Status s = store_->Commit(write);
      if (!s.ok()) {
        if (s.code() == absl::StatusCode::kAborted) {
          return absl::AbortedError(
              absl::StrCat("switch write aborted, nothing written: ", s.message()));
        }
        // The outcome is unknown: put the snapshot back if the store answers.
        return Restore(undo, keys, s);
      }
      for (const auto& [p, f] : write.profile_fields) result.writes += static_cast<int>(f.size());
      result.writes += static_cast<int>(write.pfc_enable.size());
      if (options_.after_commit) options_.after_commit();
    }
  }
  // 5. Read back everything; compare what the set named.
  absl::StatusOr<SwitchQosState> back = store_->Read(SwitchQosKeys{});
  if (!back.ok()) {
    if (write.empty()) return back.status();
    return Restore(undo, keys, back.status());
  }
  std::vector<std::string> mismatches;
  for (const Planned& p : plan) {
    std::string found = "nothing";
    if (p.knob.kind == SwitchKnob::Kind::kPfcEnable) {
      auto it = back->pfc_enable.find(p.knob.object);
      if (it != back->pfc_enable.end()) found = "\"" + it->second + "\"";
    } else {
      auto prof = back->profiles.find(p.knob.object);
      if (prof != back->profiles.end()) {
        auto f = prof->second.find(p.knob.field);
        if (f != prof->second.end()) found = "\"" + f->second + "\"";
      }
    }
    if (found != "\"" + p.text + "\"") {
      mismatches.push_back(absl::StrCat(p.knob.kind == SwitchKnob::Kind::kEcn
                                            ? EcnKnobName(p.knob.object, p.knob.field)
                                            : PfcEnableKnobName(p.knob.object),
                                        ": wrote \"", p.text, "\", read back ", found));
    }
  }
  if (!mismatches.empty()) {
    return Restore(undo, keys,
                   absl::AbortedError(absl::StrCat("switch read-back mismatch: ",
                                                   absl::StrJoin(mismatches, "; "))));
  }
  std::vector<std::string> errors;
  *result.applied.add_devices() =
      SwitchStateToParameters(back->profiles, back->pfc_enable, &errors);
  return result;
}

absl::Status SwitchApplier::Restore(const SwitchQosWrite& undo, const SwitchQosKeys& keys,
                                    const absl::Status& failure) {
  absl::Status s;
  absl::StatusOr<SwitchQosState> snap = store_->Snapshot(keys);
  if (!snap.ok()) {
    s = snap.status();
  } else {
    s = store_->Commit(undo);
  }
  if (s.ok()) {
    return absl::Status(failure.code(),
                        absl::StrCat(failure.message(), "; previous values restored"));
  }
  if (failure.code() == absl::StatusCode::kUnavailable) {
    return absl::UnavailableError(absl::StrCat(
        failure.message(), "; restore not possible either (", s.message(),
        "); the switch holds the previous or the new values of the whole set, never a mix"));
  }
  return absl::InternalError(absl::StrCat(failure.message(), "; restore failed: ", s.message(),
                                          "; the switch may hold the new values"));
}

}  // namespace rocetune
