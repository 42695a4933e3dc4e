// rocetunectl: the operator's CLI for a rocetune controller.
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "daemon/init.h"
#include "google/protobuf/util/json_util.h"
#include "grpcpp/grpcpp.h"
#include "rocetune/v1/admin.grpc.pb.h"

ABSL_FLAG(std::string, controller, "127.0.0.1:7070", "Controller admin address (host:port).");
ABSL_FLAG(std::string, output, "table", "Output format: table or json.");
ABSL_FLAG(std::string, selector, "", "Label selector for hosts/status, e.g. rack=r1,pod=p1.");
ABSL_FLAG(std::string, reason, "", "Reason recorded in the audit log for approve/reject/rollback.");
ABSL_FLAG(absl::Duration, timeout, absl::Seconds(10), "Deadline for each request.");
ABSL_FLAG(int, limit, 50, "Maximum audit entries to list.");

namespace rv1 = rocetune::v1;

namespace {

constexpr char kUsage[] =
    "inspect and steer a rocetune controller.\n"
    "\n"
    "usage: rocetunectl [flags] COMMAND [ARGS]\n"
    "\n"
    "commands:\n"
    "  status              fleet summary: hosts by state, drift, probe RTT quantiles\n"
    "  hosts               list hosts (use --selector to filter by labels)\n"
    "  host HOST_ID        one host: inventory, labels, versions, last ACK/NACK\n"
    "  audit               the audit log, newest last\n"
    "  watch               stream controller events until interrupted\n"
    "  policies            policy versions\n"
    "  changes             tuning changes and their states\n"
    "  change ID           one change with its transitions and verdict\n"
    "  approve ID          approve a proposed change (--reason)\n"
    "  reject ID           reject a proposed change (--reason)\n"
    "  rollback ID         roll a change back (--reason)\n"
    "  push HOST_ID DEVICE NAME=VALUE...\n"
    "                      set one host's desired DCQCN parameters directly (no canary; for\n"
    "                      lab use and break-glass; --reason is audited)\n";

bool Json() { return absl::GetFlag(FLAGS_output) == "json"; }

void PrintJson(const google::protobuf::Message& m) {
  std::string out;
  google::protobuf::util::JsonPrintOptions opts;
  opts.add_whitespace = true;
  opts.preserve_proto_field_names = true;
  (void)google::protobuf::util::MessageToJsonString(m, &out, opts);
  std::cout << out;
}

std::string Ago(int64_t unix_nanos) {
  if (unix_nanos == 0) return "-";
  absl::Duration d = absl::Now() - absl::FromUnixNanos(unix_nanos);
  if (d < absl::Milliseconds(100)) return "just now";
  return absl::StrCat(absl::FormatDuration(absl::Trunc(d, absl::Milliseconds(100))), " ago");
}

const char* StateName(rv1::HostState s) {
  switch (s) {
    case rv1::HOST_CONNECTED:
      return "connected";
    case rv1::HOST_STALE:
      return "stale";
    case rv1::HOST_GONE:
      return "gone";
    default:
      return "unknown";
  }
}

std::string Labels(const google::protobuf::Map<std::string, std::string>& labels) {
  std::vector<std::string> parts;
  for (const auto& [k, v] : labels) parts.push_back(absl::StrCat(k, "=", v));
  std::sort(parts.begin(), parts.end());
  return parts.empty() ? "-" : absl::StrJoin(parts, ",");
}

int Fail(const grpc::Status& s) {
  std::fprintf(stderr, "rocetunectl: controller %s: %s (%d)\n",
               absl::GetFlag(FLAGS_controller).c_str(), s.error_message().c_str(),
               static_cast<int>(s.error_code()));
  return 1;
}

void SetDeadline(grpc::ClientContext* ctx) {
  ctx->set_deadline(std::chrono::system_clock::now() +
                    absl::ToChronoMilliseconds(absl::GetFlag(FLAGS_timeout)));
}

bool FillSelector(google::protobuf::Map<std::string, std::string>* out) {
  std::vector<std::pair<std::string, std::string>> labels;
  absl::Status s = rocetune::ParseLabels(absl::GetFlag(FLAGS_selector), &labels);
  if (!s.ok()) {
    std::fprintf(stderr, "rocetunectl: --selector: %s\n", std::string(s.message()).c_str());
    return false;
  }
  for (auto& [k, v] : labels) (*out)[k] = v;
  return true;
}

int Hosts(rv1::AdminService::Stub& stub) {
  rv1::ListHostsRequest req;
  if (!FillSelector(req.mutable_selector())) return 2;
  rv1::ListHostsResponse resp;
  grpc::ClientContext ctx;
  SetDeadline(&ctx);
  grpc::Status s = stub.ListHosts(&ctx, req, &resp);
  if (!s.ok()) return Fail(s);
  if (Json()) {
    PrintJson(resp);
    return 0;
  }
  std::printf("%-20s %-10s %-8s %-14s %-14s %-16s %s\n", "HOST", "STATE", "NICS", "APPLIED",
              "DESIRED", "LAST REPORT", "LABELS");
  for (const auto& h : resp.hosts()) {
    std::printf("%-20s %-10s %-8d %-14s %-14s %-16s %s\n", h.host_id().c_str(),
                StateName(h.state()), h.devices_size(),
                h.current_version().empty() ? "-" : h.current_version().c_str(),
                h.desired_version().empty() ? "-" : h.desired_version().c_str(),
                Ago(h.last_report_unix_nanos()).c_str(), Labels(h.labels()).c_str());
  }
  std::printf("%d host(s)\n", resp.hosts_size());
  return 0;
}

int Host(rv1::AdminService::Stub& stub, const std::string& id) {
  rv1::GetHostRequest req;
  req.set_host_id(id);
  rv1::HostInfo h;
  grpc::ClientContext ctx;
  SetDeadline(&ctx);
  grpc::Status s = stub.GetHost(&ctx, req, &h);
  if (!s.ok()) return Fail(s);
  if (Json()) {
    PrintJson(h);
    return 0;
  }
  std::printf("host:        %s (%s)\n", h.host_id().c_str(), h.hostname().c_str());
  std::printf("state:       %s, %llu reports, last %s\n", StateName(h.state()),
              static_cast<unsigned long long>(h.reports()),
              Ago(h.last_report_unix_nanos()).c_str());
  std::printf("labels:      %s\n", Labels(h.labels()).c_str());
  std::printf("applied:     %s\n", h.current_version().empty() ? "-" : h.current_version().c_str());
  std::printf("desired:     %s\n", h.desired_version().empty() ? "-" : h.desired_version().c_str());
  if (!h.last_nack_version().empty()) {
    std::printf("last NACK:   %s: %s\n", h.last_nack_version().c_str(),
                h.last_nack_error().c_str());
  }
  for (const auto& d : h.devices()) {
    std::printf("device:      %s driver=%s fw=%s pci=%s counters=%s dcqcn=%s\n", d.name().c_str(),
                d.driver().c_str(), d.firmware_version().c_str(), d.pci_address().c_str(),
                d.counter_source().c_str(), d.cc_param_layout().c_str());
    for (const auto& p : d.ports()) {
      std::printf("  port %u:    %s %s %llu Mb/s netdev=%s\n", p.port(), p.link_layer().c_str(),
                  p.state().c_str(), static_cast<unsigned long long>(p.speed_mbps()),
                  p.netdev().c_str());
    }
  }
  for (const auto& d : h.drift()) std::printf("drift:       %s\n", d.c_str());
  return 0;
}

int Status(rv1::AdminService::Stub& stub) {
  rv1::FleetSummaryRequest req;
  if (!FillSelector(req.mutable_selector())) return 2;
  rv1::FleetSummaryResponse r;
  grpc::ClientContext ctx;
  SetDeadline(&ctx);
  grpc::Status s = stub.FleetSummary(&ctx, req, &r);
  if (!s.ok()) return Fail(s);
  if (Json()) {
    PrintJson(r);
    return 0;
  }
  std::printf("hosts:        %u connected, %u stale, %u gone, %u drifted\n", r.hosts_connected(),
              r.hosts_stale(), r.hosts_gone(), r.hosts_drifted());
  std::printf("probe RTT:    p50 %.1f us, p99 %.1f us, p999 %.1f us\n",
              r.probe_rtt_p50_seconds() * 1e6, r.probe_rtt_p99_seconds() * 1e6,
              r.probe_rtt_p999_seconds() * 1e6);
  std::printf("CNP rate:     %.0f /s\n", r.cnp_rate_per_second());
  std::printf("PFC pauses:   %.0f /s\n", r.pfc_pause_rate_per_second());
  std::printf("reports:      %llu received, %llu dropped\n",
              static_cast<unsigned long long>(r.reports_received()),
              static_cast<unsigned long long>(r.reports_dropped()));
  return 0;
}

int Audit(rv1::AdminService::Stub& stub) {
  rv1::ListAuditRequest req;
  req.set_limit(absl::GetFlag(FLAGS_limit));
  rv1::ListAuditResponse r;
  grpc::ClientContext ctx;
  SetDeadline(&ctx);
  grpc::Status s = stub.ListAudit(&ctx, req, &r);
  if (!s.ok()) return Fail(s);
  if (Json()) {
    PrintJson(r);
    return 0;
  }
  for (const auto& e : r.entries()) {
    std::printf("%-6lld %s %-12s %-18s %-20s %s\n", static_cast<long long>(e.id()),
                absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", absl::FromUnixNanos(e.unix_nanos()),
                                 absl::UTCTimeZone())
                    .c_str(),
                e.actor().c_str(), e.action().c_str(), e.subject().c_str(), e.detail().c_str());
  }
  return 0;
}

