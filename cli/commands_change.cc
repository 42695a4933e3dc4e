// change propose|list|show|approve|reject|rollback|abort|rehearse, and changes.
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "cli/change_view.h"
#include "cli/commands.h"
#include "cli/output.h"

namespace rocetune::cli {
namespace {

// "knob=value" arguments into `out`; false after a usage error.
bool ParseKnobs(Context& ctx, const std::vector<std::string>& args, size_t first,
                google::protobuf::Map<std::string, int64_t>* out) {
  for (size_t i = first; i < args.size(); ++i) {
    size_t eq = args[i].find('=');
    int64_t value = 0;
    if (eq == std::string::npos || eq == 0 ||
        !absl::SimpleAtoi(absl::string_view(args[i]).substr(eq + 1), &value)) {
      ctx.UsageError(absl::StrCat("\"", args[i], "\": want KNOB=INTEGER"));
      return false;
    }
    const std::string name = args[i].substr(0, eq);
    // A map keeps only the last value: a knob given twice is a mistake.
    for (size_t j = first; j < i; ++j) {
      if (args[j].compare(0, eq + 1, args[i], 0, eq + 1) == 0) {
        ctx.UsageError(
            absl::StrCat("knob ", name, " given twice (\"", args[j], "\" and \"", args[i], "\")"));
        return false;
      }
    }
    (*out)[name] = value;
  }
  return true;
}

bool RequireReason(Context& ctx) {
  if (!ctx.args().Get("reason").empty()) return true;
  ctx.UsageError("--reason is required (it goes into the audit log)");
  return false;
}

int PrintChange(Context& ctx, const v1::Change& c, const char* verb) {
  if (ctx.json()) {
    ctx.PrintJson(c);
  } else {
    ctx.out() << (ctx.dry_run() ? "dry run: would be " : "") << verb << ": " << ChangeSummary(c)
              << "\n";
  }
  return kExitOk;
}

int Propose(Context& ctx, const std::vector<std::string>& args) {
  if (!RequireReason(ctx)) return kExitUsage;
  v1::ProposeChangeRequest req;
  size_t at = args[0].rfind('@');
  req.set_policy_name(args[0].substr(0, at));
  if (at != std::string::npos) req.set_policy_version(args[0].substr(at + 1));
  if (!ParseKnobs(ctx, args, 1, req.mutable_knobs())) return kExitUsage;
  req.set_reason(ctx.args().Get("reason"));
  req.set_override_rejected(ctx.args().Get("override_rejected"));
  req.set_dry_run(ctx.dry_run());
  v1::Change c;
  int rc = ctx.Call("ProposeChange", [&](grpc::ClientContext* cc) {
    return ctx.client()->stub().ProposeChange(cc, req, &c);
  });
  return rc == kExitOk ? PrintChange(ctx, c, "proposed") : rc;
}

int List(Context& ctx, const std::vector<std::string>&) {
  const ParsedArgs& a = ctx.args();
  v1::ListChangesRequest req;
  uint32_t page_size = 50;
  if (a.Has("page_size") && (!absl::SimpleAtoi(a.Get("page_size"), &page_size) || page_size == 0)) {
    return ctx.UsageError("--page_size: want a positive integer");
  }
  req.set_page_size(page_size);
  req.set_page_token(a.Get("page"));
  req.set_campaign_id(a.Get("campaign"));
  for (absl::string_view s : absl::StrSplit(a.Get("state"), ',', absl::SkipWhitespace())) {
    v1::ChangeState state;
    std::string name = absl::AsciiStrToUpper(absl::StripAsciiWhitespace(s));
    if (!v1::ChangeState_Parse(name, &state) || state == v1::CHANGE_STATE_UNSPECIFIED) {
      return ctx.UsageError(absl::StrCat(
          "--state: unknown state \"", s,
          "\" (PROPOSED, APPROVED, CANARY, STAGE, DONE, REJECTED, ROLLED_BACK, ABORTED)"));
    }
    req.add_states(state);
  }
  v1::ListChangesResponse r;
  int rc = ctx.Call("ListChanges", [&](grpc::ClientContext* c) {
    return ctx.client()->stub().ListChanges(c, req, &r);
  });
  if (rc != kExitOk) return rc;
  if (ctx.json()) {
    ctx.PrintJson(r);
  } else {
    ctx.out() << RenderChangeList(r, ctx.now(), ctx.wide());
  }
  return kExitOk;
}

int Show(Context& ctx, const std::vector<std::string>& args) {
  v1::GetChangeRequest req;
  req.set_id(args[0]);
  v1::Change c;
  int rc = ctx.Call("GetChange", [&](grpc::ClientContext* cc) {
    return ctx.client()->stub().GetChange(cc, req, &c);
  });
  if (rc != kExitOk) return rc;
  if (ctx.json()) {
    ctx.PrintJson(c);
  } else {
    ctx.out() << RenderChange(c, ctx.now());
  }
  return kExitOk;
}

using ActionFn = grpc::Status (v1::AdminService::Stub::*)(grpc::ClientContext*,
                                                          const v1::ChangeActionRequest&,
                                                          v1::Change*);

CommandFn Action(const char* method, ActionFn fn, const char* verb) {
  return [method, fn, verb](Context& ctx, const std::vector<std::string>& args) {
    if (!RequireReason(ctx)) return kExitUsage;
    v1::ChangeActionRequest req;
    req.set_id(args[0]);
    req.set_reason(ctx.args().Get("reason"));
    req.set_dry_run(ctx.dry_run());
    v1::Change c;
    int rc = ctx.Call(
        method, [&](grpc::ClientContext* cc) { return (ctx.client()->stub().*fn)(cc, req, &c); });
    return rc == kExitOk ? PrintChange(ctx, c, verb) : rc;
  };
}

int Rehearse(Context& ctx, const std::vector<std::string>& args) {
  std::string path = ctx.args().Get("scenario");
  if (path.empty()) return ctx.UsageError("--scenario=FILE is required");
  v1::RehearseChangeRequest req;
  req.set_id(args[0]);
  if (absl::Status s = ReadFile(path, req.mutable_scenario_text()); !s.ok()) {
    return ctx.Error(std::string(s.message()));
  }
  req.set_scenario_name(path);
  v1::Rehearsal r;
  int rc = ctx.Call("RehearseChange", [&](grpc::ClientContext* cc) {
    return ctx.client()->stub().RehearseChange(cc, req, &r);
  });
  if (rc != kExitOk) return rc;
  if (ctx.json()) {
    ctx.PrintJson(r);
  } else {
    ctx.out() << "rehearsal of " << args[0] << ": " << RenderRehearsal(r);
  }
  return kExitOk;
}

}  // namespace

std::vector<CommandSpec> ChangeCommands() {
  using Stub = v1::AdminService::Stub;
  return {
      {{"change", "propose"},
       "POLICY[@VERSION] [KNOB=VALUE...]",
       "propose a change of knob values under a policy",
       {"reason", "override_rejected"},
       true,
       1,
       -1,
       false,
       Propose},
      {{"change", "list"},
       "",
       "changes, newest first, one page",
       {"state", "campaign", "page_size", "page"},
       false,
       0,
       0,
       false,
       List},
      {{"change", "show"},
       "ID",
       "transitions, approvals, hosts, verdicts with evidence, canary vs control histogram",
       {},
       false,
       1,
       1,
       false,
       Show},
      {{"change", "approve"},
       "ID",
       "approve a proposed change",
       {"reason"},
       true,
       1,
       1,
       false,
       Action("Approve", &Stub::Approve, "approved")},
      {{"change", "reject"},
       "ID",
       "reject a proposed change",
       {"reason"},
       true,
       1,
       1,
       false,
       Action("Reject", &Stub::Reject, "rejected")},
      {{"change", "rollback"},
       "ID",
       "roll a change back to every host's previous state",
       {"reason"},
       true,
       1,
       1,
       false,
       Action("Rollback", &Stub::Rollback, "rolling back")},
      {{"change", "abort"},
       "ID",
       "stop a change where it is",
       {"reason"},
       true,
       1,
       1,
       false,
       Action("Abort", &Stub::Abort, "aborted")},
      {{"change", "rehearse"},
       "ID",
       "predict the change's effect in the simulator",
       {"scenario"},
       false,
       1,
       1,
       false,
       Rehearse},
      {{"change"}, "ID", "same as change show ID", {}, false, 1, 1, true, Show},
      {{"changes"},
       "",
       "same as change list",
       {"state", "campaign", "page_size", "page"},
       false,
       0,
       0,
       true,
       List},
  };
}

}  // namespace rocetune::cli
