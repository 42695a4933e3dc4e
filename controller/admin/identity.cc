#include "controller/admin/identity.h"

#include <string>
#include <vector>

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
    // The certificate's CN; gRPC's peer identity (its SANs, else the CN) when
    // the subject has none.
    std::vector<grpc::string_ref> names = auth->FindPropertyValues("x509_common_name");
    if (names.empty()) names = auth->GetPeerIdentity();
    if (!names.empty()) {
      std::string name(names.front().data(), names.front().size());
      id.name = ValidName(name) ? name : "invalid-identity";
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