int Watch(rv1::AdminService::Stub& stub) {
  grpc::ClientContext ctx;
  rv1::WatchRequest req;
  auto reader = stub.Watch(&ctx, req);
  rv1::Event e;
  while (reader->Read(&e)) {
    if (Json()) {
      PrintJson(e);
      std::cout << std::endl;
      continue;
    }
    std::printf(
        "%s %-18s %-20s %s\n",
        absl::FormatTime("%H:%M:%E3S", absl::FromUnixNanos(e.unix_nanos()), absl::UTCTimeZone())
            .c_str(),
        e.kind().c_str(), e.subject().c_str(), e.detail().c_str());
    std::fflush(stdout);
  }
  grpc::Status s = reader->Finish();
  return s.ok() ? 0 : Fail(s);
}

int Policies(rv1::AdminService::Stub& stub) {
  rv1::ListPoliciesResponse r;
  grpc::ClientContext ctx;
  SetDeadline(&ctx);
  grpc::Status s = stub.ListPolicies(&ctx, rv1::ListPoliciesRequest(), &r);
  if (!s.ok()) return Fail(s);
  if (Json()) {
    PrintJson(r);
    return 0;
  }
  for (const auto& p : r.policies()) {
    std::printf("%-24s %-16s %s\n", p.name().c_str(), p.version_hash().c_str(),
                p.policy().description().c_str());
  }
  return 0;
}

