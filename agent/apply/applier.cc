#include "agent/apply/applier.h"

#include <algorithm>
#include <optional>
#include <set>
#include <utility>

#include "absl/algorithm/container.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "daemon/logging.h"
#include "model/cc_params.h"

namespace rocetune {
namespace {

enum class StepKind { kDcqcn, kMask, kPfc };

struct Step {
  std::string device;
  StepKind kind = StepKind::kDcqcn;
  std::string name;  // parameter or mask name; "pfc" for PFC
  int64_t old_value = 0;
  int64_t new_value = 0;
  v1::PfcSettings old_pfc;
  v1::PfcSettings new_pfc;
};

v1::PfcSettings ToSettings(const PfcState& s) {
  v1::PfcSettings out;
  out.set_enable_mask(s.enable_mask);
  out.set_delay(s.delay);
  if (s.prevention_timeout_ms.has_value()) out.set_prevention_timeout_ms(*s.prevention_timeout_ms);
  return out;
}

std::string Hex(uint32_t v) { return absl::StrFormat("0x%02x", v); }

std::string PfcText(const v1::PfcSettings& p) {
  std::string s = absl::StrCat("enable_mask=", Hex(p.enable_mask()));
  if (p.has_delay()) absl::StrAppend(&s, " delay=", p.delay());
  if (p.has_prevention_timeout_ms()) {
    absl::StrAppend(&s, " prevention_timeout_ms=", p.prevention_timeout_ms());
  }
  return s;
}

// The fields of `want` that are set match `have`.
bool PfcMatches(const v1::PfcSettings& want, const v1::PfcSettings& have) {
  if (want.enable_mask() != have.enable_mask()) return false;
  if (want.has_delay() && want.delay() != have.delay()) return false;
  if (want.has_prevention_timeout_ms()) {
    if (!have.has_prevention_timeout_ms()) return false;
    // mlx5 turns "auto" into its critical timeout, and reports that back.
    const bool auto_applied = want.prevention_timeout_ms() == kPfcPreventionAuto &&
                              have.prevention_timeout_ms() == kPfcPreventionAutoMs;
    if (want.prevention_timeout_ms() != have.prevention_timeout_ms() && !auto_applied) {
      return false;
    }
  }
  return true;
}

bool NeedsCc(const v1::DeviceParameters& d) {
  return d.dcqcn_size() > 0 || d.has_rp_enable_mask() || d.has_np_enable_mask();
}

std::optional<int64_t> Lookup(const v1::DeviceParameters& d, const std::string& name) {
  if (name == kRpEnableMask) {
    if (!d.has_rp_enable_mask()) return std::nullopt;
    return d.rp_enable_mask();
  }
  if (name == kNpEnableMask) {
    if (!d.has_np_enable_mask()) return std::nullopt;
    return d.np_enable_mask();
  }
  auto it = d.dcqcn().find(name);
  if (it == d.dcqcn().end()) return std::nullopt;
  return it->second;
}

bool IsSideEffectTarget(const std::string& name) {
  for (const CcWriteSideEffect& se : CcWriteSideEffects()) {
    if (name == se.affected) return true;
  }
  return false;
}

// Requested (name, value) pairs of one device, DCQCN values sorted by name,
// except that parameters another write changes as a side effect come last.
std::vector<std::pair<std::string, int64_t>> DcqcnRequests(const v1::DeviceParameters& d) {
  std::vector<std::pair<std::string, int64_t>> out(d.dcqcn().begin(), d.dcqcn().end());
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) {
    return std::make_pair(IsSideEffectTarget(a.first), a.first) <
           std::make_pair(IsSideEffectTarget(b.first), b.first);
  });
  return out;
}

std::vector<std::pair<std::string, int64_t>> MaskRequests(const v1::DeviceParameters& d) {
  std::vector<std::pair<std::string, int64_t>> out;
  if (d.has_rp_enable_mask()) out.emplace_back(kRpEnableMask, d.rp_enable_mask());
  if (d.has_np_enable_mask()) out.emplace_back(kNpEnableMask, d.np_enable_mask());
  return out;
}

}  // namespace

