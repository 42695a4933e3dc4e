#ifndef ROCETUNE_AGENT_SWITCH_SONIC_COUNTER_SOURCE_H_
#define ROCETUNE_AGENT_SWITCH_SONIC_COUNTER_SOURCE_H_

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "agent/host/counter_source.h"
#include "agent/switch/redis_client.h"

namespace rocetune {

struct SonicCounterSourceOptions {
  // Queues of type SAI_QUEUE_TYPE_MULTICAST are skipped unless this is set.
  bool multicast_queues = false;
  // When the name maps are missing or an object's counters vanished (OIDs
  // change on reload), the maps are re-read at most this often.
  absl::Duration map_refresh_min = absl::Seconds(10);
};

// CounterSource over SONiC's COUNTERS_DB. The name maps
// (COUNTERS_PORT_NAME_MAP, COUNTERS_QUEUE_NAME_MAP and the queue type map) are
// read once (one pipelined round trip) and again only when stale; every round
// is then one round trip: one pipelined HMGET of the fields rocetune reads per
// port and queue object (COUNTERS:oid:...). Values are SAI u64 counters
// (width 64: a decrease is a reset), except the levels queue_occupancy_bytes,
// queue_watermark_bytes and pfcwd_stormed (CounterKind::kLevel). Canonical
// names: switch_counter_names.h.
// Fields a platform does not poll are skipped; a round with no maps yet
// appends nothing and returns OK (the maps appear once counter polling starts).
class SonicCounterSource : public CounterSource {
 public:
  // `counters_db` is connected to database 2; not owned.
  explicit SonicCounterSource(RedisClient* counters_db, SonicCounterSourceOptions options = {});

  std::string name() const override { return "sonic_redis"; }
  absl::Status Collect(std::vector<CounterValue>* out) override;
  absl::Status CollectInto(CounterBuffer* out) override;

  // Objects (ports + queues) read per round; 0 before the maps are loaded.
  size_t objects() const { return objects_.size(); }

 private:
  struct Field {
    CounterKey key;
    uint64_t key_id = 0;
    CounterKind kind = CounterKind::kCounter;
    bool stormed_status = false;  // PFC_WD_STATUS: "stormed" -> 1, else 0
  };
  struct Object {
    std::vector<Field> fields;  // in HMGET order
  };
  absl::Status LoadMaps();

  RedisClient* db_;
  SonicCounterSourceOptions options_;
  bool maps_loaded_ = false;
  bool stale_ = false;
  std::chrono::steady_clock::time_point last_map_load_;
  std::vector<Object> objects_;
  RedisBatch batch_;                 // the per-round HMGETs
  std::vector<RedisReply> replies_;  // reused
};

}  // namespace rocetune

#endif  // ROCETUNE_AGENT_SWITCH_SONIC_COUNTER_SOURCE_H_
