#ifndef ROCETUNE_CLI_CHANGE_VIEW_H_
#define ROCETUNE_CLI_CHANGE_VIEW_H_

#include <string>

#include "absl/time/time.h"
#include "rocetune/v1/admin.pb.h"

namespace rocetune::cli {

// "CANARY", "STAGE 2", ...
std::string ChangeStateText(const v1::Change& change);

// One line: id, state, policy@version, knobs, approvals, hosts.
std::string ChangeSummary(const v1::Change& change);

// The changes of one page as a table, with the next page's token.
// `wide` (-o wide) adds the policy version, the approvers and the reason.
std::string RenderChangeList(const v1::ListChangesResponse& response, absl::Time now,
                             bool wide = false);

// Everything about one change: header, knobs, approvals, transitions, the
// per-host target summary, the rehearsal, every verdict with its evidence and
// the latest verdict's canary and control latency histograms side by side.
std::string RenderChange(const v1::Change& change, absl::Time now);

// One verdict: outcome, rule, summary, group and metric evidence tables,
// dropped hosts.
std::string RenderVerdict(const v1::Verdict& verdict);

// The verdict's "canary" and "control" groups' RTT sketches on shared bins
// ("" when the verdict has neither group).
std::string RenderVerdictHistogram(const v1::Verdict& verdict);

// Current vs proposed predictions side by side.
std::string RenderRehearsal(const v1::Rehearsal& rehearsal);

}  // namespace rocetune::cli

#endif  // ROCETUNE_CLI_CHANGE_VIEW_H_