Applier::Applier(std::map<std::string, ApplyTarget> targets) : targets_(std::move(targets)) {}

struct Applier::Transaction {
  std::vector<CcRangeViolation> range;  // out-of-range values, allowed only if already held
  std::map<std::string, v1::DeviceParameters> snap;
  std::map<std::string, v1::PfcSettings> pfc_snap;
  std::vector<Step> steps;
  size_t attempted = 0;  // steps tried by Write (the failed one included)
  // Parameters outside the set that a write changes as a side effect are
  // written back to their snapshot value, and are checked on read-back.
  std::map<std::string, std::vector<std::pair<std::string, int64_t>>> kept;
  ApplyResult result;
};

absl::StatusOr<ApplyResult> Applier::Apply(const v1::ParameterSet& set) {
  absl::MutexLock lock(&mu_);
  Transaction txn;
  if (absl::Status st = Validate(set, &txn); !st.ok()) return st;
  if (absl::Status st = Snapshot(set, &txn); !st.ok()) return st;
  Plan(set, &txn);
  absl::Status failure = Write(&txn);
  if (failure.ok()) failure = ReadBack(set, &txn);
  if (!failure.ok()) return Restore(failure, &txn);
  for (const std::string& line : txn.result.disruptive) {
    LogWarning("disruptive PFC change applied", {{"change", line}});
  }
  return std::move(txn.result);
}

absl::Status Applier::Validate(const v1::ParameterSet& set, Transaction* txn) {
  if (absl::Status st = ValidateParameterSetExceptDcqcnRanges(set, &txn->range); !st.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("parameter set rejected, nothing written: ", st.message()));
  }
  // An out-of-range value is tolerated only if the device already holds it
  // (checked against the snapshot); it is then never written.
  if (absl::c_any_of(txn->range, [&](const CcRangeViolation& v) {
        auto it = targets_.find(v.device);
        return it == targets_.end() || it->second.cc == nullptr;
      })) {
    return absl::InvalidArgumentError(absl::StrCat("parameter set rejected, nothing written: ",
                                                   ValidateParameterSet(set).message()));
  }
  // Every device must be known and able to take what the set asks for.
  std::vector<std::string> problems;
  bool unknown_device = false;
  for (const v1::DeviceParameters& d : set.devices()) {
    auto it = targets_.find(d.device());
    if (it == targets_.end()) {
      problems.push_back(absl::StrCat(d.device(), ": unknown device"));
      unknown_device = true;
      continue;
    }
    if (NeedsCc(d) && it->second.cc == nullptr) {
      problems.push_back(absl::StrCat(d.device(), ": no DCQCN parameter store (layout none)"));
    }
    if (d.has_pfc() && it->second.pfc == nullptr) {
      problems.push_back(absl::StrCat(d.device(), ": no PFC configuration (dcbnl) available"));
    }
  }
  if (problems.empty()) return absl::OkStatus();
  std::string msg =
      absl::StrCat("parameter set rejected, nothing written: ", absl::StrJoin(problems, "; "));
  return unknown_device ? absl::InvalidArgumentError(msg) : absl::FailedPreconditionError(msg);
}

