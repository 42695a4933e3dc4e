#include "cli/change_view.h"

#include <map>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "cli/histogram.h"
#include "cli/output.h"

namespace rocetune::cli {
namespace {

// A confidence interval; the evidence carries 0 for a side it has no bound
// on (a one-sided test), shown as "-inf" / "inf" (positive quantities have
// no negative lower side, so a 0 there is "0").
std::string Interval(double lo, double hi, std::string (*fmt)(double)) {
  if (lo == 0 && hi == 0) return "-";
  return absl::StrCat("[", lo == 0 ? "0" : fmt(lo), ", ", hi == 0 ? "inf" : fmt(hi), "]");
}

std::string Percent(double ratio) {
  return ratio == 0 ? "-" : absl::StrFormat("%+.1f%%", 100 * (ratio - 1));
}

std::string Approvals(const v1::Change& c) {
  std::string out = absl::StrCat(c.approvals_size(), "/", std::max(c.approvals_required(), 1));
  return out;
}

bool HasSwitchDevice(const v1::ParameterSet& set) {
  for (const v1::DeviceParameters& d : set.devices()) {
    if (d.device() == "switch") return true;
  }
  return false;
}

// Switch changes (targets of device "switch") count their ToRs and the hosts
// they only measure (empty target); "" for other changes or without targets.
std::string SwitchSummary(const v1::Change& c) {
  int switches = 0, measured = 0;
  for (const v1::HostTarget& h : c.hosts()) {
    if (HasSwitchDevice(h.target()) || HasSwitchDevice(h.previous())) {
      ++switches;
    } else if (h.target().devices().empty() && h.previous().devices().empty()) {
      ++measured;
    }
  }
  if (switches == 0) return "";
  return absl::StrCat("; switches ", switches, ", measured only ", measured);
}

std::string HostsSummary(const v1::Change& c) {
  int canary = 0, control = 0, rest = 0, pushed = 0, acked = 0, rejected = 0;
  for (const v1::HostTarget& h : c.hosts()) {
    if (h.role() == v1::HostTarget::CANARY) ++canary;
    if (h.role() == v1::HostTarget::CONTROL) ++control;
    if (h.role() == v1::HostTarget::REST) ++rest;
    if (!h.pushed_version().empty()) ++pushed;
    if (!h.pushed_version().empty() && h.acked_version() == h.pushed_version()) ++acked;
    if (!h.rejected().empty()) ++rejected;
  }
  std::string out = absl::StrCat(c.hosts_size(), " (canary ", canary, ", control ", control,
                                 ", rest ", rest, "); pushed ", pushed, ", acked ", acked,
                                 ", rejected ", rejected, SwitchSummary(c));
  // After a rollback the last push of every changed host is its restore:
  // say how many hosts confirmed it, and name those that have not.
  if ((c.state() == v1::ROLLED_BACK || c.state() == v1::ABORTED) && pushed > 0) {
    std::vector<std::string> pending, failed;
    for (const v1::HostTarget& h : c.hosts()) {
      if (h.pushed_version().empty() || h.acked_version() == h.pushed_version()) continue;
      if (absl::StartsWith(h.rejected(), "restore NACK")) {
        failed.push_back(absl::StrCat(h.host_id(), " (", h.rejected(), ")"));
      } else {
        pending.push_back(h.host_id());
      }
    }
    auto list = [](std::vector<std::string> hosts) {
      if (hosts.size() > 8) {
        hosts.resize(8);
        hosts.push_back("...");
      }
      return absl::StrJoin(hosts, ", ");
    };
    absl::StrAppend(&out, "\nrestored    ", acked, " of ", pushed, " confirmed");
    if (!pending.empty()) absl::StrAppend(&out, "; pending: ", list(pending));
    if (!failed.empty()) absl::StrAppend(&out, "; failed: ", list(failed));
  }
  return out;
}

std::string StageTable(const v1::Change& c) {
  struct Row {
    int hosts = 0, pushed = 0, acked = 0, rejected = 0;
  };
  std::map<uint32_t, Row> stages;
  for (const v1::HostTarget& h : c.hosts()) {
    // Control hosts are measured, not changed, in the canary stage; rack
    // plans roll the change out to them in the later stages.
    if (h.role() == v1::HostTarget::CONTROL && h.stage() == 0) continue;
    Row& r = stages[h.stage()];
    ++r.hosts;
    if (!h.pushed_version().empty()) ++r.pushed;
    if (!h.pushed_version().empty() && h.acked_version() == h.pushed_version()) ++r.acked;
    if (!h.rejected().empty()) ++r.rejected;
  }
  Table t({"  STAGE", "HOSTS", "PUSHED", "ACKED", "REJECTED"});
  for (const auto& [stage, r] : stages) {
    t.AddRow({stage == 0 ? "  canary" : absl::StrCat("  ", stage), absl::StrCat(r.hosts),
              absl::StrCat(r.pushed), absl::StrCat(r.acked), absl::StrCat(r.rejected)});
  }
  return t.Render();
}

}  // namespace

std::string ChangeStateText(const v1::Change& c) {
  std::string s = v1::ChangeState_Name(c.state());
  if (c.state() == v1::STAGE) absl::StrAppend(&s, " ", c.stage());
  return s;
}

std::string ChangeSummary(const v1::Change& c) {
  return absl::StrCat(c.id(), "  ", ChangeStateText(c), "  policy ", c.policy_name(), "@",
                      OrDash(c.policy_version().substr(0, 12)), "  knobs ", FormatKnobs(c.knobs()),
                      "  approvals ", Approvals(c), "  hosts ", c.hosts_size());
}

std::string RenderChangeList(const v1::ListChangesResponse& r, absl::Time now, bool wide) {
  if (r.changes_size() == 0) return "no changes\n";
  std::vector<std::string> header = {"ID",        "STATE", "POLICY",       "KNOBS",  "PROPOSER",
                                     "APPROVALS", "HOSTS", "LAST VERDICT", "CREATED"};
  if (wide) {
    header.push_back("APPROVERS");
    header.push_back("REASON");
  }
  Table t(header);
  for (const v1::Change& c : r.changes()) {
    std::string verdict = "-";
    if (c.verdicts_size() > 0) {
      const v1::Verdict& v = c.verdicts(c.verdicts_size() - 1);
      verdict = absl::StrCat(v1::Verdict::Outcome_Name(v.outcome()), " (", OrDash(v.rule()), ")");
    }
    std::string id = c.id();
    if (!c.campaign_id().empty()) absl::StrAppend(&id, " [", c.campaign_id(), "#", c.trial(), "]");
    std::string policy = c.policy_name();
    if (wide) absl::StrAppend(&policy, "@", OrDash(c.policy_version().substr(0, 12)));
    std::vector<std::string> row = {id,
                                    ChangeStateText(c),
                                    policy,
                                    FormatKnobs(c.knobs()),
                                    OrDash(c.proposer()),
                                    Approvals(c),
                                    absl::StrCat(c.hosts_size()),
                                    verdict,
                                    FormatAgo(c.created_unix_nanos(), now)};
    if (wide) {
      std::vector<std::string> approvers;
      for (const v1::Approval& a : c.approvals()) approvers.push_back(a.approver());
      row.push_back(approvers.empty() ? "-" : absl::StrJoin(approvers, ","));
      row.push_back(OrDash(c.reason()));
    }
    t.AddRow(std::move(row));
  }
  std::string out = t.Render();
  if (!r.next_page_token().empty())
    absl::StrAppend(&out, "more: --page=", r.next_page_token(), "\n");
  return out;
}

std::string RenderVerdict(const v1::Verdict& v) {
  std::string out = absl::StrCat(
      v1::Verdict::Outcome_Name(v.outcome()), "  ",
      v.stage() == 0 ? "canary" : absl::StrCat("stage ", v.stage()), " look ", v.look(),
      // Past the planned looks the step is held (HOLD) until its limit.
      v.look() > v.looks() ? absl::StrCat(" (held past ", v.looks(), ")")
                           : absl::StrCat("/", v.looks()),
      "  ", FormatTimestamp(v.unix_nanos()), "  rule ", OrDash(v.rule()), "\n");
  if (!v.summary().empty()) absl::StrAppend(&out, "  ", v.summary(), "\n");
  if (v.groups_size() > 0) {
    Table t({"  GROUP", "HOSTS", "SAMPLES", "P99", "P99 CI", "P999", "GBPS/HOST", "CNP/S",
             "PFC PAUSE", "RETX/S"});
    for (const v1::GroupEvidence& g : v.groups()) {
      t.AddRow({absl::StrCat("  ", g.group()), absl::StrCat(g.hosts()), absl::StrCat(g.samples()),
                FormatSeconds(g.p99_seconds()),
                Interval(g.p99_lower_seconds(), g.p99_upper_seconds(), FormatSeconds),
                FormatSeconds(g.p999_seconds()), FormatNumber(g.throughput_gbps()),
                FormatNumber(g.cnp_per_second()), FormatNumber(g.pfc_pause_ratio()),
                FormatNumber(g.retransmits_per_second())});
    }
    absl::StrAppend(&out, t.Render());
  }
  if (v.metrics_size() > 0) {
    Table t({"  METRIC", "OUTCOME", "PAIRS", "MEAN", "SD", "T", "P", "ALPHA", "RATIO", "RATIO CI",
             "CHANGE", "NOTE"});
    for (const v1::MetricEvidence& m : v.metrics()) {
      t.AddRow({absl::StrCat("  ", m.metric()), m.outcome(), absl::StrCat(m.rack_pairs()),
                FormatNumber(m.mean()), FormatNumber(m.sd()), FormatNumber(m.t()),
                FormatNumber(m.p_value()), FormatNumber(m.alpha()), FormatNumber(m.ratio()),
                Interval(m.ratio_lower(), m.ratio_upper(), FormatNumber), Percent(m.ratio()),
                m.note()});
    }
    absl::StrAppend(&out, t.Render());
  }
  for (const std::string& d : v.dropped_hosts()) absl::StrAppend(&out, "  dropped: ", d, "\n");
  return out;
}

std::string RenderVerdictHistogram(const v1::Verdict& v) {
  const v1::GroupEvidence* canary = nullptr;
  const v1::GroupEvidence* control = nullptr;
  for (const v1::GroupEvidence& g : v.groups()) {
    if (g.group() == "canary") canary = &g;
    if (g.group() == "control") control = &g;
  }
  if (canary == nullptr && control == nullptr) return "";
  v1::Sketch empty;
  return RenderHistograms({{"canary", canary ? &canary->rtt() : &empty},
                           {"control", control ? &control->rtt() : &empty}});
}

std::string RenderRehearsal(const v1::Rehearsal& r) {
  const v1::RehearsalResult& a = r.current();
  const v1::RehearsalResult& b = r.proposed();
  Table t({"  PREDICTED", "CURRENT", "PROPOSED", "CHANGE"});
  auto ratio = [](double x, double y) { return x == 0 ? 0.0 : y / x; };
  t.AddRow({"  probe p99", FormatSeconds(a.probe_p99_seconds()),
            FormatSeconds(b.probe_p99_seconds()),
            Percent(ratio(a.probe_p99_seconds(), b.probe_p99_seconds()))});
  t.AddRow({"  probe p999", FormatSeconds(a.probe_p999_seconds()),
            FormatSeconds(b.probe_p999_seconds()),
            Percent(ratio(a.probe_p999_seconds(), b.probe_p999_seconds()))});
  t.AddRow({"  throughput Gb/s/host", FormatNumber(a.throughput_gbps()),
            FormatNumber(b.throughput_gbps()),
            Percent(ratio(a.throughput_gbps(), b.throughput_gbps()))});
  t.AddRow({"  CNP/s", FormatNumber(a.cnp_per_second()), FormatNumber(b.cnp_per_second()),
            Percent(ratio(a.cnp_per_second(), b.cnp_per_second()))});
  t.AddRow({"  PFC pause ratio", FormatNumber(a.pfc_pause_ratio()),
            FormatNumber(b.pfc_pause_ratio()),
            Percent(ratio(a.pfc_pause_ratio(), b.pfc_pause_ratio()))});
  if (a.step_time_seconds() != 0 || b.step_time_seconds() != 0) {
    t.AddRow({"  all-reduce step p99", FormatSeconds(a.step_time_seconds()),
              FormatSeconds(b.step_time_seconds()),
              Percent(ratio(a.step_time_seconds(), b.step_time_seconds()))});
  }
  if (a.incast_burst_seconds() != 0 || b.incast_burst_seconds() != 0) {
    t.AddRow({"  incast burst p99", FormatSeconds(a.incast_burst_seconds()),
              FormatSeconds(b.incast_burst_seconds()),
              Percent(ratio(a.incast_burst_seconds(), b.incast_burst_seconds()))});
  }
  return absl::StrCat("scenario ", OrDash(r.scenario()), "  ", FormatTimestamp(r.unix_nanos()),
                      r.actor().empty() ? "" : absl::StrCat(" by ", r.actor()), "\n", t.Render(),
                      r.regression() ? absl::StrCat("  REGRESSION predicted: ",
                                                    r.regression_reason().empty()
                                                        ? "p99 worse than the guard tolerates"
                                                        : r.regression_reason(),
                                                    "\n")
                                     : "  no regression predicted\n");
}

std::string RenderChange(const v1::Change& c, absl::Time now) {
  std::string out = absl::StrCat("change      ", c.id(), "  ", ChangeStateText(c), "\n");
  absl::StrAppend(&out, "policy      ", c.policy_name(), "@", OrDash(c.policy_version()), "\n");
  if (!c.campaign_id().empty()) {
    // A campaign's promotion is linked to it with no trial number.
    absl::StrAppend(&out, "campaign    ", c.campaign_id(),
                    c.trial() == 0 ? " (its promotion)" : absl::StrCat(" trial ", c.trial()),
                    c.canary_only() ? " (canary only)" : "",
                    c.bake_seconds() > 0 ? absl::StrCat(", bake ", c.bake_seconds(), " s") : "",
                    "\n");
  }
  absl::StrAppend(&out, "proposer    ", OrDash(c.proposer()),
                  c.proposer_authenticated() ? "" : " (unauthenticated)", ", ",
                  FormatTimestamp(c.created_unix_nanos()), " (",
                  FormatAgo(c.created_unix_nanos(), now), ")\n");
  absl::StrAppend(&out, "reason      ", OrDash(c.reason()), "\n");
  absl::StrAppend(&out, "knobs       ", FormatKnobs(c.knobs()), "\n");
  if (!c.design_note().empty()) absl::StrAppend(&out, "design      ", c.design_note(), "\n");
  if (c.step_started_unix_nanos() != 0) {
    absl::StrAppend(&out, "step since  ", FormatAgo(c.step_started_unix_nanos(), now), "\n");
  }
  if (c.hold_since_unix_nanos() != 0) {
    absl::StrAppend(&out, "holding     since ", FormatAgo(c.hold_since_unix_nanos(), now), "\n");
  }
  absl::StrAppend(&out, "approvals   ", Approvals(c), "\n");
  for (const v1::Approval& a : c.approvals()) {
    absl::StrAppend(&out, "  ", a.approver(), a.authenticated() ? "" : " (unauthenticated)", "  ",
                    FormatTimestamp(a.unix_nanos()), "  ", a.reason(), "\n");
  }
  if (c.transitions_size() > 0) {
    absl::StrAppend(&out, "transitions\n");
    Table t({"  TIME", "FROM", "TO", "STAGE", "ACTOR", "REASON"});
    for (const v1::ChangeTransition& tr : c.transitions()) {
      t.AddRow({absl::StrCat("  ", FormatTimestamp(tr.unix_nanos())),
                v1::ChangeState_Name(tr.from()), v1::ChangeState_Name(tr.to()),
                absl::StrCat(tr.stage()), OrDash(tr.actor()), tr.reason()});
    }
    absl::StrAppend(&out, t.Render());
  }
  absl::StrAppend(&out, "hosts       ", HostsSummary(c), "\n");
  if (c.hosts_size() > 0) absl::StrAppend(&out, StageTable(c));
  for (const v1::HostTarget& h : c.hosts()) {
    if (!h.rejected().empty())
      absl::StrAppend(&out, "  rejected on ", h.host_id(), ": ", h.rejected(), "\n");
    for (const v1::ParameterNote& n : h.not_in_effect()) {
      absl::StrAppend(&out, "  not changed on ", h.host_id(), ": ", n.parameter(), " on ",
                      n.device(), " is not in effect (", n.reason(), ")\n");
    }
  }
  if (c.has_rehearsal()) absl::StrAppend(&out, "rehearsal   ", RenderRehearsal(c.rehearsal()));
  if (c.verdicts_size() > 0) {
    absl::StrAppend(&out, "verdicts\n");
    for (int i = 0; i < c.verdicts_size(); ++i) {
      absl::StrAppend(&out, "#", i + 1, " ", RenderVerdict(c.verdicts(i)));
    }
    std::string hist = RenderVerdictHistogram(c.verdicts(c.verdicts_size() - 1));
    if (!hist.empty()) {
      const std::string& samples = c.verdicts(c.verdicts_size() - 1).samples();
      absl::StrAppend(&out, samples == "job_step_time" ? "job step time" : "probe RTT",
                      ", canary vs control (latest verdict)\n", hist);
    }
  }
  return out;
}

}  // namespace rocetune::cli
