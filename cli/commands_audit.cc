// audit, audit verify.
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "cli/audit_view.h"
#include "cli/commands.h"
#include "cli/output.h"

namespace rocetune::cli {
namespace {

int Audit(Context& ctx, const std::vector<std::string>&) {
  const ParsedArgs& a = ctx.args();
  v1::ListAuditRequest req;
  req.set_newest_first(true);
  uint32_t limit = 50;
  if (a.Has("limit") && (!absl::SimpleAtoi(a.Get("limit"), &limit) || limit == 0)) {
    return ctx.UsageError("--limit: want a positive integer");
  }
  req.set_limit(limit);
  if (a.Has("page")) {
    int64_t before = 0;
    if (!absl::SimpleAtoi(a.Get("page"), &before) || before <= 0) {
      return ctx.UsageError("--page: want the token printed by the previous page");
    }
    req.set_before_id(before);
  }
  req.set_host_id(a.Get("host"));
  req.set_change_id(a.Get("change"));
  if (a.Has("since")) {
    absl::StatusOr<int64_t> since = ParseSince(a.Get("since"), ctx.now());
    if (!since.ok()) return ctx.UsageError(std::string(since.status().message()));
    req.set_since_unix_nanos(*since);
  }
  v1::ListAuditResponse r;
  int rc = ctx.Call("ListAudit", [&](grpc::ClientContext* c) {
    return ctx.client()->stub().ListAudit(c, req, &r);
  });
  if (rc != kExitOk) return rc;
  if (ctx.json()) {
    ctx.PrintJson(r);
    return kExitOk;
  }
  ctx.out() << RenderAudit(r);
  return kExitOk;
}

int AuditVerify(Context& ctx, const std::vector<std::string>&) {
  v1::VerifyAuditResponse r;
  int rc = ctx.Call("VerifyAudit", [&](grpc::ClientContext* c) {
    return ctx.client()->stub().VerifyAudit(c, v1::VerifyAuditRequest(), &r);
  });
  if (rc != kExitOk) return rc;
  if (ctx.json()) {
    ctx.PrintJson(r);
  } else if (r.ok()) {
    ctx.out() << "audit chain ok: " << r.rows() << " rows verified\n";
  } else {
    ctx.out() << "audit chain BROKEN at row " << r.first_bad_id() << ": " << r.problem() << " ("
              << r.rows() << " rows)\n";
  }
  return r.ok() ? kExitOk : kExitError;
}

}  // namespace

std::vector<CommandSpec> AuditCommands() {
  return {
      {{"audit"},
       "",
       "the audit log, newest first, with values old -> new",
       {"host", "change", "since", "limit", "page"},
       false,
       0,
       0,
       false,
       Audit},
      {{"audit", "verify"},
       "",
       "check the audit log's hash chain (exit 1 when broken)",
       {},
       false,
       0,
       0,
       false,
       AuditVerify},
  };
}

}  // namespace rocetune::cli