std::vector<std::string> Applier::CheckLink(const v1::ParameterSet& set,
                                            const Transaction& txn) const {
  std::vector<std::string> out;
  for (const v1::DeviceParameters& d : set.devices()) {
    const ApplyTarget& t = targets_.at(d.device());
    for (const auto& [name, value] : DcqcnRequests(d)) {
      const CcParamSpec* spec = FindCcParam(name);
      if (spec == nullptr || std::string(spec->unit) != "Mbps" || t.speed_mbps <= 0) continue;
      if (value > t.speed_mbps) {
        out.push_back(absl::StrCat(d.device(), ": ", name, " ", value,
                                   " Mb/s exceeds the port speed ", t.speed_mbps, " Mb/s"));
      }
    }
    auto it = txn.snap.find(d.device());
    if (it == txn.snap.end()) continue;
    auto after = [&](const std::string& name) -> std::optional<int64_t> {
      if (auto r = d.dcqcn().find(name); r != d.dcqcn().end()) return r->second;
      if (auto c = it->second.dcqcn().find(name); c != it->second.dcqcn().end()) return c->second;
      return std::nullopt;
    };
    std::optional<int64_t> lo = after("rpg_min_rate");
    std::optional<int64_t> hi = after("rpg_max_rate");
    if ((d.dcqcn().contains("rpg_min_rate") || d.dcqcn().contains("rpg_max_rate")) &&
        lo.has_value() && hi.has_value() && *hi != 0 && *lo > *hi) {
      out.push_back(absl::StrCat(d.device(), ": rpg_min_rate ", *lo, " Mb/s above rpg_max_rate ",
                                 *hi, " Mb/s"));
    }
  }
  return out;
}

absl::Status Applier::Snapshot(const v1::ParameterSet& set, Transaction* txn) {
  std::vector<std::string> problems;
  for (const v1::DeviceParameters& d : set.devices()) {
    const ApplyTarget& t = targets_.at(d.device());
    if (NeedsCc(d)) {
      absl::StatusOr<v1::DeviceParameters> cur = t.cc->Read(d.device());
      if (!cur.ok()) {
        return absl::Status(cur.status().code(),
                            absl::StrCat("snapshot of ", d.device(),
                                         " failed, nothing written: ", cur.status().message()));
      }
      for (const auto& [name, value] : DcqcnRequests(d)) {
        if (!cur->dcqcn().contains(name)) {
          problems.push_back(absl::StrCat(d.device(), ": parameter ", name,
                                          " is not available in layout ", t.cc->layout()));
        }
      }
      for (const auto& [name, value] : MaskRequests(d)) {
        if (!Lookup(*cur, name).has_value()) {
          problems.push_back(absl::StrCat(d.device(), ": ", name,
                                          " (per-priority enable) is not available in layout ",
                                          t.cc->layout()));
        }
      }
      txn->snap[d.device()] = *std::move(cur);
    }
    if (d.has_pfc()) {
      absl::StatusOr<PfcState> cur = t.pfc->Read(t.netdev);
      if (!cur.ok()) {
        return absl::Status(cur.status().code(),
                            absl::StrCat("snapshot of ", d.device(), " PFC on ", t.netdev,
                                         " failed, nothing written: ", cur.status().message()));
      }
      if (d.pfc().has_prevention_timeout_ms() && !cur->prevention_timeout_ms.has_value()) {
        problems.push_back(
            absl::StrCat(d.device(), ": ", t.netdev, " has no pfc-prevention-tout tunable"));
      }
      txn->pfc_snap[d.device()] = ToSettings(*cur);
    }
  }
  std::vector<std::string> out_of_range = CheckLink(set, *txn);
  for (const CcRangeViolation& v : txn->range) {
    const v1::DeviceParameters& held = txn->snap[v.device];
    auto it = held.dcqcn().find(v.name);
    if (it == held.dcqcn().end() || it->second != v.value) out_of_range.push_back(v.text);
  }
  if (!out_of_range.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("parameter set rejected, nothing written: invalid parameters (",
                     out_of_range.size(), "): ", absl::StrJoin(out_of_range, "; ")));
  }
  if (!problems.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("parameter set rejected, nothing written: ", absl::StrJoin(problems, "; ")));
  }
  return absl::OkStatus();
}

