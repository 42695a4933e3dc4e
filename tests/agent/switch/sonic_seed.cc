#include "tests/agent/switch/sonic_seed.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "agent/switch/redis_client.h"

namespace rocetune::testing {

std::string SeedPortOid(int i) { return absl::StrFormat("oid:0x1000000000%03x", i + 1); }
std::string SeedQueueOid(int i, int q) {
  return absl::StrFormat("oid:0x15000000000%03x%x", i + 1, q);
}
uint64_t SeedPfcRx(int i, int p) { return 1000ull * (i + 1) + p; }

namespace {

absl::Status Run(const RedisEndpoint& ep, int db, const RedisBatch& batch) {
  RedisClient c(ep, db);
  std::vector<RedisReply> replies;
  if (absl::Status s = c.Pipeline(batch, &replies); !s.ok()) return s;
  for (const RedisReply& r : replies) {
    if (r.is_error()) return absl::InternalError(absl::StrCat("seed db ", db, ": ", r.str));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status SeedSonic(const std::string& endpoint, const SonicSeedOptions& o) {
  absl::StatusOr<RedisEndpoint> ep = RedisEndpoint::Parse(endpoint);
  if (!ep.ok()) return ep.status();
  RedisBatch config, counters, state, appl;
  config.Add({"HSET", "DEVICE_METADATA|localhost", "hostname", "leaf1", "hwsku",
              "Mellanox-SN4600C-C64", "platform", "x86_64-mlnx_msn4600c-r0"});
  config.Add({"HSET",
              "WRED_PROFILE|AZURE_LOSSLESS",
              "ecn",
              "ecn_all",
              "wred_green_enable",
              "true",
              "wred_yellow_enable",
              "true",
              "wred_red_enable",
              "true",
              "green_min_threshold",
              "1048576",
              "green_max_threshold",
              "2097152",
              "yellow_min_threshold",
              "1048576",
              "yellow_max_threshold",
              "2097152",
              "red_min_threshold",
              "1048576",
              "red_max_threshold",
              "2097152",
              "green_drop_probability",
              "5",
              "yellow_drop_probability",
              "5",
              "red_drop_probability",
              "5"});
  config.Add({"HSET", "WRED_PROFILE|ROCE_TUNED", "ecn", "ecn_green", "wred_green_enable", "true",
              "green_min_threshold", "250000", "green_max_threshold", "2097152",
              "green_drop_probability", "10"});
  const std::string pool = absl::StrCat(o.egress_pool_bytes);
  config.Add({"HSET", "BUFFER_POOL|egress_lossless_pool", "type", "egress", "mode", "dynamic",
              "size", pool});
  config.Add({"HSET", "BUFFER_POOL|ingress_lossless_pool", "type", "ingress", "mode", "dynamic",
              "size", "20000000", "xoff", "2000000"});
  config.Add({"HSET", "FLEX_COUNTER_TABLE|QUEUE", "FLEX_COUNTER_STATUS", "enable", "POLL_INTERVAL",
              "10000"});
  config.Add({"HSET", "FLEX_COUNTER_TABLE|PORT", "FLEX_COUNTER_STATUS", "enable", "POLL_INTERVAL",
              "1000"});
  config.Add({"HSET", "PFC_WD|GLOBAL", "POLL_INTERVAL", "200"});
  for (int i = 0; i < o.ports; ++i) {
    const std::string port = absl::StrCat("Ethernet", 4 * i);
    const bool down = o.down_every > 0 && i % o.down_every == o.down_every - 1;
    config.Add({"HSET", "PORT|" + port, "speed", i % 2 ? "400000" : "100000", "mtu", "9100",
                "admin_status", "up", "lanes", absl::StrCat(4 * i), "alias",
                absl::StrCat("etp", i + 1)});
    config.Add({"HSET", "PORT_QOS_MAP|" + port, "pfc_enable", "3,4", "pfcwd_sw_enable", "3,4",
                "dscp_to_tc_map", "AZURE", "tc_to_queue_map", "AZURE", "tc_to_pg_map", "AZURE",
                "pfc_to_queue_map", "AZURE"});
    config.Add({"HSET", "QUEUE|" + port + "|3-4", "scheduler", "scheduler.1", "wred_profile",
                i == 0 ? "ROCE_TUNED" : "AZURE_LOSSLESS"});
    config.Add({"HSET", "QUEUE|" + port + "|0-2", "scheduler", "scheduler.0"});
    config.Add({"HSET", "PFC_WD|" + port, "action", "drop", "detection_time", "200",
                "restoration_time", "200"});
    appl.Add(
        {"HSET", "PORT_TABLE:" + port, "oper_status", down ? "down" : "up", "admin_status", "up"});
    state.Add({"HSET", "PORT_TABLE|" + port, "state", "ok", "oper_status", down ? "down" : "up"});
    // COUNTERS_DB
    const std::string poid = SeedPortOid(i);
    counters.Add({"HSET", "COUNTERS_PORT_NAME_MAP", port, poid});
    std::vector<std::string> pstats = {"HSET", "COUNTERS:" + poid, "SAI_PORT_STAT_IF_IN_OCTETS",
                                       "123456789"};
    for (int p = 0; p < 8; ++p) {
      pstats.push_back(absl::StrCat("SAI_PORT_STAT_PFC_", p, "_RX_PKTS"));
      pstats.push_back(absl::StrCat(SeedPfcRx(i, p)));
      pstats.push_back(absl::StrCat("SAI_PORT_STAT_PFC_", p, "_TX_PKTS"));
      pstats.push_back(absl::StrCat(2000ull * (i + 1) + p));
      if (p == 3 || p == 4) {
        pstats.push_back(absl::StrCat("SAI_PORT_STAT_PFC_", p, "_RX_PAUSE_DURATION_US"));
        pstats.push_back(absl::StrCat(10 * (i + 1)));
      }
    }
    counters.Add(pstats);
    for (int q = 0; q < 10; ++q) {
      const std::string qoid = SeedQueueOid(i, q);
      const bool mc = q >= 8;
      counters.Add({"HSET", "COUNTERS_QUEUE_NAME_MAP", absl::StrCat(port, ":", q), qoid});
      counters.Add({"HSET", "COUNTERS_QUEUE_PORT_MAP", qoid, poid});
      counters.Add({"HSET", "COUNTERS_QUEUE_INDEX_MAP", qoid, absl::StrCat(mc ? q - 8 : q)});
      counters.Add({"HSET", "COUNTERS_QUEUE_TYPE_MAP", qoid,
                    mc ? "SAI_QUEUE_TYPE_MULTICAST" : "SAI_QUEUE_TYPE_UNICAST"});
      const uint64_t base = 100000ull * (i + 1) + 100 * q;
      std::vector<std::string> qs = {"HSET",
                                     "COUNTERS:" + qoid,
                                     "SAI_QUEUE_STAT_PACKETS",
                                     absl::StrCat(base),
                                     "SAI_QUEUE_STAT_BYTES",
                                     absl::StrCat(base * 1000),
                                     "SAI_QUEUE_STAT_DROPPED_PACKETS",
                                     absl::StrCat(q),
                                     "SAI_QUEUE_STAT_DROPPED_BYTES",
                                     absl::StrCat(q * 1000),
                                     "SAI_QUEUE_STAT_WRED_ECN_MARKED_PACKETS",
                                     absl::StrCat(base / 10),
                                     "SAI_QUEUE_STAT_WRED_ECN_MARKED_BYTES",
                                     absl::StrCat(base * 100),
                                     "SAI_QUEUE_STAT_SHARED_WATERMARK_BYTES",
                                     absl::StrCat(4096 * q)};
      if (q == 3 || q == 4) {
        qs.insert(qs.end(),
                  {"PFC_WD_STATUS", "operational", "PFC_WD_QUEUE_STATS_DEADLOCK_DETECTED", "0",
                   "PFC_WD_QUEUE_STATS_DEADLOCK_RESTORED", "0", "PFC_WD_DETECTION_TIME", "200000"});
      }
      counters.Add(qs);
    }
  }
  state.Add({"HSET", "QUEUE_COUNTER_CAPABILITIES|WRED_ECN_QUEUE_ECN_MARKED_PKT_COUNTER",
             "isSupported", "true"});
  if (absl::Status s = Run(*ep, 4, config); !s.ok()) return s;
  if (absl::Status s = Run(*ep, 2, counters); !s.ok()) return s;
  if (absl::Status s = Run(*ep, 6, state); !s.ok()) return s;
  return Run(*ep, 0, appl);
}

}  // namespace rocetune::testing
