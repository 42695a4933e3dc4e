#include "controller/admin/identity.h"

#include <string>

#include "absl/strings/ascii.h"
#include "grpcpp/security/auth_context.h"

namespace rocetune::controller {
namespace {

bool ValidName(const std::string& s) {
  if (s.empty() || s.size() > 64) return false;
  for (char c : s) {
    if (!absl::ascii_isgraph(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

}  // namespace

Identity IdentityOf(const grpc::ServerContext& ctx) {
  Identity id;
  std::shared_ptr<const grpc::AuthContext> auth = ctx.auth_context();
  if (auth != nullptr && auth->IsPeerAuthenticated()) {
    for (const grpc::string_ref& name : auth->GetPeerIdentity()) {
      id.name.assign(name.data(), name.size());
      id.authenticated = true;
      return id;
    }
  }
  const auto& md = ctx.client_metadata();
  auto it = md.find(kActorMetadataKey);
  if (it == md.end()) {
    id.name = "anonymous";
    return id;
  }
  std::string declared(it->second.data(), it->second.size());
  id.name = ValidName(declared) ? declared : "invalid-actor";
  return id;
}

}  // namespace rocetune::controller
