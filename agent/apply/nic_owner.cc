#include "agent/apply/nic_owner.h"

#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "daemon/logging.h"

namespace rocetune {
namespace {

void CompareOne(const std::string& device, const std::string& parameter, int64_t expected,
                std::optional<int64_t> found, std::vector<DriftItem>* out) {
  if (found == expected) return;
  out->push_back({device, parameter, expected, found});
}

std::optional<int64_t> Opt(bool has, int64_t v) {
  return has ? std::optional<int64_t>(v) : std::nullopt;
}

}  // namespace

std::string DriftItem::Text() const {
  return absl::StrCat(device, "/", parameter, ": expected ", expected, ", found ",
                      found.has_value() ? absl::StrCat(*found) : std::string("nothing"));
}

NicOwner::NicOwner(ParameterApplier* applier, LkgJournal* journal, LocalGuard* guard,
                   ApplyIntent* intent, std::string host_id)
    : applier_(applier),
      journal_(journal),
      guard_(guard),
      intent_(intent),
      host_id_(std::move(host_id)) {}

void NicOwner::SetExpected(const std::string& version, const v1::ParameterSet& parameters) {
  absl::MutexLock lock(&mu_);
  version_ = version;
  expected_ = parameters;
}

absl::StatusOr<ApplyResult> NicOwner::Apply(const std::string& version, const v1::ParameterSet& set,
                                            uint32_t lease_seconds) {
  absl::MutexLock lock(&mu_);
  if (intent_ != nullptr) {
    if (absl::Status s = intent_->Begin(version_, applier_->ReadCurrent(nullptr), version, set);
        !s.ok()) {
      return absl::UnavailableError(absl::StrCat(
          "cannot record the apply in progress, so nothing was written: ", s.message()));
    }
  }
  // A provisional set is recorded as such before it is written: a process
  // killed inside the apply leaves a record that the next start resumes
  // (ResumeProvisional) if the NIC ended on the new set.
  if (lease_seconds > 0) {
    if (absl::Status s = journal_->SaveProvisional(version, lease_seconds, set); !s.ok()) {
      LogWarning("cannot record the set as provisional before the apply",
                 {{"host", host_id_}, {"version", version}, {"error", std::string(s.message())}});
    }
  }
  absl::StatusOr<ApplyResult> result = applier_->Apply(set);
  // The apply ended (applied, refused or restored): nothing is in progress.
  if (intent_ != nullptr) (void)intent_->End();
  if (!result.ok()) {
    // Nothing changed: the record goes back to what the host holds.
    if (lease_seconds > 0) SetLeaseLocked(static_cast<uint32_t>(absl::ToInt64Seconds(lease_)));
    return result;
  }
  guard_->Arm(version, result->applied, static_cast<int>(set.local_guard().rounds_over()),
              lease_seconds > 0);
  version_ = version;
  expected_ = MergeExpected(expected_, set, result->applied);
  if (lease_seconds > 0) {
    lease_ = absl::Seconds(lease_seconds);  // its record was written before the apply
  } else {
    SetLeaseLocked(0);
  }
  return result;
}

void NicOwner::SetLeaseLocked(uint32_t lease_seconds) {
  lease_ = absl::Seconds(lease_seconds);
  // The record lets a restarted agent keep counting the lease; a failure to
  // write it costs only that (the lease runs in memory all the same).
  absl::Status s = lease_seconds > 0 ? journal_->SaveProvisional(version_, lease_seconds, expected_)
                                     : journal_->ClearProvisional();
  if (!s.ok()) {
    LogWarning("cannot record whether the applied set is provisional",
               {{"host", host_id_}, {"version", version_}, {"error", std::string(s.message())}});
  }
}

bool NicOwner::ResumeProvisional(const v1::DesiredState& record) {
  absl::MutexLock lock(&mu_);
  const v1::ParameterSet current = applier_->ReadCurrent(nullptr);
  std::optional<LkgEntry> lkg = journal_->Get();
  if (!Compare(record.parameters(), current).empty() ||
      (lkg.has_value() && lkg->version == record.version())) {
    // The NIC no longer holds it (restored, or changed by hand): not ours to
    // revert. Or it was confirmed and saved, and the process ended before
    // the record was removed.
    (void)journal_->ClearProvisional();
    return false;
  }
  version_ = record.version();
  expected_ = current;
  lease_ = absl::Seconds(record.provisional_lease_seconds());
  // Judged again from now, as provisional (an interrupted apply resolved to
  // this set armed the guard for it already: that window goes on).
  guard_->Arm(version_, current, 0, /*provisional=*/true);
  return true;
}

absl::Duration NicOwner::lease() const {
  absl::MutexLock lock(&mu_);
  return lease_;
}

std::optional<v1::GuardEvent> NicOwner::ExpireLease(absl::Duration without_controller) {
  absl::MutexLock lock(&mu_);
  if (lease_ <= absl::ZeroDuration() || without_controller < lease_) return std::nullopt;
  v1::GuardEvent event;
  event.set_kind("lease_expired");
  event.set_judged_version(version_);
  std::string detail =
      absl::StrCat("no stream to the controller for ",
                   absl::FormatDuration(absl::Trunc(without_controller, absl::Seconds(1))),
                   " (the set's lease is ", absl::FormatDuration(lease_),
                   ") while holding provisional version ", version_);
  const std::string judged = version_;
  std::optional<LkgEntry> lkg = journal_->Get();
  if (lkg.has_value() && lkg->version == version_) {
    // A step that pushed the host the set it already had as last-known-good:
    // nothing to give up, the set is simply no longer on trial here.
    SetLeaseLocked(0);
    return std::nullopt;
  }
  if (!lkg.has_value()) {
    absl::StrAppend(&detail, "; no last-known-good set, nothing restored");
    guard_->Abandon();
    SetLeaseLocked(0);
  } else {
    absl::StatusOr<ApplyResult> r = applier_->Apply(lkg->parameters);
    if (!r.ok()) {
      // Tried again at the next round: the lease stays expired.
      LogError(
          "lease expired: restoring last-known-good failed; trying again next round",
          {{"host", host_id_}, {"version", judged}, {"error", std::string(r.status().message())}});
      return std::nullopt;
    }
    guard_->Abandon();
    version_ = lkg->version;
    expected_ = applier_->ReadCurrent(nullptr);
    if (expected_.devices_size() == 0) expected_ = lkg->parameters;
    *event.mutable_restored_parameters() = expected_;
    event.set_restored_version(lkg->version);
    absl::StrAppend(&detail, "; restored last-known-good version ", lkg->version);
    SetLeaseLocked(0);
  }
  event.set_detail(detail);
  LogWarning("provisional lease expired without the controller",
             {{"host", host_id_}, {"detail", detail}});
  return event;
}

v1::ParameterSet NicOwner::MergeExpected(const v1::ParameterSet& expected,
                                         const v1::ParameterSet& set,
                                         const v1::ParameterSet& read_back) {
  std::map<std::string, const v1::DeviceParameters*> named;
  for (const v1::DeviceParameters& d : set.devices()) named[d.device()] = &d;
  std::map<std::string, const v1::DeviceParameters*> fresh;
  for (const v1::DeviceParameters& d : read_back.devices()) fresh[d.device()] = &d;
  // One device: what the set named comes from the read-back; what it did not
  // name keeps its expected value (so an out-of-band write there is still
  // drift, not the new normal); what was not expected before is taken as read.
  auto merge = [](const v1::DeviceParameters* old, const v1::DeviceParameters& want,
                  const v1::DeviceParameters& back) {
    v1::DeviceParameters out = back;
    if (old == nullptr) return out;
    for (const auto& [name, value] : old->dcqcn()) {
      if (want.dcqcn().count(name) == 0) (*out.mutable_dcqcn())[name] = value;
    }
    if (!want.has_rp_enable_mask() && old->has_rp_enable_mask()) {
      out.set_rp_enable_mask(old->rp_enable_mask());
    }
    if (!want.has_np_enable_mask() && old->has_np_enable_mask()) {
      out.set_np_enable_mask(old->np_enable_mask());
    }
    if (!want.has_pfc() && old->has_pfc()) *out.mutable_pfc() = old->pfc();
    return out;
  };
  v1::ParameterSet next;
  for (const v1::DeviceParameters& d : expected.devices()) {
    auto f = fresh.find(d.device());
    auto n = named.find(d.device());
    if (f == fresh.end() || n == named.end()) {
      *next.add_devices() = d;
      continue;
    }
    *next.add_devices() = merge(&d, *n->second, *f->second);
    fresh.erase(f);
  }
  for (const auto& [name, d] : fresh) *next.add_devices() = *d;
  return next;
}

absl::StatusOr<std::optional<NicOwner::Resolution>> NicOwner::ResolveInterruptedApply() {
  if (intent_ == nullptr) return std::optional<Resolution>();
  absl::StatusOr<std::optional<v1::HostTarget>> loaded = intent_->Load();
  if (!loaded.ok()) return loaded.status();
  if (!loaded->has_value()) return std::optional<Resolution>();
  const v1::HostTarget& intent = **loaded;
  absl::MutexLock lock(&mu_);
  v1::ParameterSet current = applier_->ReadCurrent(nullptr);
  Resolution r;
  r.found = ApplyIntent::Classify(intent, current);
  r.from_version = intent.previous_version();
  r.to_version = intent.pushed_version();
  switch (r.found) {
    case IntentOutcome::kNew:
      r.version = r.to_version;
      guard_->Arm(r.version, current,
                  static_cast<int>(intent.target().local_guard().rounds_over()));
      break;
    case IntentOutcome::kOld:
      r.version = r.from_version;
      break;
    case IntentOutcome::kMixed: {
      absl::StatusOr<ApplyResult> back = applier_->Apply(intent.previous());
      if (!back.ok()) {
        return absl::Status(
            back.status().code(),
            absl::StrCat("an interrupted apply of version ", r.to_version,
                         " left the host mixed and the old set (version ", r.from_version,
                         ") could not be written back: ", back.status().message()));
      }
      r.version = r.from_version;
      current = applier_->ReadCurrent(nullptr);
      break;
    }
  }
  version_ = r.version;
  expected_ = current;
  if (absl::Status s = intent_->End(); !s.ok()) return s;
  return std::optional<Resolution>(std::move(r));
}

std::optional<v1::GuardEvent> NicOwner::Observe(
    const google::protobuf::RepeatedPtrField<v1::CounterSample>& samples,
    absl::Duration round_start, absl::Duration round_end) {
  absl::MutexLock lock(&mu_);
  std::optional<v1::GuardEvent> ev = guard_->Observe(samples, round_start, round_end);
  if (ev.has_value() && !ev->restored_version().empty()) {
    version_ = ev->restored_version();
    SetLeaseLocked(0);
    std::optional<LkgEntry> lkg = journal_->Get();
    v1::ParameterSet current = applier_->ReadCurrent(nullptr);
    // What the restore wrote is what is expected from now on, as read back.
    expected_ = current;
    if (lkg.has_value() && current.devices_size() == 0) expected_ = lkg->parameters;
  }
  return ev;
}

std::vector<DriftItem> NicOwner::CheckDrift(v1::ParameterSet* current) {
  absl::MutexLock lock(&mu_);
  v1::ParameterSet now = applier_->ReadCurrent(nullptr);
  std::vector<DriftItem> out = Compare(expected_, now);
  if (current != nullptr) *current = std::move(now);
  return out;
}

v1::ParameterSet NicOwner::ReadCurrent(std::vector<std::string>* errors) {
  absl::MutexLock lock(&mu_);
  return applier_->ReadCurrent(errors);
}

std::string NicOwner::expected_version() const {
  absl::MutexLock lock(&mu_);
  return version_;
}

v1::ParameterSet NicOwner::expected() const {
  absl::MutexLock lock(&mu_);
  return expected_;
}

std::vector<DriftItem> NicOwner::Compare(const v1::ParameterSet& expected,
                                         const v1::ParameterSet& current) {
  std::vector<DriftItem> out;
  std::map<std::string, const v1::DeviceParameters*> cur;
  for (const v1::DeviceParameters& d : current.devices()) cur[d.device()] = &d;
  for (const v1::DeviceParameters& want : expected.devices()) {
    auto it = cur.find(want.device());
    const v1::DeviceParameters empty;
    const v1::DeviceParameters& have = it == cur.end() ? empty : *it->second;
    const std::string& dev = want.device();
    std::map<std::string, int64_t> sorted(want.dcqcn().begin(), want.dcqcn().end());
    for (const auto& [name, value] : sorted) {
      auto h = have.dcqcn().find(name);
      CompareOne(dev, name, value,
                 h == have.dcqcn().end() ? std::nullopt : std::optional<int64_t>(h->second), &out);
    }
    if (want.has_rp_enable_mask()) {
      CompareOne(dev, "rp_enable_mask", want.rp_enable_mask(),
                 Opt(have.has_rp_enable_mask(), have.rp_enable_mask()), &out);
    }
    if (want.has_np_enable_mask()) {
      CompareOne(dev, "np_enable_mask", want.np_enable_mask(),
                 Opt(have.has_np_enable_mask(), have.np_enable_mask()), &out);
    }
    if (want.has_pfc()) {
      const v1::PfcSettings& w = want.pfc();
      const v1::PfcSettings& h = have.pfc();
      CompareOne(dev, "pfc.enable_mask", w.enable_mask(), Opt(have.has_pfc(), h.enable_mask()),
                 &out);
      if (w.has_delay()) {
        CompareOne(dev, "pfc.delay", w.delay(), Opt(h.has_delay(), h.delay()), &out);
      }
      if (w.has_prevention_timeout_ms()) {
        CompareOne(dev, "pfc.prevention_timeout_ms", w.prevention_timeout_ms(),
                   Opt(h.has_prevention_timeout_ms(), h.prevention_timeout_ms()), &out);
      }
    }
  }
  return out;
}

}  // namespace rocetune
