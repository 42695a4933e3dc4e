// rocetune-probe: runs a probe responder or a prober (UDP or RDMA UD verbs) from
// the rocetune_probe library and prints JSON. Used by the VM tests and by hand.
//
//   rocetune-probe --mode=responder --transport=verbs --device=rxe0 --info_file=/run/r.json
//   rocetune-probe --mode=prober --transport=verbs --device=rxe0
//       --peers=intra_tor=::ffff:10.77.0.1/17 --rate=50 --duration=3s
//   rocetune-probe --mode=responder --transport=udp --listen=127.0.0.1:7000
//   rocetune-probe --mode=prober --transport=udp --peers=local=127.0.0.1:7000
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "agent/probe/probe_tracker.h"
#include "agent/probe/udp_prober.h"
#include "agent/probe/udp_responder.h"
#include "agent/probe/verbs_prober.h"
#include "agent/probe/verbs_responder.h"
#include "daemon/init.h"
#include "daemon/json.h"
#include "daemon/logging.h"
#include "daemon/shutdown.h"
#include "model/quantile_sketch.h"

ABSL_FLAG(std::string, mode, "", "responder | prober");
ABSL_FLAG(std::string, transport, "udp", "udp | verbs");
ABSL_FLAG(std::string, listen, "127.0.0.1:0", "UDP responder: address to bind (port 0 = any)");
ABSL_FLAG(std::string, device, "", "verbs: RDMA device (empty = first)");
ABSL_FLAG(int32_t, port, 1, "verbs: RDMA port");
ABSL_FLAG(int32_t, gid_index, -1, "verbs: GID index (-1 = first RoCEv2 IPv4 GID)");
ABSL_FLAG(uint32_t, qkey, 0x11111111, "verbs: this QP's qkey");
ABSL_FLAG(std::string, peers, "",
          "prober: comma-separated CLASS=ADDR; ADDR is ip:port (udp) or GID/QPN[/QKEY] (verbs)");
ABSL_FLAG(double, rate, 20, "prober: probes per second per peer");
ABSL_FLAG(uint32_t, payload_bytes, 64, "prober: probe size");
ABSL_FLAG(uint32_t, traffic_class, 0, "prober: IP TOS / GRH traffic class");
ABSL_FLAG(uint32_t, timeout_ms, 1000, "prober: a probe unanswered this long is lost");
ABSL_FLAG(absl::Duration, duration, absl::Seconds(3),
          "how long to probe (prober) or answer (responder; 0 = until SIGTERM / --stop_file)");
ABSL_FLAG(std::string, info_file, "", "responder: write its address / GID / QPN here as JSON");
ABSL_FLAG(std::string, stop_file, "", "responder: stop when this file appears");
ABSL_FLAG(std::string, ready_file, "", "prober: touch this file once probing has started");

namespace rocetune {
namespace {

std::string JsonString(const std::string& s) { return JsonQuote(s); }

std::string SketchJson(const v1::Sketch& proto) {
  absl::StatusOr<QuantileSketch> s = QuantileSketch::FromProto(proto);
  if (!s.ok()) return "null";
  return absl::StrCat(
      "{\"count\":", s->count(), ",\"min\":", s->min(), ",\"p50\":", s->Quantile(0.5),
      ",\"p99\":", s->Quantile(0.99), ",\"max\":", s->max(),
      ",\"mean\":", s->count() == 0 ? 0.0 : s->sum() / static_cast<double>(s->count()), "}");
}

std::string AnomaliesJson(const ProbeAnomalies& a) {
  return absl::StrCat("{\"malformed\":", a.malformed, ",\"foreign\":", a.foreign,
                      ",\"late\":", a.late, ",\"duplicate\":", a.duplicate, ",\"bogus\":", a.bogus,
                      ",\"send_errors\":", a.send_errors, "}");
}

bool WriteFileAtomically(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp);
    if (!f) return false;
    f << text << "\n";
    if (!f.good()) return false;
  }
  return rename(tmp.c_str(), path.c_str()) == 0;
}

VerbsEndpoint::Options EndpointOptions() {
  VerbsEndpoint::Options o;
  o.device = absl::GetFlag(FLAGS_device);
  o.port = absl::GetFlag(FLAGS_port);
  o.gid_index = absl::GetFlag(FLAGS_gid_index);
  o.qkey = absl::GetFlag(FLAGS_qkey);
  return o;
}

