#include "agent/switch/sonic_counter_source.h"

#include <map>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "agent/switch/switch_counter_names.h"
#include "agent/switch/switch_inventory.h"
#include "model/counter_names.h"

namespace rocetune {
namespace {

namespace cn = counter_names;
namespace sn = switch_counter_names;

struct QueueStat {
  const char* sai;
  const char* name;
  CounterKind kind = CounterKind::kCounter;
};

constexpr QueueStat kQueueStats[] = {
    {"SAI_QUEUE_STAT_PACKETS", sn::kQueuePackets},
    {"SAI_QUEUE_STAT_BYTES", sn::kQueueBytes},
    {"SAI_QUEUE_STAT_DROPPED_PACKETS", sn::kQueueDroppedPackets},
    {"SAI_QUEUE_STAT_DROPPED_BYTES", sn::kQueueDroppedBytes},
    {"SAI_QUEUE_STAT_WRED_ECN_MARKED_PACKETS", sn::kQueueEcnMarkedPackets},
    {"SAI_QUEUE_STAT_WRED_ECN_MARKED_BYTES", sn::kQueueEcnMarkedBytes},
    {"SAI_QUEUE_STAT_CURR_OCCUPANCY_BYTES", sn::kQueueOccupancyBytes, CounterKind::kLevel},
    {"SAI_QUEUE_STAT_SHARED_WATERMARK_BYTES", sn::kQueueWatermarkBytes, CounterKind::kLevel},
    {"PFC_WD_QUEUE_STATS_DEADLOCK_DETECTED", sn::kPfcwdStormsDetected},
    {"PFC_WD_QUEUE_STATS_DEADLOCK_RESTORED", sn::kPfcwdStormsRestored},
    {"PFC_WD_STATUS", sn::kPfcwdStormed, CounterKind::kLevel},
};

std::map<std::string, std::string> ToMap(const RedisReply& r) {
  std::map<std::string, std::string> m;
  for (auto& [k, v] : HashPairs(r)) m[k] = v;
  return m;
}

}  // namespace

SonicCounterSource::SonicCounterSource(RedisClient* counters_db, SonicCounterSourceOptions options)
    : db_(counters_db), options_(options) {}

absl::Status SonicCounterSource::LoadMaps() {
  RedisBatch b;
  b.Add({"HGETALL", "COUNTERS_PORT_NAME_MAP"});
  b.Add({"HGETALL", "COUNTERS_QUEUE_NAME_MAP"});
  b.Add({"HGETALL", "COUNTERS_QUEUE_TYPE_MAP"});
  std::vector<RedisReply> r;
  if (absl::Status s = db_->Pipeline(b, &r); !s.ok()) return s;
  for (const RedisReply& x : r) {
    if (x.is_error()) {
      return absl::InternalError(absl::StrCat(db_->Describe(), ": name maps: ", x.str));
    }
  }
  last_map_load_ = std::chrono::steady_clock::now();
  std::map<std::string, std::string> ports = ToMap(r[0]);
  std::map<std::string, std::string> queues = ToMap(r[1]);
  std::map<std::string, std::string> types = ToMap(r[2]);
  std::vector<std::pair<std::string, std::string>> port_list(ports.begin(), ports.end());
  std::sort(port_list.begin(), port_list.end(),
            [](const auto& a, const auto& b) { return PortNameLess(a.first, b.first); });
  objects_.clear();
  batch_.Clear();
  for (const auto& [port, oid] : port_list) {
    Object o;
    std::vector<std::string> argv = {"HMGET", absl::StrCat("COUNTERS:", oid)};
    for (int p = 0; p < 8; ++p) {
      const std::pair<std::string, const char*> stats[] = {
          {absl::StrCat("SAI_PORT_STAT_PFC_", p, "_RX_PKTS"), cn::kRxPfcPauseFrames},
          {absl::StrCat("SAI_PORT_STAT_PFC_", p, "_TX_PKTS"), cn::kTxPfcPauseFrames},
          {absl::StrCat("SAI_PORT_STAT_PFC_", p, "_RX_PAUSE_DURATION_US"),
           cn::kRxPfcPauseDurationUs},
      };
      for (const auto& [sai, name] : stats) {
        argv.push_back(sai);
        o.fields.push_back({CounterKey{port, 0, p, name}, 0, CounterKind::kCounter, false});
      }
    }
    batch_.Add(argv);
    objects_.push_back(std::move(o));
  }
  // Queues sorted by (port, position).
  std::vector<std::tuple<std::string, int, std::string>> qlist;
  for (const auto& [name, oid] : queues) {
    size_t colon = name.rfind(':');
    int pos = 0;
    if (colon == std::string::npos || !absl::SimpleAtoi(name.substr(colon + 1), &pos)) continue;
    auto t = types.find(oid);
    if (!options_.multicast_queues && t != types.end() && t->second == "SAI_QUEUE_TYPE_MULTICAST") {
      continue;
    }
    qlist.emplace_back(name.substr(0, colon), pos, oid);
  }
  std::sort(qlist.begin(), qlist.end(), [](const auto& a, const auto& b) {
    if (std::get<0>(a) != std::get<0>(b)) return PortNameLess(std::get<0>(a), std::get<0>(b));
    return std::get<1>(a) < std::get<1>(b);
  });
  for (const auto& [port, pos, oid] : qlist) {
    Object o;
    std::vector<std::string> argv = {"HMGET", absl::StrCat("COUNTERS:", oid)};
    for (const QueueStat& s : kQueueStats) {
      argv.push_back(s.sai);
      o.fields.push_back({CounterKey{port, static_cast<uint32_t>(pos), -1, s.name}, 0, s.kind,
                          s.name == sn::kPfcwdStormed});
    }
    batch_.Add(argv);
    objects_.push_back(std::move(o));
  }
  size_t n = 0;
  for (const Object& o : objects_) n += o.fields.size();
  uint64_t id = n > 0 ? NewCounterKeyIds(n) : 0;
  for (Object& o : objects_) {
    for (Field& f : o.fields) f.key_id = id++;
  }
  maps_loaded_ = !objects_.empty();
  stale_ = false;
  return absl::OkStatus();
}

absl::Status SonicCounterSource::CollectInto(CounterBuffer* out) {
  const auto now = std::chrono::steady_clock::now();
  const bool due = last_map_load_ == std::chrono::steady_clock::time_point() ||
                   now - last_map_load_ >= std::chrono::microseconds(
                                               absl::ToInt64Microseconds(options_.map_refresh_min));
  if ((!maps_loaded_ || stale_) && due) {
    if (absl::Status s = LoadMaps(); !s.ok()) return s;
  }
  if (!maps_loaded_) return absl::OkStatus();  // no maps yet: counter polling has not started
  if (absl::Status s = db_->Pipeline(batch_, &replies_); !s.ok()) return s;
  for (size_t i = 0; i < objects_.size(); ++i) {
    const RedisReply& r = replies_[i];
    const Object& o = objects_[i];
    if (r.type != RedisReply::Type::kArray || r.elements.size() != o.fields.size()) {
      stale_ = true;
      continue;
    }
    bool any = false;
    for (size_t j = 0; j < o.fields.size(); ++j) {
      const RedisReply& v = r.elements[j];
      if (v.type != RedisReply::Type::kString) continue;
      uint64_t value = 0;
      if (o.fields[j].stormed_status) {
        value = v.str == "stormed" ? 1 : 0;
      } else if (!absl::SimpleAtoi(v.str, &value)) {
        continue;  // non-integer text (never for SAI counters)
      }
      any = true;
      CounterValue& cv = out->AppendKeyed(o.fields[j].key_id, o.fields[j].key);
      cv.value = value;
      cv.width_bits = 64;
      cv.kind = o.fields[j].kind;
    }
    if (!any) stale_ = true;  // the object's hash is gone: OIDs may have changed
  }
  return absl::OkStatus();
}

absl::Status SonicCounterSource::Collect(std::vector<CounterValue>* out) {
  CounterBuffer buf;
  absl::Status s = CollectInto(&buf);
  for (const CounterValue& v : buf) out->push_back(v);
  return s;
}

}  // namespace rocetune
