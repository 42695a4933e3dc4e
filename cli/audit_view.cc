#include "cli/audit_view.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "cli/output.h"

namespace rocetune::cli {
namespace {

std::string Value(const std::string& v, const char* empty) { return v.empty() ? empty : v; }

}  // namespace

absl::StatusOr<int64_t> ParseSince(const std::string& text, absl::Time now) {
  absl::Duration d;
  if (absl::ParseDuration(text, &d)) {
    if (d < absl::ZeroDuration()) {
      return absl::InvalidArgumentError(absl::StrCat("--since=", text, ": negative duration"));
    }
    return absl::ToUnixNanos(now - d);
  }
  absl::Time t;
  std::string error;
  if (absl::ParseTime(absl::RFC3339_full, text, &t, &error)) return absl::ToUnixNanos(t);
  return absl::InvalidArgumentError(
      absl::StrCat("--since=", text,
                   ": want a duration (90m, 1h30m) or an RFC 3339 time (2024-05-01T12:00:00Z)"));
}

std::string RenderAudit(const v1::ListAuditResponse& response) {
  if (response.entries_size() == 0) return "no audit rows\n";
  Table t({"ID", "TIME", "ACTOR", "ACTION", "SUBJECT", "CHANGE", "REASON", "DETAIL"});
  for (const v1::AuditEntry& e : response.entries()) {
    std::string actor =
        e.authenticated() ? e.actor() : absl::StrCat(e.actor(), " (unauthenticated)");
    t.AddRow({absl::StrCat(e.id()), FormatTimestamp(e.unix_nanos()), OrDash(actor),
              OrDash(e.action()), OrDash(e.subject()), OrDash(e.change_id()), OrDash(e.reason()),
              e.detail()});
    for (const v1::ValueChange& v : e.values()) {
      t.AddNote(absl::StrCat("        ", v.host_id(), " ", v.device(), " ", v.parameter(), ": ",
                             Value(v.old_value(), "(unset)"), " -> ",
                             Value(v.new_value(), "(removed)")));
    }
  }
  std::string out = t.Render();
  if (response.next_before_id() != 0) {
    absl::StrAppend(&out, "more: --page=", response.next_before_id(), "\n");
  }
  return out;
}

}  // namespace rocetune::cli