void Applier::Plan(const v1::ParameterSet& set, Transaction* txn) {
  std::vector<Step>& steps = txn->steps;
  for (const v1::DeviceParameters& d : set.devices()) {
    const v1::DeviceParameters& cur = txn->snap[d.device()];
    std::set<std::string> written;
    for (const auto& [name, value] : DcqcnRequests(d)) {
      const int64_t old = cur.dcqcn().at(name);
      bool clobbered = false;
      for (const CcWriteSideEffect& se : CcWriteSideEffects()) {
        if (name == se.affected && written.contains(se.written) && se.value != value) {
          clobbered = true;
        }
      }
      if (old != value || clobbered) {
        steps.push_back({d.device(), StepKind::kDcqcn, name, old, value, {}, {}});
        written.insert(name);
      }
    }
    for (const CcWriteSideEffect& se : CcWriteSideEffects()) {
      if (!written.contains(se.written) || d.dcqcn().contains(se.affected)) continue;
      auto it = cur.dcqcn().find(se.affected);
      if (it == cur.dcqcn().end() || it->second == se.value) continue;
      steps.push_back({d.device(), StepKind::kDcqcn, se.affected, it->second, it->second, {}, {}});
      txn->kept[d.device()].emplace_back(se.affected, it->second);
    }
  }
  for (const v1::DeviceParameters& d : set.devices()) {
    for (const auto& [name, value] : MaskRequests(d)) {
      int64_t old = *Lookup(txn->snap[d.device()], name);
      if (old != value) steps.push_back({d.device(), StepKind::kMask, name, old, value, {}, {}});
    }
  }
  for (const v1::DeviceParameters& d : set.devices()) {
    if (!d.has_pfc()) continue;
    const v1::PfcSettings& old = txn->pfc_snap[d.device()];
    if (PfcMatches(d.pfc(), old)) continue;
    Step s{d.device(), StepKind::kPfc, "pfc", 0, 0, old, d.pfc()};
    if (old.enable_mask() != d.pfc().enable_mask()) {
      txn->result.disruptive.push_back(absl::StrCat(
          d.device(), "/", targets_.at(d.device()).netdev, ": pfc enable_mask ",
          Hex(old.enable_mask()), " -> ", Hex(d.pfc().enable_mask()), " (mlx5 flaps the link)"));
    }
    steps.push_back(std::move(s));
  }
}

absl::Status Applier::Write(Transaction* txn) {
  for (const Step& s : txn->steps) {
    ++txn->attempted;
    const ApplyTarget& t = targets_.at(s.device);
    absl::Status st;
    if (s.kind == StepKind::kPfc) {
      st = t.pfc->Write(t.netdev, s.new_pfc);
      if (!st.ok()) {
        st = absl::Status(st.code(), absl::StrCat(s.device, ": pfc ", PfcText(s.new_pfc), " on ",
                                                  t.netdev, ": ", st.message()));
      }
    } else {
      st = t.cc->Write(s.device, s.name, s.new_value);
    }
    if (!st.ok()) return absl::Status(st.code(), absl::StrCat("apply failed: ", st.message()));
    ++txn->result.writes;
  }
  return absl::OkStatus();
}

absl::Status Applier::ReadBack(const v1::ParameterSet& set, Transaction* txn) {
  std::vector<std::string> mismatches;
  for (const v1::DeviceParameters& d : set.devices()) {
    const ApplyTarget& t = targets_.at(d.device());
    v1::DeviceParameters* out = txn->result.applied.add_devices();
    out->set_device(d.device());
    if (NeedsCc(d)) {
      absl::StatusOr<v1::DeviceParameters> back = t.cc->Read(d.device());
      if (!back.ok()) {
        mismatches.push_back(
            absl::StrCat(d.device(), ": read-back failed: ", back.status().message()));
        continue;
      }
      std::vector<std::pair<std::string, int64_t>> wanted = DcqcnRequests(d);
      for (auto& m : MaskRequests(d)) wanted.push_back(m);
      for (auto& k : txn->kept[d.device()]) wanted.push_back(k);
      for (const auto& [name, value] : wanted) {
        std::optional<int64_t> got = Lookup(*back, name);
        if (!got.has_value() || *got != value) {
          mismatches.push_back(
              absl::StrCat(d.device(), ": ", name, " wrote ", value, ", read back ",
                           got.has_value() ? absl::StrCat(*got) : std::string("nothing"),
                           " (layout ", t.cc->layout(), ")"));
        }
      }
      *out = *std::move(back);
    }
    if (d.has_pfc()) {
      absl::StatusOr<PfcState> back = t.pfc->Read(t.netdev);
      if (!back.ok()) {
        mismatches.push_back(absl::StrCat(d.device(), ": PFC read-back on ", t.netdev,
                                          " failed: ", back.status().message()));
        continue;
      }
      v1::PfcSettings got = ToSettings(*back);
      if (!PfcMatches(d.pfc(), got)) {
        mismatches.push_back(absl::StrCat(d.device(), ": pfc on ", t.netdev, " wrote ",
                                          PfcText(d.pfc()), ", read back ", PfcText(got)));
      }
      *out->mutable_pfc() = got;
    }
  }
  if (mismatches.empty()) return absl::OkStatus();
  return absl::AbortedError(absl::StrCat("read-back mismatch: ", absl::StrJoin(mismatches, "; ")));
}

