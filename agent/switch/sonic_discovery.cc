#include "agent/switch/sonic_discovery.h"

#include <algorithm>
#include <map>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "model/switch_params.h"

namespace rocetune {
namespace {

using Fields = std::map<std::string, std::string>;

std::string Get(const Fields& f, const std::string& k) {
  auto it = f.find(k);
  return it == f.end() ? "" : it->second;
}

int64_t GetInt(const Fields& f, const std::string& k) {
  int64_t v = 0;
  return absl::SimpleAtoi(Get(f, k), &v) ? v : 0;
}

std::vector<int> Priorities(const std::string& text) {
  absl::StatusOr<int64_t> mask = ParsePfcEnable(text);
  return mask.ok() ? PfcEnablePriorities(*mask) : std::vector<int>{};
}

// "3" -> {3}; "3-4" -> {3, 4}; anything else -> {}.
std::vector<int> QueueRange(absl::string_view text) {
  std::vector<absl::string_view> ends = absl::StrSplit(text, '-');
  int lo = 0, hi = 0;
  if (ends.size() == 1 && absl::SimpleAtoi(ends[0], &lo)) return {lo};
  if (ends.size() == 2 && absl::SimpleAtoi(ends[0], &lo) && absl::SimpleAtoi(ends[1], &hi) &&
      lo <= hi && hi - lo < 64) {
    std::vector<int> out;
    for (int i = lo; i <= hi; ++i) out.push_back(i);
    return out;
  }
  return {};
}

}  // namespace

SonicDiscovery::SonicDiscovery(RedisClient* config, RedisClient* state, RedisClient* appl)
    : config_(config), state_(state), appl_(appl) {}

absl::StatusOr<SwitchInventory> SonicDiscovery::DiscoverSwitch() {
  std::vector<std::string> keys;
  for (const char* pattern :
       {"PORT|*", "PORT_QOS_MAP|*", "QUEUE|*", "WRED_PROFILE|*", "PFC_WD|*", "BUFFER_POOL|*"}) {
    if (absl::Status s = ScanKeys(config_, pattern, &keys); !s.ok()) return s;
  }
  keys.push_back("DEVICE_METADATA|localhost");
  RedisBatch batch;
  for (const std::string& k : keys) batch.Add({"HGETALL", k});
  std::vector<RedisReply> replies;
  if (absl::Status s = config_->Pipeline(batch, &replies); !s.ok()) return s;
  // table -> key rest -> fields
  std::map<std::string, std::map<std::string, Fields>> tables;
  for (size_t i = 0; i < keys.size(); ++i) {
    if (replies[i].is_error()) {
      return absl::InternalError(
          absl::StrCat(config_->Describe(), ": HGETALL ", keys[i], ": ", replies[i].str));
    }
    size_t bar = keys[i].find('|');
    Fields f;
    for (auto& [k, v] : HashPairs(replies[i])) f[k] = v;
    tables[keys[i].substr(0, bar)][keys[i].substr(bar + 1)] = std::move(f);
  }
  SwitchInventory inv;
  inv.platform = "sonic";
  const Fields& meta = tables["DEVICE_METADATA"]["localhost"];
  inv.hostname = Get(meta, "hostname");
  inv.hwsku = Get(meta, "hwsku");
  inv.buffer_limit_bytes = BufferLimitFromPools(tables["BUFFER_POOL"]);
  for (const auto& [name, f] : tables["PORT"]) {
    SwitchPort p;
    p.name = name;
    p.speed_mbps = GetInt(f, "speed");
    p.mtu = GetInt(f, "mtu");
    p.admin_status = Get(f, "admin_status");
    auto qos = tables["PORT_QOS_MAP"].find(name);
    if (qos != tables["PORT_QOS_MAP"].end()) {
      p.pfc_enable = Priorities(Get(qos->second, "pfc_enable"));
      p.pfcwd_enable = Priorities(Get(qos->second, "pfcwd_sw_enable"));
    }
    inv.ports.push_back(std::move(p));
  }
  std::sort(inv.ports.begin(), inv.ports.end(),
            [](const SwitchPort& a, const SwitchPort& b) { return PortNameLess(a.name, b.name); });
  for (const auto& [rest, f] : tables["QUEUE"]) {
    // <ports>|<queues>; a VOQ chassis key has more parts (not handled).
    std::vector<std::string> parts = absl::StrSplit(rest, '|');
    if (parts.size() != 2) continue;
    for (absl::string_view port : absl::StrSplit(parts[0], ',')) {
      for (int q : QueueRange(parts[1])) {
        inv.queues.push_back({std::string(port), q, Get(f, "wred_profile"), Get(f, "scheduler")});
      }
    }
  }
  std::sort(inv.queues.begin(), inv.queues.end(), [](const SwitchQueue& a, const SwitchQueue& b) {
    if (a.port != b.port) return PortNameLess(a.port, b.port);
    return a.index < b.index;
  });
  for (const auto& [name, f] : tables["WRED_PROFILE"]) inv.profiles.push_back({name, f});
  for (const auto& [port, f] : tables["PFC_WD"]) inv.pfc_watchdog.push_back({port, f});
  std::sort(inv.pfc_watchdog.begin(), inv.pfc_watchdog.end(),
            [](const SwitchPfcWatchdog& a, const SwitchPfcWatchdog& b) {
              return PortNameLess(a.port, b.port);
            });
  // Oper status: APPL_DB, else STATE_DB. Either database may be unreachable.
  if (appl_ != nullptr && !inv.ports.empty()) {
    RedisBatch b;
    for (const SwitchPort& p : inv.ports)
      b.Add({"HGET", absl::StrCat("PORT_TABLE:", p.name), "oper_status"});
    if (appl_->Pipeline(b, &replies).ok()) {
      for (size_t i = 0; i < inv.ports.size(); ++i) {
        if (replies[i].type == RedisReply::Type::kString) inv.ports[i].oper_status = replies[i].str;
      }
    }
  }
  if (state_ != nullptr) {
    RedisBatch b;
    for (const SwitchPort& p : inv.ports)
      b.Add({"HGET", absl::StrCat("PORT_TABLE|", p.name), "oper_status"});
    b.Add({"HGET", "QUEUE_COUNTER_CAPABILITIES|WRED_ECN_QUEUE_ECN_MARKED_PKT_COUNTER",
           "isSupported"});
    if (state_->Pipeline(b, &replies).ok()) {
      for (size_t i = 0; i < inv.ports.size(); ++i) {
        if (inv.ports[i].oper_status.empty() && replies[i].type == RedisReply::Type::kString) {
          inv.ports[i].oper_status = replies[i].str;
        }
      }
      inv.ecn_marked_counter_supported = replies.back().str == "true";
    }
  }
  return inv;
}

}  // namespace rocetune
