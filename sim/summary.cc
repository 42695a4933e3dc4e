#include "sim/summary.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "daemon/json.h"

namespace rocetune::sim {
namespace {

std::string Num(double v) {
  if (!std::isfinite(v)) return "null";
  return absl::StrFormat("%.6g", v);
}

std::string Str(const std::string& s) { return rocetune::JsonQuote(s); }

std::string Dist(const SimSummary::Distribution& d) {
  return absl::StrCat("{\"count\": ", d.count, ", \"mean\": ", Num(d.mean),
                      ", \"p50\": ", Num(d.p50), ", \"p99\": ", Num(d.p99),
                      ", \"p999\": ", Num(d.p999), ", \"max\": ", Num(d.max), "}");
}

}  // namespace

std::string SimSummary::ToJson() const {
  std::vector<std::string> qs, ls, fs, bs;
  for (const Queue& q : queues) {
    qs.push_back(absl::StrCat("    {\"queue\": ", Str(q.name), ", \"priority\": ", q.priority,
                              ", \"mean_bytes\": ", Num(q.mean_bytes), ", \"p99_bytes\": ",
                              Num(q.p99_bytes), ", \"max_bytes\": ", Num(q.max_bytes), "}"));
  }
  for (const Link& l : links) {
    ls.push_back(absl::StrCat(
        "    {\"link\": ", Str(l.name), ", \"utilization\": ", Num(l.utilization),
        ", \"pause_frames\": ", l.pause_frames, ", \"paused_us\": ", Num(l.paused_us), "}"));
  }
  for (const Flow& f : flows) {
    fs.push_back(
        absl::StrCat("    {\"id\": ", f.id, ", \"src\": ", Str(f.src), ", \"dst\": ", Str(f.dst),
                     ", \"tag\": ", Str(f.tag), ", \"bytes\": ", Num(f.bytes),
                     ", \"throughput_gbps\": ", Num(f.throughput_gbps),
                     ", \"fct_us\": ", Num(f.fct_us), ", \"slowdown\": ", Num(f.slowdown), "}"));
  }
  for (const FctBin& b : fct_slowdown) {
    bs.push_back(absl::StrCat("    {\"bin\": ", Str(b.label), ", \"count\": ", b.count,
                              ", \"p50\": ", Num(b.p50), ", \"p95\": ", Num(b.p95),
                              ", \"p99\": ", Num(b.p99), "}"));
  }
  auto list = [](const std::vector<std::string>& v) {
    return v.empty() ? std::string("[]") : absl::StrCat("[\n", absl::StrJoin(v, ",\n"), "\n  ]");
  };
  return absl::StrCat(
      "{\n  \"scenario\": ", Str(scenario), ",\n  \"seed\": ", seed,
      ",\n  \"sim_seconds\": ", Num(sim_seconds),
      ",\n  \"measured_seconds\": ", Num(measured_seconds),
      ",\n  \"wall_seconds\": ", Num(wall_seconds), ",\n  \"steps\": ", steps,
      ",\n  \"events\": ", events, ",\n  \"queues\": ", list(qs), ",\n  \"links\": ", list(ls),
      ",\n  \"flows\": ", list(fs), ",\n  \"jain_index\": ", Num(jain_index),
      ",\n  \"delivered_gbps\": ", Num(delivered_gbps), ",\n  \"fct_slowdown\": ", list(bs),
      ",\n  \"probe_rtt_us\": ", Dist(probe_rtt_us),
      ",\n  \"probe_rtt_intra_tor_us\": ", Dist(probe_rtt_intra_tor_us),
      ",\n  \"incast_burst_us\": ", Dist(incast_burst_us),
      ",\n  \"allreduce_step_us\": ", Dist(allreduce_step_us),
      ",\n  \"flows_started\": ", flows_started, ",\n  \"flows_completed\": ", flows_completed,
      ",\n  \"cnp_sent\": ", cnp_sent, ",\n  \"cnp_handled\": ", cnp_handled,
      ",\n  \"ecn_marked_packets\": ", ecn_marked_packets,
      ",\n  \"pfc_pause_frames\": ", pfc_pause_frames,
      ",\n  \"pfc_paused_us\": ", Num(pfc_paused_us),
      ",\n  \"host_rx_pause_frames\": ", host_rx_pause_frames,
      ",\n  \"host_rx_paused_us\": ", Num(host_rx_paused_us),
      ",\n  \"dropped_bytes\": ", Num(dropped_bytes), "\n}\n");
}

}  // namespace rocetune::sim
