// tuning start|approve|show|stop.
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "cli/campaign_view.h"
#include "cli/commands.h"
#include "cli/output.h"

namespace rocetune::cli {
namespace {

int PrintCampaign(Context& ctx, const v1::Campaign& c, const char* verb) {
  if (ctx.json()) {
    ctx.PrintJson(c);
  } else {
    ctx.out() << (ctx.dry_run() ? "dry run: would be " : "") << verb << ": " << c.id() << "  "
              << v1::Campaign::State_Name(c.state()) << "  policy " << c.policy_name() << "@"
              << OrDash(c.policy_version().substr(0, 12)) << "  budget " << c.trial_budget()
              << " trials  approvals " << c.approvals_size() << "/"
              << std::max(c.approvals_required(), 1) << "\n";
  }
  return kExitOk;
}

int Start(Context& ctx, const std::vector<std::string>& args) {
  if (ctx.args().Get("reason").empty()) {
    return ctx.UsageError("--reason is required (it goes into the audit log)");
  }
  v1::StartCampaignRequest req;
  size_t at = args[0].rfind('@');
  req.set_policy_name(args[0].substr(0, at));
  if (at != std::string::npos) req.set_policy_version(args[0].substr(at + 1));
  if (ctx.args().Has("budget")) {
    uint32_t budget = 0;
    if (!absl::SimpleAtoi(ctx.args().Get("budget"), &budget) || budget == 0) {
      return ctx.UsageError("--budget: want a positive number of trials");
    }
    req.set_trial_budget(budget);
  }
  req.set_reason(ctx.args().Get("reason"));
  req.set_dry_run(ctx.dry_run());
  v1::Campaign c;
  int rc = ctx.Call("StartCampaign", [&](grpc::ClientContext* cc) {
    return ctx.client()->stub().StartCampaign(cc, req, &c);
  });
  return rc == kExitOk ? PrintCampaign(ctx, c, "proposed campaign") : rc;
}

int Approve(Context& ctx, const std::vector<std::string>& args) {
  v1::ChangeActionRequest req;
  req.set_id(args[0]);
  req.set_reason(ctx.args().Get("reason"));
  req.set_dry_run(ctx.dry_run());
  v1::Campaign c;
  int rc = ctx.Call("ApproveCampaign", [&](grpc::ClientContext* cc) {
    return ctx.client()->stub().ApproveCampaign(cc, req, &c);
  });
  return rc == kExitOk ? PrintCampaign(ctx, c, "approved") : rc;
}

int Stop(Context& ctx, const std::vector<std::string>& args) {
  v1::ChangeActionRequest req;
  req.set_id(args[0]);
  req.set_reason(ctx.args().Get("reason"));
  req.set_dry_run(ctx.dry_run());
  v1::Campaign c;
  int rc = ctx.Call("StopCampaign", [&](grpc::ClientContext* cc) {
    return ctx.client()->stub().StopCampaign(cc, req, &c);
  });
  return rc == kExitOk ? PrintCampaign(ctx, c, "stopped") : rc;
}

int Show(Context& ctx, const std::vector<std::string>& args) {
  if (args.empty()) {
    v1::ListCampaignsResponse r;
    int rc = ctx.Call("ListCampaigns", [&](grpc::ClientContext* cc) {
      return ctx.client()->stub().ListCampaigns(cc, v1::ListCampaignsRequest(), &r);
    });
    if (rc != kExitOk) return rc;
    if (ctx.json()) {
      ctx.PrintJson(r);
    } else {
      ctx.out() << RenderCampaignList(r, ctx.now());
    }
    return kExitOk;
  }
  v1::GetCampaignRequest req;
  req.set_id(args[0]);
  v1::Campaign c;
  int rc = ctx.Call("GetCampaign", [&](grpc::ClientContext* cc) {
    return ctx.client()->stub().GetCampaign(cc, req, &c);
  });
  if (rc != kExitOk) return rc;
  if (ctx.json()) {
    ctx.PrintJson(c);
  } else {
    ctx.out() << RenderCampaign(c, ctx.now());
  }
  return kExitOk;
}

}  // namespace

std::vector<CommandSpec> TuningCommands() {
  return {
      {{"tuning", "start"},
       "POLICY[@VERSION]",
       "propose a tuning campaign (trials run canary-only once approved)",
       {"budget", "reason"},
       true,
       1,
       1,
       false,
       Start},
      {{"tuning", "approve"}, "ID", "approve a campaign", {"reason"}, true, 1, 1, false, Approve},
      {{"tuning", "show"},
       "[ID]",
       "one campaign's trials and best so far, or every campaign",
       {},
       false,
       0,
       1,
       false,
       Show},
      {{"tuning", "stop"}, "ID", "stop a campaign", {"reason"}, true, 1, 1, false, Stop},
  };
}

}  // namespace rocetune::cli