absl::Status Applier::Restore(const absl::Status& failure, Transaction* txn) {
  const std::vector<Step>& steps = txn->steps;
  const size_t attempted = txn->attempted;
  // Newest change first. A value already equal to the snapshot (the failed
  // write did not take) is not rewritten.
  std::vector<std::string> restore_errors;
  std::map<std::string, std::optional<v1::DeviceParameters>> current;
  std::set<std::string> touched;
  int restored = 0;
  for (size_t i = attempted; i-- > 0;) {
    const Step& s = steps[i];
    const ApplyTarget& t = targets_.at(s.device);
    touched.insert(s.device);
    if (s.kind == StepKind::kPfc) {
      absl::StatusOr<PfcState> cur = t.pfc->Read(t.netdev);
      if (cur.ok() && PfcMatches(s.old_pfc, ToSettings(*cur))) continue;
      v1::PfcSettings old = s.old_pfc;
      if (!s.new_pfc.has_delay()) old.clear_delay();
      if (!s.new_pfc.has_prevention_timeout_ms()) old.clear_prevention_timeout_ms();
      absl::Status st = t.pfc->Write(t.netdev, old);
      if (!st.ok()) {
        restore_errors.push_back(
            absl::StrCat(s.device, ": pfc ", PfcText(old), " on ", t.netdev, ": ", st.message()));
      } else {
        ++restored;
      }
      continue;
    }
    if (!current.contains(s.device)) {
      absl::StatusOr<v1::DeviceParameters> cur = t.cc->Read(s.device);
      current[s.device] = cur.ok() ? std::optional(*std::move(cur)) : std::nullopt;
    }
    const std::optional<v1::DeviceParameters>& cur = current[s.device];
    if (cur.has_value() && Lookup(*cur, s.name) == s.old_value) continue;
    absl::Status st = t.cc->Write(s.device, s.name, s.old_value);
    if (!st.ok()) {
      restore_errors.push_back(std::string(st.message()));
    } else {
      ++restored;
    }
  }
  // What must be back at its snapshot value: every parameter an attempted
  // step wrote, plus what those writes change as a side effect. A restored
  // write can clobber a parameter restored before it, so rewrite, oldest
  // first, whatever is still off the snapshot.
  struct Expect {
    std::string device;
    std::string name;
    int64_t value;
  };
  std::vector<Expect> expects;
  for (size_t i = 0; i < attempted; ++i) {
    const Step& s = steps[i];
    if (s.kind == StepKind::kPfc) continue;
    expects.push_back({s.device, s.name, s.old_value});
    for (const CcWriteSideEffect& se : CcWriteSideEffects()) {
      if (s.name != se.written) continue;
      std::optional<int64_t> v = Lookup(txn->snap[s.device], se.affected);
      if (v.has_value()) expects.push_back({s.device, se.affected, *v});
    }
  }
  for (const Expect& e : expects) {
    const ApplyTarget& t = targets_.at(e.device);
    absl::StatusOr<v1::DeviceParameters> cur = t.cc->Read(e.device);
    if (!cur.ok() || Lookup(*cur, e.name) == e.value) continue;
    if (absl::Status st = t.cc->Write(e.device, e.name, e.value); st.ok()) ++restored;
  }
  // Verify the restore.
  for (const std::string& dev : touched) {
    const ApplyTarget& t = targets_.at(dev);
    if (txn->snap.contains(dev)) {
      absl::StatusOr<v1::DeviceParameters> back = t.cc->Read(dev);
      if (!back.ok()) {
        restore_errors.push_back(
            absl::StrCat(dev, ": read after restore failed: ", back.status().message()));
      } else {
        for (const Expect& e : expects) {
          if (e.device != dev) continue;
          std::optional<int64_t> got = Lookup(*back, e.name);
          if (got != e.value) {
            restore_errors.push_back(
                absl::StrCat(dev, ": ", e.name, " still ",
                             got.has_value() ? absl::StrCat(*got) : std::string("unreadable"),
                             " after restore, snapshot ", e.value));
          }
        }
      }
    }
    for (size_t i = 0; i < attempted; ++i) {
      const Step& s = steps[i];
      if (s.device != dev || s.kind != StepKind::kPfc) continue;
      v1::PfcSettings want = s.old_pfc;
      if (!s.new_pfc.has_delay()) want.clear_delay();
      if (!s.new_pfc.has_prevention_timeout_ms()) want.clear_prevention_timeout_ms();
      absl::StatusOr<PfcState> back = t.pfc->Read(t.netdev);
      if (!back.ok() || !PfcMatches(want, ToSettings(*back))) {
        restore_errors.push_back(absl::StrCat(
            dev, ": pfc on ", t.netdev, " not back at ", PfcText(want), " after restore",
            back.ok() ? absl::StrCat(" (now ", PfcText(ToSettings(*back)), ")")
                      : absl::StrCat(": ", back.status().message())));
      }
    }
  }
  std::vector<std::string> devices(touched.begin(), touched.end());
  if (!restore_errors.empty()) {
    LogError("apply failed and restore failed", {{"error", std::string(failure.message())}});
    return absl::InternalError(absl::StrCat(
        failure.message(),
        "; RESTORE FAILED, host may be on a mixed set: ", absl::StrJoin(restore_errors, "; ")));
  }
  LogWarning("apply failed, snapshot restored",
             {{"error", std::string(failure.message())}, {"devices", absl::StrJoin(devices, ",")}});
  return absl::Status(
      failure.code(),
      absl::StrCat(failure.message(), "; previous values restored (", restored, " writes on ",
                   devices.empty() ? "no device" : absl::StrJoin(devices, ","), ")"));
}

v1::ParameterSet Applier::ReadCurrent(std::vector<std::string>* errors) {
  absl::MutexLock lock(&mu_);
  v1::ParameterSet out;
  for (const auto& [device, t] : targets_) {
    v1::DeviceParameters d;
    d.set_device(device);
    bool any = false;
    if (t.cc != nullptr) {
      absl::StatusOr<v1::DeviceParameters> cur = t.cc->Read(device);
      if (cur.ok()) {
        d = *std::move(cur);
        any = true;
      } else if (errors != nullptr) {
        errors->push_back(std::string(cur.status().message()));
      }
    }
    if (t.pfc != nullptr) {
      absl::StatusOr<PfcState> cur = t.pfc->Read(t.netdev);
      if (cur.ok()) {
        *d.mutable_pfc() = ToSettings(*cur);
        any = true;
      } else if (errors != nullptr) {
        errors->push_back(
            absl::StrCat(device, ": PFC on ", t.netdev, ": ", cur.status().message()));
      }
    }
    if (any) *out.add_devices() = std::move(d);
  }
  return out;
}

}  // namespace rocetune