absl::StatusOr<v1::ProbePlan> PlanFromFlags(bool verbs) {
  v1::ProbePlan plan;
  plan.set_version("cli");
  plan.set_probes_per_second(absl::GetFlag(FLAGS_rate));
  plan.set_payload_bytes(absl::GetFlag(FLAGS_payload_bytes));
  plan.set_traffic_class(absl::GetFlag(FLAGS_traffic_class));
  plan.set_timeout_ms(absl::GetFlag(FLAGS_timeout_ms));
  for (absl::string_view item :
       absl::StrSplit(absl::GetFlag(FLAGS_peers), ',', absl::SkipEmpty())) {
    std::vector<std::string> kv = absl::StrSplit(item, absl::MaxSplits('=', 1));
    if (kv.size() != 2 || kv[0].empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--peers entry \"", item, "\" is not CLASS=ADDR"));
    }
    v1::ProbePeer* peer = plan.add_peers();
    peer->set_peer_class(kv[0]);
    peer->set_host_id(kv[1]);
    if (!verbs) {
      peer->set_udp_address(kv[1]);
      continue;
    }
    std::vector<std::string> parts = absl::StrSplit(kv[1], '/');
    uint32_t qpn = 0, qkey = 0;
    if (parts.size() < 2 || parts.size() > 3 || !absl::SimpleAtoi(parts[1], &qpn) ||
        (parts.size() == 3 && !absl::SimpleAtoi(parts[2], &qkey))) {
      return absl::InvalidArgumentError(
          absl::StrCat("--peers entry \"", item, "\" is not CLASS=GID/QPN[/QKEY]"));
    }
    peer->set_gid(parts[0]);
    peer->set_qpn(qpn);
    peer->set_qkey(qkey);
  }
  if (plan.peers_size() == 0) return absl::InvalidArgumentError("--peers is empty");
  return plan;
}

bool StopFileSeen() {
  const std::string f = absl::GetFlag(FLAGS_stop_file);
  struct stat st;
  return !f.empty() && stat(f.c_str(), &st) == 0;
}

int RunResponder(bool verbs) {
  std::unique_ptr<UdpResponder> udp;
  std::unique_ptr<VerbsResponder> vr;
  std::string info;
  if (verbs) {
    absl::StatusOr<std::unique_ptr<VerbsResponder>> r = VerbsResponder::Start(EndpointOptions());
    if (!r.ok()) {
      std::fprintf(stderr, "rocetune-probe: %s\n", std::string(r.status().ToString()).c_str());
      return 3;
    }
    vr = *std::move(r);
    info = absl::StrCat("{\"transport\":\"verbs\",\"gid\":", JsonString(vr->gid()),
                        ",\"qpn\":", vr->qpn(), ",\"qkey\":", vr->qkey(),
                        ",\"clock\":", JsonString(vr->clock_name()), "}");
  } else {
    UdpResponder::Options o;
    o.listen_address = absl::GetFlag(FLAGS_listen);
    absl::StatusOr<std::unique_ptr<UdpResponder>> r = UdpResponder::Start(o);
    if (!r.ok()) {
      std::fprintf(stderr, "rocetune-probe: %s\n", std::string(r.status().ToString()).c_str());
      return 3;
    }
    udp = *std::move(r);
    info = absl::StrCat("{\"transport\":\"udp\",\"address\":", JsonString(udp->address()), "}");
  }
  const std::string info_file = absl::GetFlag(FLAGS_info_file);
  if (!info_file.empty() && !WriteFileAtomically(info_file, info)) {
    std::fprintf(stderr, "rocetune-probe: cannot write --info_file %s\n", info_file.c_str());
    return 3;
  }
  std::fprintf(stderr, "rocetune-probe: responder ready %s\n", info.c_str());
  const absl::Duration duration = absl::GetFlag(FLAGS_duration);
  const absl::Time end = absl::Now() + duration;
  while (!Shutdown::WaitFor(absl::Milliseconds(50))) {
    if (StopFileSeen()) break;
    if (duration > absl::ZeroDuration() && absl::Now() >= end) break;
  }
  std::string stats;
  if (vr) {
    vr->Stop();
    VerbsResponder::Stats s = vr->stats();
    stats = absl::StrCat("\"answered\":", s.answered, ",\"malformed\":", s.malformed,
                         ",\"ignored\":", s.ignored, ",\"errors\":", s.errors);
  } else {
    udp->Stop();
    UdpResponder::Stats s = udp->stats();
    stats = absl::StrCat("\"answered\":", s.answered, ",\"malformed\":", s.malformed,
                         ",\"ignored\":", s.ignored);
  }
  std::printf("{\"mode\":\"responder\",\"info\":%s,%s}\n", info.c_str(), stats.c_str());
  std::fflush(stdout);
  return 0;
}

