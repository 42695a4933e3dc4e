#include "agent/switch/switch_inventory.h"

#include <cctype>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "daemon/json.h"

namespace rocetune {
namespace {

std::string JsonFields(const std::map<std::string, std::string>& fields) {
  std::string out = "{";
  bool first = true;
  for (const auto& [k, v] : fields) {
    absl::StrAppend(&out, first ? "" : ", ", JsonQuote(k), ": ", JsonQuote(v));
    first = false;
  }
  absl::StrAppend(&out, "}");
  return out;
}

std::string JsonInts(const std::vector<int>& v) {
  return absl::StrCat("[", absl::StrJoin(v, ", "), "]");
}

}  // namespace

bool PortNameLess(const std::string& a, const std::string& b) {
  auto split = [](const std::string& s) {
    size_t i = s.size();
    while (i > 0 && std::isdigit(static_cast<unsigned char>(s[i - 1]))) --i;
    uint64_t n = 0;
    bool has = i < s.size() && absl::SimpleAtoi(s.substr(i), &n);
    return std::make_tuple(s.substr(0, i), has ? n : 0, s);
  };
  return split(a) < split(b);
}

std::string SwitchInventoryJson(const SwitchInventory& inv) {
  std::string out = absl::StrCat(
      "{\"platform\": ", JsonQuote(inv.platform), ", \"hostname\": ", JsonQuote(inv.hostname),
      ", \"hwsku\": ", JsonQuote(inv.hwsku), ", \"buffer_limit_bytes\": ", inv.buffer_limit_bytes,
      ", \"ecn_marked_counter_supported\": ", inv.ecn_marked_counter_supported ? "true" : "false",
      ",\n  \"ports\": [");
  for (size_t i = 0; i < inv.ports.size(); ++i) {
    const SwitchPort& p = inv.ports[i];
    absl::StrAppend(&out, i ? ",\n    " : "\n    ", "{\"name\": ", JsonQuote(p.name),
                    ", \"speed_mbps\": ", p.speed_mbps, ", \"mtu\": ", p.mtu,
                    ", \"admin_status\": ", JsonQuote(p.admin_status),
                    ", \"oper_status\": ", JsonQuote(p.oper_status),
                    ", \"pfc_enable\": ", JsonInts(p.pfc_enable),
                    ", \"pfcwd_enable\": ", JsonInts(p.pfcwd_enable), "}");
  }
  absl::StrAppend(&out, "],\n  \"queues\": [");
  for (size_t i = 0; i < inv.queues.size(); ++i) {
    const SwitchQueue& q = inv.queues[i];
    absl::StrAppend(&out, i ? ",\n    " : "\n    ", "{\"port\": ", JsonQuote(q.port),
                    ", \"queue\": ", q.index, ", \"wred_profile\": ", JsonQuote(q.wred_profile),
                    ", \"scheduler\": ", JsonQuote(q.scheduler), "}");
  }
  absl::StrAppend(&out, "],\n  \"wred_profiles\": [");
  for (size_t i = 0; i < inv.profiles.size(); ++i) {
    absl::StrAppend(&out, i ? ",\n    " : "\n    ", "{\"name\": ", JsonQuote(inv.profiles[i].name),
                    ", \"fields\": ", JsonFields(inv.profiles[i].fields), "}");
  }
  absl::StrAppend(&out, "],\n  \"pfc_watchdog\": [");
  for (size_t i = 0; i < inv.pfc_watchdog.size(); ++i) {
    absl::StrAppend(&out, i ? ",\n    " : "\n    ",
                    "{\"port\": ", JsonQuote(inv.pfc_watchdog[i].port),
                    ", \"fields\": ", JsonFields(inv.pfc_watchdog[i].fields), "}");
  }
  absl::StrAppend(&out, "]}");
  return out;
}

v1::NicDevice SwitchNicDevice(const SwitchInventory& inv) {
  v1::NicDevice d;
  d.set_name(kSwitchDevice);
  d.set_driver(inv.platform);
  d.set_vendor(inv.platform);
  d.set_model(inv.hwsku);
  d.set_cc_param_layout(absl::StrCat(inv.platform, "_wred_pfc"));
  uint32_t n = 0;
  for (const SwitchPort& p : inv.ports) {
    v1::NicPort* port = d.add_ports();
    port->set_port(++n);
    port->set_link_layer("Ethernet");
    port->set_state(p.oper_status == "up" ? "ACTIVE" : "DOWN");
    port->set_speed_mbps(p.speed_mbps > 0 ? static_cast<uint64_t>(p.speed_mbps) : 0);
    port->set_netdev(p.name);
  }
  for (const SwitchQueue& q : inv.queues) {
    v1::SwitchQueue* out = d.add_switch_queues();
    out->set_port(q.port);
    out->set_queue(static_cast<uint32_t>(q.index));
    out->set_wred_profile(q.wred_profile);
  }
  d.set_switch_buffer_bytes(
      inv.buffer_limit_bytes > 0 ? static_cast<uint64_t>(inv.buffer_limit_bytes) : 0);
  return d;
}

}  // namespace rocetune
