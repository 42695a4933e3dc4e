#ifndef ROCETUNE_CLI_AUDIT_VIEW_H_
#define ROCETUNE_CLI_AUDIT_VIEW_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "rocetune/v1/admin.pb.h"

namespace rocetune::cli {

// --since: a duration back from `now` ("90m", "1h30m") or an RFC 3339 time
// ("2024-05-01T12:00:00Z"); returns unix nanoseconds. kInvalidArgument otherwise.
absl::StatusOr<int64_t> ParseSince(const std::string& text, absl::Time now);

// The audit rows as a table, each followed by its values ("host device
// parameter: old -> new"), an "(unauthenticated)" marker on actors not
// verified by mTLS, and the next page's token when there is one.
std::string RenderAudit(const v1::ListAuditResponse& response);

}  // namespace rocetune::cli

#endif  // ROCETUNE_CLI_AUDIT_VIEW_H_