int RunProber(bool verbs) {
  absl::StatusOr<v1::ProbePlan> plan = PlanFromFlags(verbs);
  if (!plan.ok()) {
    std::fprintf(stderr, "rocetune-probe: %s\n", std::string(plan.status().message()).c_str());
    return 2;
  }
  std::unique_ptr<Prober> prober;
  std::function<ProbeAnomalies()> anomalies;
  std::string self;
  if (verbs) {
    VerbsProber::Options o;
    o.endpoint = EndpointOptions();
    absl::StatusOr<std::unique_ptr<VerbsProber>> p = VerbsProber::Create(o);
    if (!p.ok()) {
      std::fprintf(stderr, "rocetune-probe: %s\n", std::string(p.status().ToString()).c_str());
      return 3;
    }
    VerbsProber* raw = p->get();
    self = absl::StrCat(",\"gid\":", JsonString(raw->gid()), ",\"qpn\":", raw->qpn());
    anomalies = [raw] { return raw->anomalies(); };
    prober = *std::move(p);
  } else {
    absl::StatusOr<std::unique_ptr<UdpProber>> p = UdpProber::Create({});
    if (!p.ok()) {
      std::fprintf(stderr, "rocetune-probe: %s\n", std::string(p.status().ToString()).c_str());
      return 3;
    }
    UdpProber* raw = p->get();
    anomalies = [raw] { return raw->anomalies(); };
    prober = *std::move(p);
  }
  absl::Status s = prober->SetPlan(*plan);
  if (!s.ok()) {
    std::fprintf(stderr, "rocetune-probe: %s\n", std::string(s.message()).c_str());
    return 2;
  }
  const std::string ready_file = absl::GetFlag(FLAGS_ready_file);
  if (!ready_file.empty() && !WriteFileAtomically(ready_file, "{}")) {
    std::fprintf(stderr, "rocetune-probe: cannot write --ready_file %s\n", ready_file.c_str());
  }
  Shutdown::WaitFor(absl::GetFlag(FLAGS_duration));
  // Stop sending, then give outstanding probes their timeout to answer or expire.
  v1::ProbePlan empty;
  empty.set_version("drain");
  prober->SetPlan(empty).IgnoreError();
  Shutdown::WaitFor(absl::Milliseconds(absl::GetFlag(FLAGS_timeout_ms) + 200));
  std::vector<v1::LatencyWindow> windows = prober->TakeWindow();
  std::string out = absl::StrCat("{\"mode\":\"prober\",\"transport\":", JsonString(prober->kind()),
                                 self, ",\"windows\":[");
  for (size_t i = 0; i < windows.size(); ++i) {
    const v1::LatencyWindow& w = windows[i];
    absl::StrAppend(&out, i ? "," : "", "{\"peer_class\":", JsonString(w.peer_class()),
                    ",\"clock\":", JsonString(w.clock()), ",\"probes_sent\":", w.probes_sent(),
                    ",\"probes_lost\":", w.probes_lost(),
                    ",\"network_rtt_seconds\":", SketchJson(w.network_rtt_seconds()),
                    ",\"host_delay_seconds\":", SketchJson(w.host_delay_seconds()), "}");
  }
  absl::StrAppend(&out, "],\"anomalies\":", AnomaliesJson(anomalies()), "}");
  std::printf("%s\n", out.c_str());
  std::fflush(stdout);
  return 0;
}

}  // namespace
}  // namespace rocetune

int main(int argc, char** argv) {
  rocetune::Shutdown::Install();
  rocetune::InitDaemon(argc, argv, "probe",
                       "runs a rocetune probe responder or prober and prints JSON.\n"
                       "usage: rocetune-probe --mode=responder|prober --transport=udp|verbs "
                       "[flags]",
                       nullptr);
  const std::string transport = absl::GetFlag(FLAGS_transport);
  if (transport != "udp" && transport != "verbs") {
    std::fprintf(stderr, "rocetune-probe: --transport must be udp or verbs, not \"%s\"\n",
                 transport.c_str());
    return 2;
  }
  const bool verbs = transport == "verbs";
  const std::string mode = absl::GetFlag(FLAGS_mode);
  if (mode == "responder") return rocetune::RunResponder(verbs);
  if (mode == "prober") return rocetune::RunProber(verbs);
  std::fprintf(stderr, "rocetune-probe: --mode must be responder or prober, not \"%s\"\n",
               mode.c_str());
  return 2;
}
