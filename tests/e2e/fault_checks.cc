#include "tests/e2e/fault_checks.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace rocetune::e2e {

std::string ParamKey(const v1::ParameterSet& set) {
  std::vector<std::string> devices;
  for (const v1::DeviceParameters& d : set.devices()) {
    std::vector<std::pair<std::string, int64_t>> values(d.dcqcn().begin(), d.dcqcn().end());
    std::sort(values.begin(), values.end());
    std::string s = absl::StrCat(d.device(), "{");
    for (const auto& [k, v] : values) absl::StrAppend(&s, k, "=", v, ",");
    if (d.has_rp_enable_mask()) absl::StrAppend(&s, "rp_mask=", d.rp_enable_mask(), ",");
    if (d.has_np_enable_mask()) absl::StrAppend(&s, "np_mask=", d.np_enable_mask(), ",");
    if (d.has_pfc()) absl::StrAppend(&s, "pfc=", d.pfc().ShortDebugString());
    devices.push_back(s + "}");
  }
  std::sort(devices.begin(), devices.end());
  return absl::StrJoin(devices, " ");
}

std::vector<v1::Change> ListAllChanges(Env& env) {
  std::vector<v1::Change> out;
  std::string token;
  do {
    grpc::ClientContext ctx;
    ctx.AddMetadata("rocetune-actor", "e2e-test");
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    v1::ListChangesRequest req;
    req.set_page_size(500);
    req.set_page_token(token);
    v1::ListChangesResponse resp;
    if (!env.admin().ListChanges(&ctx, req, &resp).ok()) return out;
    for (const v1::Change& c : resp.changes()) out.push_back(c);
    token = resp.next_page_token();
  } while (!token.empty());
  return out;
}

std::map<std::string, std::set<std::string>> RecordedSets(
    const std::vector<v1::Change>& changes, const std::map<std::string, std::string>& initial) {
  std::map<std::string, std::set<std::string>> out;
  for (const auto& [host, key] : initial) out[host].insert(key);
  for (const v1::Change& c : changes) {
    for (const v1::HostTarget& t : c.hosts()) {
      out[t.host_id()].insert(ParamKey(t.target()));
      out[t.host_id()].insert(ParamKey(t.previous()));
    }
  }
  return out;
}

std::vector<std::string> HostsOffRecord(
    const std::vector<v1::HostInfo>& hosts,
    const std::map<std::string, std::set<std::string>>& recorded) {
  std::vector<std::string> out;
  for (const v1::HostInfo& h : hosts) {
    const std::string key = ParamKey(h.current_parameters());
    auto it = recorded.find(h.host_id());
    if (it == recorded.end() || !it->second.contains(key)) {
      out.push_back(absl::StrCat(h.host_id(), " (version ", h.current_version(),
                                 ") holds a set no change or baseline records: ", key));
    }
  }
  return out;
}

std::vector<std::string> InconsistentChanges(const std::vector<v1::Change>& changes,
                                             absl::Time restarted) {
  std::vector<std::string> out;
  for (const v1::Change& c : changes) {
    v1::ChangeState prev = v1::CHANGE_STATE_UNSPECIFIED;
    bool chained = true;
    for (const v1::ChangeTransition& t : c.transitions()) {
      if (prev != v1::CHANGE_STATE_UNSPECIFIED && t.from() != prev) chained = false;
      prev = t.to();
    }
    if (!chained) {
      out.push_back(absl::StrCat(c.id(), ": transitions do not chain"));
    }
    if (c.transitions_size() > 0 && prev != c.state()) {
      out.push_back(absl::StrCat(c.id(), ": state ", v1::ChangeState_Name(c.state()),
                                 " but the last transition went to ", v1::ChangeState_Name(prev)));
    }
    if (c.state() == v1::CANARY || c.state() == v1::STAGE) {
      if (c.transitions_size() == 0 ||
          absl::FromUnixNanos(c.transitions(c.transitions_size() - 1).unix_nanos()) < restarted) {
        out.push_back(absl::StrCat(c.id(), ": in ", v1::ChangeState_Name(c.state()),
                                   " from before the restart (neither resumed nor rolled back)"));
      }
    }
  }
  return out;
}

EnvOptions SmallFleetOptions() {
  EnvOptions opt;
  opt.scenario = "sim/scenarios/allreduce_8_hosts_large_messages.textproto";
  opt.sets = {"topology.hosts_per_tor=2"};  // 4 ToRs of 2
  opt.expect_hosts = 8;
  opt.probe_peers = 4;
  opt.fabricsim_flags = {"--guard_max_pfc_pause_ratio=0", "--guard_max_cnp_rate=0"};
  return opt;
}

