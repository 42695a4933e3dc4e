#ifndef ROCETUNE_CONTROLLER_POLICY_POLICY_REGISTRY_H_
#define ROCETUNE_CONTROLLER_POLICY_POLICY_REGISTRY_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "rocetune/v1/admin.pb.h"

namespace rocetune::controller {

// The controller's policy versions, in memory (the store keeps them durable).
// Versions are immutable; each name's versions are numbered 1, 2, ...
// Not thread-safe (the rollout manager's executor owns it).
class PolicyRegistry {
 public:
  // Adds a stored version (Load) or a new one. A (name, hash) already present
  // is returned as is with `*created` false.
  const v1::PolicyVersion& Add(v1::PolicyVersion version, bool* created);
  // The version whose hash equals `hash`, if any.
  const v1::PolicyVersion* FindHash(const std::string& name, const std::string& hash) const;
  // `version`: "" = latest, a sequence number, a full hash or a unique hash
  // prefix (at least 4 characters). kNotFound / kInvalidArgument (ambiguous).
  absl::StatusOr<v1::PolicyVersion> Get(const std::string& name, const std::string& version) const;
  // Latest version of every policy, by name.
  std::vector<v1::PolicyVersion> Latest() const;
  // Every version of `name`, oldest first.
  std::vector<v1::PolicyVersion> History(const std::string& name) const;
  uint32_t NextSequence(const std::string& name) const;

 private:
  std::map<std::string, std::vector<v1::PolicyVersion>> by_name_;
};

}  // namespace rocetune::controller

#endif  // ROCETUNE_CONTROLLER_POLICY_POLICY_REGISTRY_H_
