#include "cli/campaign_view.h"

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

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

// The trial's drift-corrected ratio with its 90% interval: "0.912 [0.85, 0.98]".
std::string Objective(const v1::Trial& t) {
  if (t.objective_ratio() == 0) return "-";
  if (t.objective_lower() <= 0 || t.objective_upper() <= 0) return Ratio(t.objective_ratio());
  return absl::StrFormat("%.3f [%.2f, %.2f]", t.objective_ratio(), t.objective_lower(),
                         t.objective_upper());
}

std::string Share(double x) { return x <= 0 ? "-" : absl::StrFormat("%.1f%%", 100 * x); }

std::string Outcome(const v1::Trial& t) {
  std::string out = OrDash(t.outcome());
  if (t.confirms() != 0 && t.retry_of() == 0) {
    absl::StrAppend(&out, " (confirms ", t.confirms(), ")");
  }
  if (t.retry_of() != 0) absl::StrAppend(&out, " (retry of ", t.retry_of(), ")");
  return out;
}

// The search trial that found the campaign's best values (the last improved
// one with them) and the newest trial that confirms it (nullptr when none).
std::pair<const v1::Trial*, const v1::Trial*> WinnerAndConfirmation(const v1::Campaign& c) {
  const v1::Trial* winner = nullptr;
  const v1::Trial* confirmation = nullptr;
  const std::map<std::string, int64_t> best(c.best().begin(), c.best().end());
  for (const v1::Trial& tr : c.trials()) {
    if (tr.confirms() == 0 && tr.outcome() == "improved" &&
        std::map<std::string, int64_t>(tr.knobs().begin(), tr.knobs().end()) == best) {
      winner = &tr;
    }
  }
  for (const v1::Trial& tr : c.trials()) {
    if (winner != nullptr && tr.confirms() == winner->index()) confirmation = &tr;
  }
  return {winner, confirmation};
}

// The search's estimate of the winner and, once run, its confirmation's.
std::string Estimates(const v1::Campaign& c) {
  const auto [winner, confirmation] = WinnerAndConfirmation(c);
  if (winner == nullptr) return "";
  std::string out = absl::StrCat("search      ", Objective(*winner), " (trial ", winner->index(),
                                 "; the best of the search, measured once)\n");
  if (confirmation == nullptr) return out;
  absl::StrAppend(&out, "confirmation ", Objective(*confirmation), " (trial ",
                  confirmation->index(), ", ", confirmation->outcome(), "; ",
                  confirmation->canary_hosts(), " canary members, ",
                  confirmation->fresh_canary_hosts(), " of them fresh)\n");
  return out;
}

// Trials that count against the budget: all but HOLD retries and confirmations.
int BudgetedTrials(const v1::Campaign& c) {
  int n = 0;
  for (const v1::Trial& tr : c.trials()) n += tr.retry_of() == 0 && tr.confirms() == 0 ? 1 : 0;
  return n;
}

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
  // A HOLD trial's retry and a confirmation do not count against the budget.
  int retries = 0, confirmations = 0;
  for (const v1::Trial& tr : c.trials()) {
    retries += tr.retry_of() != 0 ? 1 : 0;
    confirmations += tr.confirms() != 0 && tr.retry_of() == 0 ? 1 : 0;
  }
  std::vector<std::string> extra;
  if (retries > 0) extra.push_back(absl::StrCat(retries, " retried with a longer bake"));
  if (confirmations > 0) {
    extra.push_back(absl::StrCat(confirmations, " confirmation", confirmations == 1 ? "" : "s"));
  }
  absl::StrAppend(&out, "trials      ", BudgetedTrials(c), " of ", c.trial_budget(),
                  extra.empty() ? "" : absl::StrCat(" (and ", absl::StrJoin(extra, ", "), ")"),
                  "\n");
  absl::StrAppend(&out, "start       ", FormatKnobs(c.start()), "\n");
  const v1::Trial* confirmation = WinnerAndConfirmation(c).second;
  absl::StrAppend(&out, "best        ", FormatKnobs(c.best()), "  objective ratio ",
                  Ratio(c.best_objective_ratio()),
                  confirmation != nullptr && confirmation->outcome() != "confirmed" &&
                          confirmation->outcome() != "running"
                      ? "  (not confirmed)"
                      : "",
                  "\n");
  absl::StrAppend(&out, Estimates(c));
  if (!c.promotion_change_id().empty()) {
    absl::StrAppend(&out, "promotion   ", c.promotion_change_id(), "\n");
  }
  if (!c.note().empty()) absl::StrAppend(&out, "note        ", c.note(), "\n");
  if (c.trials_size() == 0) return out;
  // The best trial: the improved search trial with the lowest objective ratio.
  int best = -1;
  for (int i = 0; i < c.trials_size(); ++i) {
    const v1::Trial& t = c.trials(i);
    if (t.outcome() != "improved" || t.confirms() != 0 || t.objective_ratio() <= 0) continue;
    if (best < 0 || t.objective_ratio() < c.trials(best).objective_ratio()) best = i;
  }
  Table t({"  TRIAL", "KNOBS", "OUTCOME", "OBJECTIVE [90% CI]", "MIN GAIN", "OWN SHIFT", "BAKE",
           "CONSTRAINTS", "CHANGE", "TIME", "NOTE"});
  for (int i = 0; i < c.trials_size(); ++i) {
    const v1::Trial& tr = c.trials(i);
    t.AddRow({absl::StrCat(i == best ? "* " : "  ", tr.index()), FormatKnobs(tr.knobs()),
              Outcome(tr), Objective(tr), Share(tr.min_improvement()), Ratio(tr.own_shift_ratio()),
              tr.bake_seconds() == 0 ? "-" : absl::StrCat(tr.bake_seconds(), "s"),
              Constraints(tr.constraints()), OrDash(tr.change_id()),
              FormatTimestamp(tr.unix_nanos()), tr.note()});
  }
  absl::StrAppend(&out, t.Render());
  if (best >= 0) absl::StrAppend(&out, "  * best so far\n");
  absl::StrAppend(&out,
                  "  OBJECTIVE: the canary-versus-control difference in differences of the "
                  "objective's p99 (1 = no effect); OWN SHIFT: the canary's own after/before, not "
                  "drift-corrected, not scored; a confirmation re-measures the winner against the "
                  "start values on fresh canary members and only a confirmed winner is proposed; "
                  "its MIN GAIN is the smallest gain worth a fleet-wide change\n");
  return out;
}

std::string RenderCampaignList(const v1::ListCampaignsResponse& r, absl::Time now) {
  if (r.campaigns_size() == 0) return "no campaigns\n";
  Table t({"ID", "STATE", "POLICY", "TRIALS", "BEST RATIO", "BEST KNOBS", "PROPOSER", "CREATED"});
  for (const v1::Campaign& c : r.campaigns()) {
    t.AddRow({c.id(), StateName(c), c.policy_name(),
              absl::StrCat(BudgetedTrials(c), "/", c.trial_budget()),
              Ratio(c.best_objective_ratio()), FormatKnobs(c.best()), OrDash(c.proposer()),
              FormatAgo(c.created_unix_nanos(), now)});
  }
  return t.Render();
}

}  // namespace rocetune::cli