int Changes(rv1::AdminService::Stub& stub) {
  rv1::ListChangesResponse r;
  grpc::ClientContext ctx;
  SetDeadline(&ctx);
  grpc::Status s = stub.ListChanges(&ctx, rv1::ListChangesRequest(), &r);
  if (!s.ok()) return Fail(s);
  if (Json()) {
    PrintJson(r);
    return 0;
  }
  for (const auto& c : r.changes()) {
    std::printf("%-12s %-20s %-12s %-12s %s\n", c.id().c_str(), c.policy_name().c_str(),
                rv1::ChangeState_Name(c.state()).c_str(), c.proposer().c_str(),
                c.verdict().c_str());
  }
  return 0;
}

int ChangeCmd(rv1::AdminService::Stub& stub, const std::string& cmd, const std::string& id) {
  grpc::ClientContext ctx;
  SetDeadline(&ctx);
  rv1::Change c;
  grpc::Status s;
  if (cmd == "change") {
    rv1::GetChangeRequest req;
    req.set_id(id);
    s = stub.GetChange(&ctx, req, &c);
  } else {
    rv1::ChangeActionRequest req;
    req.set_id(id);
    req.set_reason(absl::GetFlag(FLAGS_reason));
    if (cmd == "approve") s = stub.Approve(&ctx, req, &c);
    if (cmd == "reject") s = stub.Reject(&ctx, req, &c);
    if (cmd == "rollback") s = stub.Rollback(&ctx, req, &c);
  }
  if (!s.ok()) return Fail(s);
  PrintJson(c);
  return 0;
}

