#ifndef ROCETUNE_AGENT_APPLY_APPLY_INTENT_H_
#define ROCETUNE_AGENT_APPLY_APPLY_INTENT_H_

#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "rocetune/v1/admin.pb.h"
#include "rocetune/v1/params.pb.h"

namespace rocetune {

// Which set a host holds after an apply that did not finish (the process
// ended between its first and its last write).
enum class IntentOutcome {
  kNew,    // every parameter the new set names holds its new value
  kOld,    // every one of them still holds its old value
  kMixed,  // some of each (or a value that is neither)
};
const char* IntentOutcomeName(IntentOutcome o);

// The record of an apply in progress, persisted in
// <state_dir>/apply_intent.txtpb (a text-format rocetune.v1.HostTarget:
// previous_version + previous = the set before, pushed_version + target = the
// set being applied) before the first write and removed after the apply
// ends, whether it succeeded or was restored. A file found at start means the
// previous process died inside an apply. Saves are atomic (temp file, fsync,
// rename, fsync of the directory). Not thread-safe: NicOwner serialises use.
class ApplyIntent {
 public:
  static constexpr char kFileName[] = "apply_intent.txtpb";

  explicit ApplyIntent(std::string state_dir);

  // Records that `to` (as `to_version`) is about to replace `from` (as
  // `from_version`). The error names the path and the errno text.
  absl::Status Begin(const std::string& from_version, const v1::ParameterSet& from,
                     const std::string& to_version, const v1::ParameterSet& to);
  // Removes the record (OK when there is none).
  absl::Status End();
  // The record a previous process left; nullopt when there is none;
  // kDataLoss naming the path when it cannot be parsed.
  absl::StatusOr<std::optional<v1::HostTarget>> Load() const;

  // Compares `current` with the record on every parameter the new set names.
  static IntentOutcome Classify(const v1::HostTarget& intent, const v1::ParameterSet& current);

  const std::string& path() const { return path_; }

 private:
  std::string state_dir_;
  std::string path_;
};

}  // namespace rocetune

#endif  // ROCETUNE_AGENT_APPLY_APPLY_INTENT_H_
