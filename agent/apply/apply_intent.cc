#include "agent/apply/apply_intent.h"

#include <errno.h>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <system_error>
#include <utility>

#include "absl/strings/str_cat.h"
#include "agent/apply/lkg_journal.h"
#include "agent/host/param_file_io.h"
#include "google/protobuf/text_format.h"

namespace rocetune {
namespace {

// Every value a parameter set names, as "device/name" -> value.
std::map<std::string, int64_t> Flatten(const v1::ParameterSet& set) {
  std::map<std::string, int64_t> out;
  for (const v1::DeviceParameters& d : set.devices()) {
    for (const auto& [name, value] : d.dcqcn()) out[absl::StrCat(d.device(), "/", name)] = value;
    if (d.has_rp_enable_mask())
      out[absl::StrCat(d.device(), "/rp_enable_mask")] = d.rp_enable_mask();
    if (d.has_np_enable_mask())
      out[absl::StrCat(d.device(), "/np_enable_mask")] = d.np_enable_mask();
    if (d.has_pfc()) out[absl::StrCat(d.device(), "/pfc.enable_mask")] = d.pfc().enable_mask();
  }
  return out;
}

}  // namespace

const char* IntentOutcomeName(IntentOutcome o) {
  switch (o) {
    case IntentOutcome::kNew:
      return "new";
    case IntentOutcome::kOld:
      return "old";
    case IntentOutcome::kMixed:
      return "mixed";
  }
  return "mixed";
}

ApplyIntent::ApplyIntent(std::string state_dir)
    : state_dir_(std::move(state_dir)), path_(absl::StrCat(state_dir_, "/", kFileName)) {}

absl::Status ApplyIntent::Begin(const std::string& from_version, const v1::ParameterSet& from,
                                const std::string& to_version, const v1::ParameterSet& to) {
  v1::HostTarget intent;
  intent.set_previous_version(from_version);
  *intent.mutable_previous() = from;
  intent.set_pushed_version(to_version);
  *intent.mutable_target() = to;
  std::string body;
  if (!google::protobuf::TextFormat::PrintToString(intent, &body)) {
    return absl::InternalError("cannot print the apply intent");
  }
  body = absl::StrCat(
      "# rocetune-agent apply in progress (rocetune.v1.HostTarget): previous -> target\n", body);
  return WriteFileAtomically(state_dir_, path_, body);
}

absl::Status ApplyIntent::End() {
  if (unlink(path_.c_str()) != 0 && errno != ENOENT) {
    return ErrnoToStatus(errno, absl::StrCat("remove ", path_));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::optional<v1::HostTarget>> ApplyIntent::Load() const {
  std::error_code ec;
  if (!std::filesystem::exists(path_, ec)) return std::optional<v1::HostTarget>();
  absl::StatusOr<std::string> text = ParamFileIo::Real()->Read(path_);
  if (!text.ok()) return text.status();
  v1::HostTarget intent;
  if (!google::protobuf::TextFormat::ParseFromString(*text, &intent) ||
      intent.pushed_version().empty()) {
    return absl::DataLossError(absl::StrCat("apply intent ", path_, " is corrupt"));
  }
  return std::optional<v1::HostTarget>(std::move(intent));
}

IntentOutcome ApplyIntent::Classify(const v1::HostTarget& intent, const v1::ParameterSet& current) {
  const std::map<std::string, int64_t> to = Flatten(intent.target());
  const std::map<std::string, int64_t> from = Flatten(intent.previous());
  const std::map<std::string, int64_t> now = Flatten(current);
  bool all_new = true, all_old = true;
  for (const auto& [key, want] : to) {
    auto n = now.find(key);
    auto f = from.find(key);
    const bool is_new = n != now.end() && n->second == want;
    // A parameter the old set did not record counts as old only when unchanged.
    const bool is_old = n != now.end() && f != from.end() && n->second == f->second;
    all_new &= is_new;
    all_old &= is_old;
  }
  if (all_new) return IntentOutcome::kNew;
  if (all_old) return IntentOutcome::kOld;
  return IntentOutcome::kMixed;
}

}  // namespace rocetune
