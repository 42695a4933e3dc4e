#include "controller/admin/authorizer.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "daemon/init.h"

namespace rocetune::controller {
namespace {

bool Matches(const std::string& pattern, const std::string& identity) {
  if (!pattern.empty() && pattern.back() == '*') {
    return absl::StartsWith(identity, absl::string_view(pattern).substr(0, pattern.size() - 1));
  }
  return pattern == identity;
}

const char* Needed(Permission p) {
  switch (p) {
    case Permission::kRead:
      return "viewer, operator or approver";
    case Permission::kOperate:
      return "operator";
    case Permission::kApprove:
      return "approver";
    case Permission::kAgent:
      return "agent";
  }
  return "?";
}

bool Grants(Role r, Permission p) {
  switch (p) {
    case Permission::kRead:
      return r == Role::kViewer || r == Role::kOperator || r == Role::kApprover;
    case Permission::kOperate:
      return r == Role::kOperator;
    case Permission::kApprove:
      return r == Role::kApprover;
    case Permission::kAgent:
      return r == Role::kAgent;
  }
  return false;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Authorizer>> Authorizer::FromConfig(const v1::RolesConfig& config,
                                                                   const std::string& source) {
  std::vector<std::pair<std::string, Role>> bindings;
  for (int i = 0; i < config.binding_size(); ++i) {
    const v1::RoleBinding& b = config.binding(i);
    Role role;
    if (b.role() == "viewer") {
      role = Role::kViewer;
    } else if (b.role() == "operator") {
      role = Role::kOperator;
    } else if (b.role() == "approver") {
      role = Role::kApprover;
    } else if (b.role() == "agent") {
      role = Role::kAgent;
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat(source, ": binding[", i, "]: unknown role \"", b.role(),
                       "\" (want viewer, operator, approver or agent)"));
    }
    if (b.identity_size() == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(source, ": binding[", i, "] (", b.role(), ") names no identity"));
    }
    for (int j = 0; j < b.identity_size(); ++j) {
      if (b.identity(j).empty()) {
        return absl::InvalidArgumentError(
            absl::StrCat(source, ": binding[", i, "].identity[", j, "] is empty"));
      }
      // A bare "*" matches every certificate the CA ever signed (agents'
      // included): as operator or approver it would let any of them change
      // the fabric or approve changes. Name the people (or a prefix).
      if (b.identity(j) == "*" && (role == Role::kOperator || role == Role::kApprover)) {
        return absl::InvalidArgumentError(absl::StrCat(
            source, ": binding[", i, "].identity[", j, "] is \"*\": the ", b.role(),
            " role cannot be granted to every identity; list the identities, or a prefix such "
            "as \"neteng-*\""));
      }
      bindings.emplace_back(b.identity(j), role);
    }
  }
  return std::unique_ptr<Authorizer>(new Authorizer(std::move(bindings)));
}

absl::StatusOr<std::unique_ptr<Authorizer>> Authorizer::Load(const std::string& path) {
  v1::RolesConfig config;
  if (absl::Status s = ReadTextProtoFile(path, &config); !s.ok()) return s;
  return FromConfig(config, path);
}

absl::StatusOr<Permission> Authorizer::PermissionOf(absl::string_view method) {
  static constexpr absl::string_view kRead[] = {
      "ListHosts",    "GetHost",   "FleetSummary", "ListAudit", "VerifyAudit", "Watch",
      "ListPolicies", "GetPolicy", "ListChanges",  "GetChange", "GetCampaign", "ListCampaigns",
  };
  static constexpr absl::string_view kOperate[] = {
      "ApplyPolicy",   "ProposeChange", "Rollback",        "Abort",      "RehearseChange",
      "StartCampaign", "StopCampaign",  "SetDesiredState", "ForgetHost",
  };
  static constexpr absl::string_view kApprove[] = {"Approve", "Reject", "ApproveCampaign"};
  for (absl::string_view m : kRead) {
    if (m == method) return Permission::kRead;
  }
  for (absl::string_view m : kOperate) {
    if (m == method) return Permission::kOperate;
  }
  for (absl::string_view m : kApprove) {
    if (m == method) return Permission::kApprove;
  }
  if (method == "Connect") return Permission::kAgent;
  return absl::NotFoundError(absl::StrCat("no permission is defined for method ", method));
}

bool Authorizer::HasRole(const std::string& identity, Role role) const {
  for (const auto& [pattern, r] : bindings_) {
    if (r == role && Matches(pattern, identity)) return true;
  }
  return false;
}

Authorizer::OtherApprovers Authorizer::ApproversBesides(const std::string& proposer) const {
  OtherApprovers out;
  for (const auto& [pattern, r] : bindings_) {
    if (r != Role::kApprover) continue;
    if (!pattern.empty() && pattern.back() == '*') {
      out.pattern = true;
    } else if (pattern != proposer &&
               std::find(out.exact.begin(), out.exact.end(), pattern) == out.exact.end()) {
      out.exact.push_back(pattern);
    }
  }
  return out;
}

absl::Status Authorizer::Check(const Identity& who, absl::string_view method) const {
  if (!who.authenticated) {
    return absl::PermissionDeniedError(absl::StrCat(
        method, ": the caller has no verified certificate identity (declared \"", who.name, "\")"));
  }
  absl::StatusOr<Permission> p = PermissionOf(method);
  if (!p.ok()) return absl::PermissionDeniedError(p.status().message());
  for (const auto& [pattern, r] : bindings_) {
    if (Grants(r, *p) && Matches(pattern, who.name)) return absl::OkStatus();
  }
  return absl::PermissionDeniedError(absl::StrCat("identity \"", who.name, "\" may not call ",
                                                  method, ": it needs the role ", Needed(*p),
                                                  " in the controller's --roles_file"));
}

}  // namespace rocetune::controller
