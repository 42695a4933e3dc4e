#ifndef ROCETUNE_DAEMON_ADDRESS_H_
#define ROCETUNE_DAEMON_ADDRESS_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace rocetune {

// Resolves a "host:port" / "[v6]:port" address and returns it with the host
// as a numeric address ("127.0.0.1:7070", "[::1]:7070"), so that the caller
// connects to or binds exactly what was checked. kFailedPrecondition when the
// name does not resolve or any of its addresses is not loopback
// (127.0.0.0/8, ::1); kInvalidArgument when it is not host:port. `flag` names
// the setting in messages.
absl::StatusOr<std::string> ResolveLoopback(const std::string& address, const std::string& flag);

// A host id names a host in the controller's store, audit rows, metrics
// labels and file names: a hostname-like token of 1..253 characters from
// [A-Za-z0-9._-] in dot-separated labels of 1..63, each starting with a
// letter or digit (so no "/", "..", leading dot or space can reach a path
// or a label). kInvalidArgument names the problem and quotes (a bounded,
// escaped prefix of) the id.
absl::Status CheckHostId(const std::string& id);

}  // namespace rocetune

#endif  // ROCETUNE_DAEMON_ADDRESS_H_
