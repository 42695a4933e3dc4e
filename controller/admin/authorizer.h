#ifndef ROCETUNE_CONTROLLER_ADMIN_AUTHORIZER_H_
#define ROCETUNE_CONTROLLER_ADMIN_AUTHORIZER_H_

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "controller/admin/identity.h"
#include "rocetune/v1/config.pb.h"

namespace rocetune::controller {

enum class Role { kViewer, kOperator, kApprover, kAgent };

// What a call needs.
enum class Permission {
  kRead,     // viewer, operator, approver
  kOperate,  // operator
  kApprove,  // approver
  kAgent,    // agent (the Connect stream)
};

// Maps authenticated identities to roles (a RolesConfig) and decides calls.
// Immutable after construction; safe to share between threads.
class Authorizer {
 public:
  // kInvalidArgument naming `source` and the binding for an unknown role or an
  // empty identity.
  static absl::StatusOr<std::unique_ptr<Authorizer>> FromConfig(const v1::RolesConfig& config,
                                                                const std::string& source);
  // Reads a text-format RolesConfig file.
  static absl::StatusOr<std::unique_ptr<Authorizer>> Load(const std::string& path);

  // The permission an AdminService method ("Approve", "ListHosts", ...) or
  // "Connect" needs; NOT_FOUND for a method this table does not know (which
  // is then refused: new methods must be added here).
  static absl::StatusOr<Permission> PermissionOf(absl::string_view method);

  bool HasRole(const std::string& identity, Role role) const;

  // The identities other than `proposer` that hold the approver role, as
  // written in the bindings (exact identities), and whether a prefix pattern
  // ("ops-*") grants it too, which can match any number of identities.
  struct OtherApprovers {
    std::vector<std::string> exact;
    bool pattern = false;
  };
  OtherApprovers ApproversBesides(const std::string& proposer) const;

  // OK when `who` is authenticated and holds a role granting `method`;
  // PERMISSION_DENIED naming the identity, the method and the roles that
  // would allow it otherwise.
  absl::Status Check(const Identity& who, absl::string_view method) const;

 private:
  explicit Authorizer(std::vector<std::pair<std::string, Role>> bindings)
      : bindings_(std::move(bindings)) {}
  // (identity pattern, role)
  const std::vector<std::pair<std::string, Role>> bindings_;
};

}  // namespace rocetune::controller

#endif  // ROCETUNE_CONTROLLER_ADMIN_AUTHORIZER_H_
