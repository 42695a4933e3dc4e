#include "cli/campaign_view.h"

#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "cli/output.h"

namespace rocetune::cli {
namespace {

std::string Constraints(const google::protobuf::Map<std::string, double>& c) {
  std::map<std::string, double> sorted(c.begin(), c.end());
  if (sorted.empty()) return "-";
  std::vector<std::string> parts;
  for (const auto& [k, v] : sorted) parts.push_back(absl::StrCat(k, "=", FormatNumber(v)));
  return absl::StrJoin(parts, " ");
}

std::string Ratio(double r) { return r == 0 ? "-" : absl::StrFormat("%.3f", r); }

std::string StateName(const v1::Campaign& c) { return v1::Campaign::State_Name(c.state()); }

}  // namespace

std::string RenderCampaign(const v1::Campaign& c, absl::Time now) {
  std::string out = absl::StrCat("campaign    ", c.id(), "  ", StateName(c), "\n");
  absl::StrAppend(&out, "policy      ", c.policy_name(), "@", OrDash(c.policy_version()), "\n");
  absl::StrAppend(&out, "proposer    ", OrDash(c.proposer()), ", ",
                  FormatTimestamp(c.created_unix_nanos()), " (",
                  FormatAgo(c.created_unix_nanos(), now), ")\n");
  absl::StrAppend(&out, "reason      ", OrDash(c.reason()), "\n");
  absl::StrAppend(&out, "approvals   ", c.approvals_size(), "/",
                  std::max(c.approvals_required(), 1));
  for (const v1::Approval& a : c.approvals()) {
    absl::StrAppend(&out, "  ", a.approver(), a.authenticated() ? "" : " (unauthenticated)");
  }
  absl::StrAppend(&out, "\n");
  absl::StrAppend(&out, "trials      ", c.trials_size(), " of ", c.trial_budget(), "\n");
  absl::StrAppend(&out, "start       ", FormatKnobs(c.start()), "\n");
  absl::StrAppend(&out, "best        ", FormatKnobs(c.best()), "  objective ratio ",
                  Ratio(c.best_objective_ratio()), "\n");
  if (!c.promotion_change_id().empty()) {
    absl::StrAppend(&out, "promotion   ", c.promotion_change_id(), "\n");
  }
  if (!c.note().empty()) absl::StrAppend(&out, "note        ", c.note(), "\n");
  if (c.trials_size() == 0) return out;
  // The best trial: the improved one with the lowest objective ratio.
  int best = -1;
  for (int i = 0; i < c.trials_size(); ++i) {
    const v1::Trial& t = c.trials(i);
    if (t.outcome() != "improved" || t.objective_ratio() <= 0) continue;
    if (best < 0 || t.objective_ratio() < c.trials(best).objective_ratio()) best = i;
  }
  Table t({"  TRIAL", "KNOBS", "OUTCOME", "OBJECTIVE", "CONSTRAINTS", "CHANGE", "TIME", "NOTE"});
  for (int i = 0; i < c.trials_size(); ++i) {
    const v1::Trial& tr = c.trials(i);
    t.AddRow({absl::StrCat(i == best ? "* " : "  ", tr.index()), FormatKnobs(tr.knobs()),
              OrDash(tr.outcome()), Ratio(tr.objective_ratio()), Constraints(tr.constraints()),
              OrDash(tr.change_id()), FormatTimestamp(tr.unix_nanos()), tr.note()});
  }
  absl::StrAppend(&out, t.Render());
  if (best >= 0) absl::StrAppend(&out, "  * best so far\n");
  return out;
}

std::string RenderCampaignList(const v1::ListCampaignsResponse& r, absl::Time now) {
  if (r.campaigns_size() == 0) return "no campaigns\n";
  Table t({"ID", "STATE", "POLICY", "TRIALS", "BEST RATIO", "BEST KNOBS", "PROPOSER", "CREATED"});
  for (const v1::Campaign& c : r.campaigns()) {
    t.AddRow({c.id(), StateName(c), c.policy_name(),
              absl::StrCat(c.trials_size(), "/", c.trial_budget()), Ratio(c.best_objective_ratio()),
              FormatKnobs(c.best()), OrDash(c.proposer()), FormatAgo(c.created_unix_nanos(), now)});
  }
  return t.Render();
}

}  // namespace rocetune::cli