std::string SmallFleetPolicy(const std::string& name, int bake_seconds,
                             const std::string& guard_extra) {
  return absl::StrCat("name: \"", name, R"("
description: "a fault test on the small fleet"
selector { match_labels { key: "role" value: "trainer" } }
objective { metric: PROBE_RTT_P99 }
knobs { parameter: "rpg_time_reset" min: 100 max: 3000 step: 10 }
tuner { kind: FIXED fixed { key: "rpg_time_reset" value: 300 } }
rollout {
  canary_fraction: 0.5
  min_canary_hosts: 2
  bake_seconds: )",
                      bake_seconds, R"(
  baseline_seconds: 1
  looks: 1
  stages: [1.0]
  rack_label: "tor"
}
guard {
  max_p99_regression: 0.5
  pass_max_ucb_regression: 0.2
  confidence: 0.995
  min_samples: 50
  min_rack_pairs: 2
  )",
                      guard_extra, R"(
}
approval { approvers: 1 }
)");
}

v1::ChangeState StateAt(const v1::Change& c, absl::Time t) {
  v1::ChangeState s = v1::PROPOSED;
  for (const v1::ChangeTransition& tr : c.transitions()) {
    if (absl::FromUnixNanos(tr.unix_nanos()) > t) break;
    s = tr.to();
  }
  return s;
}

int CountOf(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

std::optional<absl::Time> NthLogTime(const std::string& log, const std::string& what, int n) {
  for (absl::string_view line : absl::StrSplit(log, '\n')) {
    if (!absl::StrContains(line, what) || --n > 0) continue;
    const size_t at = line.find("ts=");
    if (at == absl::string_view::npos) return std::nullopt;
    const absl::string_view rest = line.substr(at + 3);
    const std::string stamp(rest.substr(0, rest.find(' ')));
    absl::Time t;
    std::string err;
    if (!absl::ParseTime(absl::RFC3339_full, stamp, &t, &err)) return std::nullopt;
    return t;
  }
  return std::nullopt;
}

std::string SystemTool(const std::string& name) {
  for (const char* dir : {"/usr/sbin", "/sbin", "/usr/bin", "/bin"}) {
    const std::string path = absl::StrCat(dir, "/", name);
    if (access(path.c_str(), X_OK) == 0) return path;
  }
  return "";
}

std::string NetnsOf(const std::string& pid) {
  char buf[128] = {};
  const ssize_t n = readlink(absl::StrCat("/proc/", pid, "/ns/net").c_str(), buf, sizeof buf - 1);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : "";
}

absl::Status EnterPrivateNetns() {
  const std::string ip = SystemTool("ip");
  if (SystemTool("nft").empty() || ip.empty()) {
    return absl::FailedPreconditionError("needs nft (nftables) and ip (iproute2)");
  }
  const std::string outer = NetnsOf("thread-self");
  // Only this thread changes namespace: the Env's children are forked from it.
  if (unshare(CLONE_NEWNET) != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "unshare(CLONE_NEWNET): ", std::strerror(errno), " (needs root / CAP_SYS_ADMIN)"));
  }
  if (NetnsOf("thread-self") == outer) {
    return absl::InternalError("unshare(CLONE_NEWNET) left the thread in its namespace");
  }
  std::string out;
  if (testing::RunCommand(ip, {"link", "set", "lo", "up"}, &out) != 0) {
    return absl::InternalError(absl::StrCat("ip link set lo up: ", out));
  }
  return absl::OkStatus();
}

absl::Status NftTable::Install(const std::string& dir, const std::string& body) {
  const std::string file = absl::StrCat(dir, "/", name_, ".nft");
  {
    std::ofstream f(file, std::ios::trunc);
    f << "table inet " << name_ << " {\n" << body << "}\n";
    if (!f.flush()) return absl::InternalError(absl::StrCat("cannot write ", file));
  }
  std::string out;
  if (testing::RunCommand(nft_, {"-f", file}, &out) != 0) {
    return absl::InternalError(absl::StrCat("nft -f ", file, ": ", out));
  }
  installed_ = true;
  return absl::OkStatus();
}

absl::Status NftTable::Delete() {
  if (!installed_) return absl::OkStatus();
  std::string out;
  if (testing::RunCommand(nft_, {"delete", "table", "inet", name_}, &out) != 0) {
    return absl::InternalError(absl::StrCat("cannot delete nft table ", name_, ": ", out));
  }
  installed_ = false;
  return absl::OkStatus();
}

}  // namespace rocetune::e2e