int Push(rv1::AdminService::Stub& stub, const std::vector<std::string>& args) {
  // args: push HOST_ID DEVICE NAME=VALUE...
  rv1::SetDesiredStateRequest req;
  req.set_host_id(args[2]);
  req.set_reason(absl::GetFlag(FLAGS_reason));
  rv1::DeviceParameters* dev = req.mutable_parameters()->add_devices();
  dev->set_device(args[3]);
  for (size_t i = 4; i < args.size(); ++i) {
    size_t eq = args[i].find('=');
    int64_t value = 0;
    if (eq == std::string::npos || eq == 0 ||
        !absl::SimpleAtoi(absl::string_view(args[i]).substr(eq + 1), &value)) {
      std::fprintf(stderr, "rocetunectl: push: \"%s\": want NAME=INTEGER\n", args[i].c_str());
      return 2;
    }
    std::string name = args[i].substr(0, eq);
    if (name == "rp_enable_mask") {
      dev->set_rp_enable_mask(static_cast<uint32_t>(value));
    } else if (name == "np_enable_mask") {
      dev->set_np_enable_mask(static_cast<uint32_t>(value));
    } else {
      (*dev->mutable_dcqcn())[name] = value;
    }
  }
  grpc::ClientContext ctx;
  SetDeadline(&ctx);
  rv1::SetDesiredStateResponse resp;
  grpc::Status s = stub.SetDesiredState(&ctx, req, &resp);
  if (!s.ok()) return Fail(s);
  if (Json()) {
    PrintJson(resp);
    return 0;
  }
  std::printf("desired state %s queued for %s\n", resp.version().c_str(), args[2].c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args = rocetune::InitDaemon(argc, argv, "rocetunectl", kUsage, nullptr);
  if (args.size() < 2) {
    std::fprintf(stderr, "%s\nrocetunectl: no command given (try --help)\n", kUsage);
    return 2;
  }
  const std::string& cmd = args[1];
  std::string out = absl::GetFlag(FLAGS_output);
  if (out != "table" && out != "json") {
    std::fprintf(stderr, "rocetunectl: --output must be table or json, not \"%s\"\n", out.c_str());
    return 2;
  }
  auto channel =
      grpc::CreateChannel(absl::GetFlag(FLAGS_controller), grpc::InsecureChannelCredentials());
  auto stub = rv1::AdminService::NewStub(channel);
  auto need_arg = [&](const char* what) {
    if (args.size() < 3) {
      std::fprintf(stderr, "rocetunectl: %s needs %s\n", cmd.c_str(), what);
      return false;
    }
    return true;
  };
  if (cmd == "hosts") return Hosts(*stub);
  if (cmd == "host") return need_arg("a HOST_ID") ? Host(*stub, args[2]) : 2;
  if (cmd == "status") return Status(*stub);
  if (cmd == "audit") return Audit(*stub);
  if (cmd == "watch") return Watch(*stub);
  if (cmd == "policies") return Policies(*stub);
  if (cmd == "changes") return Changes(*stub);
  if (cmd == "change" || cmd == "approve" || cmd == "reject" || cmd == "rollback") {
    return need_arg("a change ID") ? ChangeCmd(*stub, cmd, args[2]) : 2;
  }
  if (cmd == "push") {
    if (args.size() < 5) {
      std::fprintf(stderr, "rocetunectl: push needs HOST_ID DEVICE NAME=VALUE...\n");
      return 2;
    }
    return Push(*stub, args);
  }
  std::fprintf(stderr, "rocetunectl: unknown command \"%s\" (try --help)\n", cmd.c_str());
  return 2;
}
