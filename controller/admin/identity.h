#ifndef ROCETUNE_CONTROLLER_ADMIN_IDENTITY_H_
#define ROCETUNE_CONTROLLER_ADMIN_IDENTITY_H_

#include <string>

#include "grpcpp/server_context.h"

namespace rocetune::controller {

// Who made an admin call. The one seam every admin call and audit row takes
// its actor from.
struct Identity {
  std::string name;
  // True only when the name comes from a verified credential (an mTLS client
  // certificate). A loopback caller without one declares its name in the
  // metadata key kActorMetadataKey and is recorded as unauthenticated.
  bool authenticated = false;
};

inline constexpr char kActorMetadataKey[] = "rocetune-actor";

// The identity of the caller of `ctx`: the client certificate's common name
// (its first SAN when the subject has no CN) when the channel is
// authenticated, else the declared actor ("anonymous" when none).
// Declared names are limited to 64 printable characters; anything else is
// replaced by "invalid-actor".
Identity IdentityOf(const grpc::ServerContext& ctx);

}  // namespace rocetune::controller

#endif  // ROCETUNE_CONTROLLER_ADMIN_IDENTITY_H_
