#ifndef ROCETUNE_CONTROLLER_POLICY_POLICY_LOADER_H_
#define ROCETUNE_CONTROLLER_POLICY_POLICY_LOADER_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "rocetune/v1/policy.pb.h"

namespace rocetune::controller {

// One problem found in a policy file: where and which rule it breaks.
struct PolicyError {
  std::string file;
  int line = 0;         // 1-based; 0 when not tied to a line
  int column = 0;       // 1-based
  std::string rule;     // short rule id, e.g. "unknown_knob", "bounds_outside_range"
  std::string message;  // human text naming the field and value
  // "file:line:column: message [rule]"
  std::string ToString() const;
};

// What validation may know about the hosts a policy selects (optional).
struct PolicyContext {
  // Lowest link speed among the selected hosts, Mb/s; rate bounds (Mbps knobs)
  // above it are refused. Unset: not checked.
  std::optional<uint64_t> min_link_speed_mbps;
  // Smallest buffer limit among the selected switches, bytes; ECN threshold
  // knobs above it are refused. Unset: not checked.
  std::optional<int64_t> min_switch_buffer_bytes;
  // The controller's probe locality label (--probe_locality_label): probe peer
  // classes are "intra_<label>" and "inter_<label>", and objective.peer_class
  // must be one of them. Unset (offline): any "intra_<name>" / "inter_<name>".
  std::optional<std::string> probe_locality_label;
};

// Whether `peer_class` is one the probe plan gives: "intra_<label>" or
// "inter_<label>" with the controller's probe locality label; with `label`
// unset, any label name. Empty (all probes) is not a class: the caller checks.
bool KnownProbePeerClass(const std::string& peer_class, const std::optional<std::string>& label);

// Parses a text-format Policy. Syntax errors are reported with line and
// column. Field positions are recorded so that Validate can point at them.
class PolicyFile {
 public:
  // kInvalidArgument with every syntax error ("file:line:col: ...") on failure.
  static absl::StatusOr<PolicyFile> Parse(const std::string& text, const std::string& file_name);
  static absl::StatusOr<PolicyFile> Load(const std::string& path);

  const v1::Policy& policy() const { return policy_; }
  const std::string& file_name() const { return file_; }
  const std::string& text() const { return text_; }

  // Every semantic error: unknown knob, bounds outside the parameter's hard
  // range, min > max, step <= 0 or larger than the range, a rate bound above
  // the selected hosts' link speed, canary share outside (0, 1), stages not
  // increasing or not ending at 1.0, approvals out of range, missing name,
  // unknown objective or constraint metric, tuner fixed value outside its
  // knob's bounds, guard tolerances out of range. Empty = valid.
  std::vector<PolicyError> Validate(const PolicyContext& context = {}) const;

 private:
  // (field path, e.g. "knobs[2].max") -> (line, column), filled by Parse.
  struct Location {
    std::string path;
    int line;
    int column;
  };
  std::vector<Location> locations_;
  // Map entries whose key the file gives more than once (the last one wins in
  // the parsed map); Validate reports them. `path` is e.g. "tuner.fixed[rpg_ai_rate]".
  std::vector<Location> duplicate_keys_;
  v1::Policy policy_;
  std::string file_;
  std::string text_;
  friend class PolicyFileTestPeer;
  // line/column of `path`, or of its closest recorded parent.
  std::pair<int, int> Find(const std::string& path) const;
};

// Errors joined one per line, as a kInvalidArgument status (OK when empty).
absl::Status ErrorsToStatus(const std::vector<PolicyError>& errors);

// The content hash of a policy: hex SHA-256 over a deterministic serialisation
// (fields in number order, map entries sorted by key), independent of comments,
// whitespace and field order in the file. Empty only if libcrypto fails.
std::string PolicyHash(const v1::Policy& policy);

// Field-by-field differences between two policies, one line each, e.g.
// "knobs[rpg_ai_rate].max: 100 -> 200", "rollout.stages: [0.5, 1] -> [0.25, 0.5, 1]".
std::vector<std::string> DiffPolicies(const v1::Policy& a, const v1::Policy& b);

// guard.provisional_lease_seconds: 0 means the default; otherwise within the
// bounds (a shorter lease would roll changes back at every controller restart).
inline constexpr uint32_t kDefaultProvisionalLeaseSeconds = 300;
inline constexpr uint32_t kMinProvisionalLeaseSeconds = 10;
inline constexpr uint32_t kMaxProvisionalLeaseSeconds = 86400;

// The policy with every default filled in (what the controller acts on):
// rollout.rack_label "rack", looks 3, baseline = bake, min_canary_hosts 1,
// guard.min_rack_pairs 6,
// guard.confidence 0.995, guard.max_hold_seconds 3 * bake,
// guard.pass_max_ucb_regression 0.05, guard.provisional_lease_seconds 300,
// tuner.trial_budget 20,
// approval.approvers 1 (unset means 1). tuner.min_improvement stays unset
// (0): campaigns derive it from each trial's measured noise.
v1::Policy WithDefaults(const v1::Policy& policy);

}  // namespace rocetune::controller

#endif  // ROCETUNE_CONTROLLER_POLICY_POLICY_LOADER_H_
