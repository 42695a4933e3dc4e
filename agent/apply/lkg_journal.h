#ifndef ROCETUNE_AGENT_APPLY_LKG_JOURNAL_H_
#define ROCETUNE_AGENT_APPLY_LKG_JOURNAL_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "rocetune/v1/agent.pb.h"
#include "rocetune/v1/params.pb.h"

namespace rocetune {

// Writes `body` to `path` (a file in `dir`, created if needed) so that a crash
// leaves the old or the new content, never a torn file: a temp file, fsync,
// rename over `path`, fsync of `dir`. Errors name the path and the errno text.
absl::Status WriteFileAtomically(const std::string& dir, const std::string& path,
                                 const std::string& body);

struct LkgEntry {
  std::string version;  // DesiredState version ("baseline" for the values read at start)
  v1::ParameterSet parameters;
};

// The last-known-good parameter set and its version, persisted as a text-format
// rocetune.v1.DesiredState (nonce unset) in <state_dir>/last_known_good.txtpb
// (issue 3, item 9). Saves are atomic: write a temp file, fsync it, rename it
// over the old one, fsync the directory; a crash leaves the old or the new set,
// never a torn file. Thread-safe.
class LkgJournal {
 public:
  static constexpr char kFileName[] = "last_known_good.txtpb";
  static constexpr char kProvisionalFileName[] = "provisional.txtpb";

  explicit LkgJournal(std::string state_dir);

  // Loads the journal file. OK with no entry when there is none yet; kDataLoss
  // naming the path when it cannot be parsed (the in-memory entry is then
  // left unchanged); the errno text when it cannot be read.
  absl::Status Load();

  // Persists `version` + `parameters` and makes it the current entry. Creates
  // the state dir if needed. On failure the previous file and entry are kept
  // and the error names the path and the errno text.
  absl::Status Save(const std::string& version, const v1::ParameterSet& parameters);

  std::optional<LkgEntry> Get() const;

  // The provisional record, <state_dir>/provisional.txtpb: the version, lease
  // and read-back values of a set the controller pushed as provisional (a
  // change's canary or stage), kept until it is confirmed or replaced, so that
  // an agent restarted without its controller still restores last-known-good
  // when the lease runs out. Written atomically as Save(); Clear is a no-op
  // when there is none; Load gives nullopt when there is none and kDataLoss
  // naming the path when it cannot be parsed.
  absl::Status SaveProvisional(const std::string& version, uint32_t lease_seconds,
                               const v1::ParameterSet& parameters);
  absl::Status ClearProvisional();
  absl::StatusOr<std::optional<v1::DesiredState>> LoadProvisional() const;

  // Parameters of the last-known-good set whose value in `current` differs, one
  // line each, e.g. "mlx5_0/rpg_ai_rate: 10 (last-known-good 5)". Only what the
  // last-known-good set names is compared. Empty when there is no entry.
  std::vector<std::string> Drift(const v1::ParameterSet& current) const;

  std::string path() const { return path_; }

 private:
  std::string state_dir_;
  std::string path_;
  std::string provisional_path_;
  mutable absl::Mutex mu_;
  std::optional<LkgEntry> entry_ ABSL_GUARDED_BY(mu_);
};

}  // namespace rocetune

#endif  // ROCETUNE_AGENT_APPLY_LKG_JOURNAL_H_
