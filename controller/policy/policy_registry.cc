#include "controller/policy/policy_registry.h"

#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace rocetune::controller {

const v1::PolicyVersion& PolicyRegistry::Add(v1::PolicyVersion version, bool* created) {
  std::vector<v1::PolicyVersion>& list = by_name_[version.name()];
  for (const v1::PolicyVersion& v : list) {
    if (v.version_hash() == version.version_hash()) {
      *created = false;
      return v;
    }
  }
  if (version.sequence() == 0) version.set_sequence(static_cast<uint32_t>(list.size() + 1));
  list.push_back(std::move(version));
  *created = true;
  return list.back();
}

const v1::PolicyVersion* PolicyRegistry::FindHash(const std::string& name,
                                                  const std::string& hash) const {
  auto it = by_name_.find(name);
  if (it == by_name_.end()) return nullptr;
  for (const v1::PolicyVersion& v : it->second) {
    if (v.version_hash() == hash) return &v;
  }
  return nullptr;
}

absl::StatusOr<v1::PolicyVersion> PolicyRegistry::Get(const std::string& name,
                                                      const std::string& version) const {
  auto it = by_name_.find(name);
  if (it == by_name_.end() || it->second.empty()) {
    return absl::NotFoundError(absl::StrCat("no policy named \"", name, "\""));
  }
  const std::vector<v1::PolicyVersion>& list = it->second;
  if (version.empty()) return list.back();
  uint32_t seq = 0;
  if (version.size() < 8 && absl::SimpleAtoi(version, &seq)) {
    for (const v1::PolicyVersion& v : list) {
      if (v.sequence() == seq) return v;
    }
    return absl::NotFoundError(absl::StrCat("policy ", name, " has no version ", version, " (",
                                            list.size(), " versions)"));
  }
  if (version.size() < 4) {
    return absl::InvalidArgumentError(absl::StrCat(
        "version \"", version, "\": give a sequence number or at least 4 hash digits"));
  }
  const v1::PolicyVersion* found = nullptr;
  for (const v1::PolicyVersion& v : list) {
    if (absl::StartsWith(v.version_hash(), version)) {
      if (found != nullptr) {
        return absl::InvalidArgumentError(
            absl::StrCat("version \"", version, "\" of policy ", name, " is ambiguous"));
      }
      found = &v;
    }
  }
  if (found == nullptr) {
    return absl::NotFoundError(absl::StrCat("policy ", name, " has no version ", version));
  }
  return *found;
}

std::vector<v1::PolicyVersion> PolicyRegistry::Latest() const {
  std::vector<v1::PolicyVersion> out;
  for (const auto& [name, list] : by_name_) {
    if (!list.empty()) out.push_back(list.back());
  }
  return out;
}

std::vector<v1::PolicyVersion> PolicyRegistry::History(const std::string& name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? std::vector<v1::PolicyVersion>() : it->second;
}

uint32_t PolicyRegistry::NextSequence(const std::string& name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? 1 : static_cast<uint32_t>(it->second.size() + 1);
}

}  // namespace rocetune::controller
