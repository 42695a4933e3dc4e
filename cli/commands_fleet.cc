// status, hosts, host, push.
#include <map>
#include <utility>
#include <vector>

#include "absl/algorithm/container.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "cli/commands.h"
#include "cli/output.h"
#include "daemon/init.h"

namespace rocetune::cli {
namespace {

const char* HostStateName(v1::HostState s) {
  switch (s) {
    case v1::HOST_CONNECTED:
      return "connected";
    case v1::HOST_STALE:
      return "stale";
    case v1::HOST_GONE:
      return "gone";
    default:
      return "unknown";
  }
}

bool FillSelector(Context& ctx, google::protobuf::Map<std::string, std::string>* out) {
  std::vector<std::pair<std::string, std::string>> labels;
  absl::Status s = ParseLabels(ctx.args().Get("selector"), &labels);
  if (!s.ok()) {
    ctx.UsageError(absl::StrCat("--selector: ", s.message()));
    return false;
  }
  for (auto& [k, v] : labels) (*out)[k] = v;
  return true;
}

int Status(Context& ctx, const std::vector<std::string>&) {
  v1::FleetSummaryRequest req;
  if (!FillSelector(ctx, req.mutable_selector())) return kExitUsage;
  v1::FleetSummaryResponse r;
  int rc = ctx.Call("FleetSummary", [&](grpc::ClientContext* c) {
    return ctx.client()->stub().FleetSummary(c, req, &r);
  });
  if (rc != kExitOk) return rc;
  if (ctx.json()) {
    ctx.PrintJson(r);
    return kExitOk;
  }
  ctx.out() << "hosts:       " << r.hosts_connected() << " connected, " << r.hosts_stale()
            << " stale, " << r.hosts_gone() << " gone, " << r.hosts_drifted() << " drifted\n"
            << "probe RTT:   p50 " << FormatSeconds(r.probe_rtt_p50_seconds()) << ", p99 "
            << FormatSeconds(r.probe_rtt_p99_seconds()) << ", p999 "
            << FormatSeconds(r.probe_rtt_p999_seconds()) << "\n"
            << "CNP rate:    " << FormatNumber(r.cnp_rate_per_second()) << " /s\n"
            << "PFC pauses:  " << FormatNumber(r.pfc_pause_rate_per_second()) << " /s\n"
            << "reports:     " << r.reports_received() << " received, " << r.reports_dropped()
            << " dropped\n";
  // The job signal (docs/job-signal.md), one line per (job, op).
  if (r.jobs_size() == 0) ctx.out() << "jobs:        none reported\n";
  for (const v1::JobSummary& j : r.jobs()) {
    ctx.out() << "job:         " << j.job() << " " << j.op() << ": " << j.hosts()
              << (j.hosts() == 1 ? " host, " : " hosts, ") << j.events() << " events, p50 "
              << FormatSeconds(j.p50_seconds()) << ", p99 " << FormatSeconds(j.p99_seconds())
              << ", max " << FormatSeconds(j.max_seconds()) << "\n";
  }
  if (r.jobs_not_shown() > 0) {
    ctx.out() << "job:         " << r.jobs_not_shown() << " more (job, op) pairs not shown\n";
  }
  return kExitOk;
}

int Hosts(Context& ctx, const std::vector<std::string>&) {
  v1::ListHostsRequest req;
  if (!FillSelector(ctx, req.mutable_selector())) return kExitUsage;
  uint32_t page_size = 500;
  if (ctx.args().Has("page_size") &&
      (!absl::SimpleAtoi(ctx.args().Get("page_size"), &page_size) || page_size == 0)) {
    return ctx.UsageError("--page_size: want a positive integer");
  }
  req.set_page_size(page_size);
  // Every page, in host_id order; the controller caps a page's size.
  v1::ListHostsResponse all;
  for (int pages = 0;; ++pages) {
    v1::ListHostsResponse page;
    int rc = ctx.Call("ListHosts", [&](grpc::ClientContext* c) {
      return ctx.client()->stub().ListHosts(c, req, &page);
    });
    if (rc != kExitOk) return rc;
    all.set_total(page.total());
    for (auto& h : *page.mutable_hosts()) *all.add_hosts() = std::move(h);
    if (page.next_page_token().empty()) break;
    if (page.next_page_token() == req.page_token()) {
      return ctx.Error("ListHosts: the controller returned the same page token twice");
    }
    req.set_page_token(page.next_page_token());
  }
  if (ctx.json()) {
    ctx.PrintJson(all);
    return kExitOk;
  }
  std::vector<std::string> header = {"HOST",    "ROLE",  "STATE",  "NICS",        "APPLIED",
                                     "DESIRED", "DRIFT", "CHANGE", "LAST REPORT", "LABELS"};
  if (ctx.wide()) {
    for (const char* h : {"HOSTNAME", "CONNECTED", "REPORTS", "LAST NACK", "GUARD"}) {
      header.push_back(h);
    }
  }
  Table t(header);
  absl::Time now = ctx.now();
  for (const auto& h : all.hosts()) {
    auto role = h.labels().find("role");
    // A switch is one device ("switch"): its NICS column counts its ports.
    const bool is_switch = role != h.labels().end() && role->second == "switch";
    const int nics =
        is_switch && h.devices_size() == 1 ? h.devices(0).ports_size() : h.devices_size();
    std::vector<std::string> row = {h.host_id(),
                                    role == h.labels().end() ? "-" : role->second,
                                    HostStateName(h.state()),
                                    absl::StrCat(nics, is_switch ? " ports" : ""),
                                    h.not_in_effect().empty()
                                        ? OrDash(h.current_version())
                                        : absl::StrCat(OrDash(h.current_version()), " (",
                                                       h.not_in_effect_size(), " not in effect)"),
                                    OrDash(h.desired_version()),
                                    h.drift().empty() ? "-" : "drift",
                                    OrDash(h.active_change()),
                                    FormatAgo(h.last_report_unix_nanos(), now),
                                    FormatLabels(h.labels())};
    if (ctx.wide()) {
      row.push_back(OrDash(h.hostname()));
      row.push_back(FormatAgo(h.connected_unix_nanos(), now));
      row.push_back(absl::StrCat(h.reports()));
      row.push_back(h.last_nack_version().empty()
                        ? "-"
                        : absl::StrCat(h.last_nack_version(), ": ", h.last_nack_error()));
      row.push_back(OrDash(h.last_guard_event()));
    }
    t.AddRow(std::move(row));
  }
  ctx.out() << t.Render() << all.hosts_size() << " host(s)";
  if (all.total() > static_cast<uint32_t>(all.hosts_size())) {
    ctx.out() << " of " << all.total() << " (the fleet changed while paging)";
  }
  ctx.out() << "\n";
  return kExitOk;
}

void PrintParameters(std::ostream& out, const v1::ParameterSet& set) {
  for (const auto& d : set.devices()) {
    std::map<std::string, int64_t> sorted(d.dcqcn().begin(), d.dcqcn().end());
    std::string line = absl::StrJoin(sorted, " ", absl::PairFormatter("="));
    if (d.has_rp_enable_mask()) absl::StrAppend(&line, " rp_enable_mask=", d.rp_enable_mask());
    if (d.has_np_enable_mask()) absl::StrAppend(&line, " np_enable_mask=", d.np_enable_mask());
    if (d.has_pfc()) {
      absl::StrAppend(&line, " pfc.enable_mask=", d.pfc().enable_mask());
      if (d.pfc().has_delay()) absl::StrAppend(&line, " pfc.delay=", d.pfc().delay());
      if (d.pfc().has_prevention_timeout_ms()) {
        absl::StrAppend(&line, " pfc.prevention_timeout_ms=", d.pfc().prevention_timeout_ms());
      }
    }
    out << "  " << d.device() << ": "
        << OrDash(std::string(absl::StripLeadingAsciiWhitespace(line))) << "\n";
  }
}

// A switch's ports (with their lossless priorities), queue-to-profile
// bindings (consecutive queues of one port with one profile on one line) and
// WRED/ECN profiles, from its inventory and current parameters.
void PrintSwitch(std::ostream& out, const v1::NicDevice& d, const v1::ParameterSet& current) {
  std::map<std::string, std::map<std::string, int64_t>> profiles;
  std::map<std::string, int64_t> pfc;
  for (const auto& dev : current.devices()) {
    if (dev.device() != d.name()) continue;
    for (const auto& [name, value] : dev.dcqcn()) {
      std::vector<std::string> parts = absl::StrSplit(name, '.');
      if (parts.size() != 3) continue;
      if (parts[0] == "ecn") profiles[parts[1]][parts[2]] = value;
      if (parts[0] == "pfc" && parts[2] == "pfc_enable") pfc[parts[1]] = value;
    }
  }
  out << "switch:        platform=" << OrDash(d.driver()) << " sku=" << OrDash(d.model())
      << " buffer=" << d.switch_buffer_bytes() << " bytes, " << d.ports_size() << " ports\n";
  for (const auto& p : d.ports()) {
    out << "  port " << p.netdev() << ": " << p.state() << " " << p.speed_mbps() << " Mb/s";
    auto it = pfc.find(p.netdev());
    if (it != pfc.end()) {
      std::vector<int> prios;
      for (int b = 0; b < 8; ++b) {
        if (it->second >> b & 1) prios.push_back(b);
      }
      out << " pfc_enable=" << OrDash(absl::StrJoin(prios, ","));
    }
    out << "\n";
  }
  for (int i = 0; i < d.switch_queues_size();) {
    const v1::SwitchQueue& first = d.switch_queues(i);
    int j = i + 1;
    while (j < d.switch_queues_size() && d.switch_queues(j).port() == first.port() &&
           d.switch_queues(j).wred_profile() == first.wred_profile() &&
           d.switch_queues(j).queue() == d.switch_queues(j - 1).queue() + 1) {
      ++j;
    }
    const uint32_t last = d.switch_queues(j - 1).queue();
    out << "  queue " << first.port() << ":" << first.queue()
        << (last != first.queue() ? absl::StrCat("-", last) : "") << " -> "
        << OrDash(first.wred_profile()) << "\n";
    i = j;
  }
  for (const auto& [name, fields] : profiles) {
    out << "  profile " << name << ": " << absl::StrJoin(fields, " ", absl::PairFormatter("="))
        << "\n";
  }
}

int Host(Context& ctx, const std::vector<std::string>& args) {
  v1::GetHostRequest req;
  req.set_host_id(args[0]);
  v1::HostInfo h;
  int rc = ctx.Call(
      "GetHost", [&](grpc::ClientContext* c) { return ctx.client()->stub().GetHost(c, req, &h); });
  if (rc != kExitOk) return rc;
  if (ctx.json()) {
    ctx.PrintJson(h);
    return kExitOk;
  }
  std::ostream& out = ctx.out();
  absl::Time now = ctx.now();
  out << "host:          " << h.host_id() << " (" << OrDash(h.hostname()) << ")\n"
      << "state:         " << HostStateName(h.state()) << ", " << h.reports() << " reports, last "
      << FormatAgo(h.last_report_unix_nanos(), now) << ", connected "
      << FormatAgo(h.connected_unix_nanos(), now) << "\n"
      << "labels:        " << FormatLabels(h.labels()) << "\n"
      << "applied:       " << OrDash(h.current_version()) << "\n"
      << "desired:       " << OrDash(h.desired_version())
      << (h.desired_lease_seconds() > 0
              ? absl::StrCat(" (provisional until its change is done: the agent restores "
                             "last-known-good after ",
                             h.desired_lease_seconds(), " s without the controller)")
              : std::string())
      << "\n"
      << "last ACK:      " << OrDash(h.last_ack_version()) << "\n";
  if (!h.last_nack_version().empty()) {
    out << "last NACK:     " << h.last_nack_version() << ": " << h.last_nack_error() << "\n";
  }
  out << "active change: " << OrDash(h.active_change()) << "\n";
  out << "rejected:      "
      << (h.rejected_versions().empty() ? "-" : absl::StrJoin(h.rejected_versions(), ", ")) << "\n";
  if (!h.last_guard_event().empty()) out << "guard:         " << h.last_guard_event() << "\n";
  for (const auto& d : h.devices()) {
    if (d.name() == "switch" && (d.switch_queues_size() > 0 || d.switch_buffer_bytes() > 0)) {
      PrintSwitch(out, d, h.current_parameters());
      continue;
    }
    out << "device:        " << d.name() << " driver=" << d.driver()
        << " fw=" << d.firmware_version() << " pci=" << d.pci_address()
        << " counters=" << d.counter_source() << " dcqcn=" << d.cc_param_layout() << "\n";
    for (const auto& p : d.ports()) {
      out << "  port " << p.port() << ":       " << p.link_layer() << " " << p.state() << " "
          << p.speed_mbps() << " Mb/s netdev=" << p.netdev() << "\n";
    }
  }
  if (h.current_parameters().devices_size() > 0) {
    out << "parameters:\n";
    PrintParameters(out, h.current_parameters());
  }
  for (const auto& d : h.drift()) out << "drift:         " << d << "\n";
  // One line per device and reason, in the order first seen: a disabled
  // reaction point leaves every reaction-point value of the set without effect.
  std::vector<std::pair<std::pair<std::string, std::string>, std::vector<std::string>>> lines;
  for (const v1::ParameterNote& n : h.not_in_effect()) {
    const std::pair<std::string, std::string> key(n.device(), n.reason());
    auto it = absl::c_find_if(lines, [&](const auto& l) { return l.first == key; });
    if (it == lines.end()) it = lines.insert(lines.end(), {key, {}});
    it->second.push_back(n.parameter());
  }
  for (const auto& [key, params] : lines) {
    out << "not in effect: " << key.first << " " << absl::StrJoin(params, ", ") << ": "
        << key.second << "\n";
  }
  return kExitOk;
}

// Polls GetHost until the host acks or nacks `version`, or the deadline passes.
int WaitForAck(Context& ctx, const std::string& host, const std::string& version) {
  absl::Time deadline = ctx.now() + ctx.options().timeout;
  absl::Duration poll = absl::Milliseconds(100);
  while (true) {
    v1::GetHostRequest req;
    req.set_host_id(host);
    v1::HostInfo h;
    int rc = ctx.Call("GetHost", [&](grpc::ClientContext* c) {
      return ctx.client()->stub().GetHost(c, req, &h);
    });
    if (rc != kExitOk) return rc;
    if (h.last_ack_version() == version || h.current_version() == version) {
      if (!ctx.json()) ctx.out() << host << " acked " << version << "\n";
      return kExitOk;
    }
    bool rejected = absl::c_linear_search(h.rejected_versions(), version);
    if (h.last_nack_version() == version || rejected) {
      return ctx.Error(absl::StrCat(
          host, " rejected ", version, ": ",
          h.last_nack_version() == version ? h.last_nack_error() : h.last_guard_event()));
    }
    if (ctx.now() + poll > deadline) {
      return ctx.Error(absl::StrCat("timed out after ", absl::FormatDuration(ctx.options().timeout),
                                    " waiting for ", host, " to ack ", version, " (applied ",
                                    OrDash(h.current_version()), ")"));
    }
    absl::SleepFor(poll);
    poll = std::min(poll * 2, absl::Seconds(1));
  }
}

int Push(Context& ctx, const std::vector<std::string>& args) {
  v1::SetDesiredStateRequest req;
  req.set_host_id(args[0]);
  req.set_reason(ctx.args().Get("reason"));
  req.set_replace(ctx.args().GetBool("replace"));
  v1::DeviceParameters* dev = req.mutable_parameters()->add_devices();
  dev->set_device(args[1]);
  for (size_t i = 2; i < args.size(); ++i) {
    size_t eq = args[i].find('=');
    int64_t value = 0;
    if (eq == std::string::npos || eq == 0 ||
        !absl::SimpleAtoi(absl::string_view(args[i]).substr(eq + 1), &value)) {
      return ctx.UsageError(absl::StrCat("\"", args[i], "\": want NAME=INTEGER"));
    }
    std::string name = args[i].substr(0, eq);
    // A map keeps only the last value: a parameter given twice is a mistake.
    for (size_t j = 2; j < i; ++j) {
      if (args[j].compare(0, eq + 1, args[i], 0, eq + 1) == 0) {
        return ctx.UsageError(absl::StrCat(args[1], ": parameter ", name, " given twice (\"",
                                           args[j], "\" and \"", args[i], "\")"));
      }
    }
    if (name == "rp_enable_mask" || name == "np_enable_mask") {
      if (value < 0 || value > 0xff) return ctx.UsageError(name + ": want 0..255");
      if (name == "rp_enable_mask") dev->set_rp_enable_mask(static_cast<uint32_t>(value));
      if (name == "np_enable_mask") dev->set_np_enable_mask(static_cast<uint32_t>(value));
    } else {
      (*dev->mutable_dcqcn())[name] = value;
    }
  }
  if (ctx.dry_run()) {
    // SetDesiredStateRequest has no dry_run: show what would be sent, send nothing.
    if (ctx.json()) {
      ctx.PrintJson(req);
    } else {
      ctx.out() << "dry run: would set " << args[0] << " to:\n";
      PrintParameters(ctx.out(), req.parameters());
    }
    return kExitOk;
  }
  v1::SetDesiredStateResponse resp;
  int rc = ctx.Call("SetDesiredState", [&](grpc::ClientContext* c) {
    return ctx.client()->stub().SetDesiredState(c, req, &resp);
  });
  if (rc != kExitOk) return rc;
  if (ctx.json()) {
    ctx.PrintJson(resp);
  } else {
    if (resp.changes().empty()) {
      ctx.out() << "desired state " << resp.version() << " of " << args[0]
                << " already holds these values; nothing changes\n";
    } else {
      ctx.out() << "desired state " << resp.version() << " queued for " << args[0]
                << (req.replace() ? " (replacing the whole set)" : "") << ":\n";
      for (const v1::ValueChange& v : resp.changes()) {
        ctx.out() << "  " << v.device() << "/" << v.parameter() << ": "
                  << (v.old_value().empty() ? "(not set)" : v.old_value()) << " -> "
                  << (v.new_value().empty() ? "(removed)" : v.new_value()) << "\n";
      }
    }
  }
  if (!ctx.args().GetBool("wait")) return kExitOk;
  return WaitForAck(ctx, args[0], resp.version());
}

int Forget(Context& ctx, const std::vector<std::string>& args) {
  v1::ForgetHostRequest req;
  req.set_host_id(args[0]);
  req.set_reason(ctx.args().Get("reason"));
  if (ctx.dry_run()) {
    ctx.out() << "dry run: would forget " << args[0] << "\n";
    return kExitOk;
  }
  v1::ForgetHostResponse resp;
  int rc = ctx.Call("ForgetHost", [&](grpc::ClientContext* c) {
    return ctx.client()->stub().ForgetHost(c, req, &resp);
  });
  if (rc != kExitOk) return rc;
  if (ctx.json()) {
    ctx.PrintJson(resp);
  } else {
    ctx.out() << "forgot " << resp.host_id() << "\n";
  }
  return kExitOk;
}

}  // namespace

std::vector<CommandSpec> FleetCommands() {
  return {
      {{"status"},
       "",
       "fleet summary: hosts by state, drift, probe RTT quantiles, the job signal per (job, op)",
       {"selector"},
       false,
       0,
       0,
       false,
       Status},
      {{"hosts"},
       "",
       "every host (all pages), with versions and active change",
       {"selector", "page_size"},
       false,
       0,
       0,
       false,
       Hosts},
      {{"host"},
       "HOST",
       "one host: inventory, versions, last ACK/NACK, rejected versions",
       {},
       false,
       1,
       1,
       false,
       Host},
      {{"host", "forget"},
       "HOST",
       "remove a gone host (registry, telemetry, stored state); audited",
       {"reason"},
       true,
       1,
       1,
       false,
       Forget},
      {{"push"},
       "HOST DEVICE NAME=VALUE...",
       "set parameters in one host's desired state directly, merged into it (no canary; lab use "
       "and break-glass); --replace makes them the whole set",
       {"reason", "wait", "replace"},
       true,
       3,
       -1,
       false,
       Push},
  };
}

}  // namespace rocetune::cli
