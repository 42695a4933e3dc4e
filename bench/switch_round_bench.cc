// Cost of one switch sampling round on a seeded 64-port SONiC switch, against a
// real redis-server started by this program (unix socket, persistence off).
//
// A round is what the agent does each sampling interval on a switch:
// Sampler::SampleOnce over SonicCounterSource (one pipelined HMGET per port
// and queue object, all in one round trip; the name maps are read before the
// timed rounds, as discovery is not part of a round) and the delta step.
// Baseline, same run, same counters: a naive reader that issues one HGET per
// counter (one round trip each), then the same delta step.
//
// Figures: Redis round trips per round (counted by the client), the agent
// process's CPU per round (CLOCK_PROCESS_CPUTIME_ID), redis-server's CPU per
// round (/proc/<pid>/stat), wall time per round; the ratios baseline/pipelined.
// The two alternate in ten chunks so a slow spell of the machine weighs on both.
//
// Usage: switch_round_bench [--rounds=N] (default 200 per variant)
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "agent/sampler.h"
#include "agent/switch/redis_client.h"
#include "agent/switch/sonic_counter_source.h"
#include "bench/proc_stats.h"
#include "daemon/clock.h"
#include "tests/agent/switch/redis_server.h"
#include "tests/agent/switch/sonic_seed.h"

namespace rocetune {
namespace {

double CpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

// The naive reader: the same counters, one HGET (one round trip) each.
class NaiveSource : public CounterSource {
 public:
  NaiveSource(RedisClient* db, std::vector<std::pair<std::string, std::string>> reads,
              std::vector<CounterKey> keys)
      : db_(db), reads_(std::move(reads)), keys_(std::move(keys)) {}
  std::string name() const override { return "naive_hget"; }
  absl::Status Collect(std::vector<CounterValue>* out) override {
    for (size_t i = 0; i < reads_.size(); ++i) {
      absl::StatusOr<RedisReply> r = db_->Command({"HGET", reads_[i].first, reads_[i].second});
      if (!r.ok()) return r.status();
      uint64_t v = 0;
      if (r->type != RedisReply::Type::kString || !absl::SimpleAtoi(r->str, &v)) continue;
      CounterValue cv;
      cv.key = keys_[i];
      cv.value = v;
      out->push_back(std::move(cv));
    }
    return absl::OkStatus();
  }

 private:
  RedisClient* db_;
  std::vector<std::pair<std::string, std::string>> reads_;
  std::vector<CounterKey> keys_;
};

struct Totals {
  double cpu = 0, redis_cpu = 0, wall = 0;
  uint64_t trips = 0, rounds = 0, samples = 0;
};

absl::Status Chunk(Sampler* sampler, RedisClient* db, pid_t redis_pid, int rounds, Totals* t) {
  uint64_t trips0 = db->round_trips();
  double cpu0 = CpuSeconds(), rcpu0 = bench::ProcessCpuSeconds(redis_pid);
  absl::Time w0 = absl::Now();
  SampleBatch batch;
  for (int i = 0; i < rounds; ++i) {
    if (absl::Status s = sampler->SampleOnce(&batch); !s.ok()) return s;
    t->samples += batch.samples.size();
  }
  t->wall += absl::ToDoubleSeconds(absl::Now() - w0);
  t->cpu += CpuSeconds() - cpu0;
  t->redis_cpu += bench::ProcessCpuSeconds(redis_pid) - rcpu0;
  t->trips += db->round_trips() - trips0;
  t->rounds += rounds;
  return absl::OkStatus();
}

int Main(int argc, char** argv) {
  int rounds = 200;
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--rounds=", 9) == 0 && absl::SimpleAtoi(argv[i] + 9, &rounds) &&
        rounds >= 10) {
      continue;
    }
    std::fprintf(stderr, "usage: switch_round_bench [--rounds=N>=10]\n");
    return 2;
  }
  char tmpl[] = "/tmp/switch_round_bench-XXXXXX";
  if (mkdtemp(tmpl) == nullptr) return 1;
  testing::RedisServer redis(tmpl);
  if (absl::Status s = redis.Start(); !s.ok()) {
    std::fprintf(stderr, "switch_round_bench: %s\n", std::string(s.message()).c_str());
    return 1;
  }
  testing::SonicSeedOptions seed;
  seed.ports = 64;
  if (absl::Status s = testing::SeedSonic(redis.endpoint(), seed); !s.ok()) {
    std::fprintf(stderr, "switch_round_bench: seed: %s\n", std::string(s.message()).c_str());
    return 1;
  }
  RedisEndpoint ep = *RedisEndpoint::Parse(redis.endpoint());
  RedisClient pipelined_db(ep, 2), naive_db(ep, 2);
  SonicCounterSource source(&pipelined_db);
  std::vector<CounterValue> first;
  if (absl::Status s = source.Collect(&first); !s.ok()) {
    std::fprintf(stderr, "switch_round_bench: %s\n", std::string(s.message()).c_str());
    return 1;
  }
  // The naive reader reads exactly the counters the pipelined source found.
  std::vector<std::pair<std::string, std::string>> reads;
  std::vector<CounterKey> keys;
  for (const CounterValue& v : first) {
    // Reconstruct the SAI field from the seed's layout.
    int idx = -1;
    std::string port = v.key.device;
    idx = std::stoi(port.substr(8)) / 4;
    std::string field;
    const std::string& n = v.key.name;
    if (n == "rx_pfc_pause_frames" || n == "tx_pfc_pause_frames" ||
        n == "rx_pfc_pause_duration_us") {
      field = absl::StrCat("SAI_PORT_STAT_PFC_", v.key.priority,
                           n == "rx_pfc_pause_frames"   ? "_RX_PKTS"
                           : n == "tx_pfc_pause_frames" ? "_TX_PKTS"
                                                        : "_RX_PAUSE_DURATION_US");
      reads.emplace_back("COUNTERS:" + testing::SeedPortOid(idx), field);
    } else {
      static const std::pair<const char*, const char*> kMap[] = {
          {"queue_packets", "SAI_QUEUE_STAT_PACKETS"},
          {"queue_bytes", "SAI_QUEUE_STAT_BYTES"},
          {"queue_dropped_packets", "SAI_QUEUE_STAT_DROPPED_PACKETS"},
          {"queue_dropped_bytes", "SAI_QUEUE_STAT_DROPPED_BYTES"},
          {"queue_ecn_marked_packets", "SAI_QUEUE_STAT_WRED_ECN_MARKED_PACKETS"},
          {"queue_ecn_marked_bytes", "SAI_QUEUE_STAT_WRED_ECN_MARKED_BYTES"},
          {"queue_watermark_bytes", "SAI_QUEUE_STAT_SHARED_WATERMARK_BYTES"},
          {"pfcwd_storms_detected", "PFC_WD_QUEUE_STATS_DEADLOCK_DETECTED"},
          {"pfcwd_storms_restored", "PFC_WD_QUEUE_STATS_DEADLOCK_RESTORED"},
          {"pfcwd_stormed", "PFC_WD_STATUS"}};
      for (const auto& [canon, sai] : kMap) {
        if (n == canon) field = sai;
      }
      if (field.empty() || n == "pfcwd_stormed") continue;  // status text: not a counter read
      reads.emplace_back("COUNTERS:" + testing::SeedQueueOid(idx, static_cast<int>(v.key.port)),
                         field);
    }
    keys.push_back(v.key);
  }
  NaiveSource naive(&naive_db, std::move(reads), std::move(keys));
  auto s1 = Sampler::Create(&source, Clock::Real(), absl::Milliseconds(10));
  auto s2 = Sampler::Create(&naive, Clock::Real(), absl::Milliseconds(10));
  Totals piped, base;
  // Warm-up (baselines, connections), then ten alternating chunks.
  if (!Chunk(s1->get(), &pipelined_db, redis.pid(), 2, &piped).ok() ||
      !Chunk(s2->get(), &naive_db, redis.pid(), 2, &base).ok()) {
    return 1;
  }
  piped = Totals{};
  base = Totals{};
  const int chunk = rounds / 10;
  for (int c = 0; c < 10; ++c) {
    if (absl::Status s = Chunk(s1->get(), &pipelined_db, redis.pid(), chunk, &piped); !s.ok()) {
      std::fprintf(stderr, "switch_round_bench: %s\n", std::string(s.message()).c_str());
      return 1;
    }
    if (absl::Status s = Chunk(s2->get(), &naive_db, redis.pid(), chunk, &base); !s.ok()) {
      std::fprintf(stderr, "switch_round_bench: %s\n", std::string(s.message()).c_str());
      return 1;
    }
  }
  redis.Stop();
  auto per = [](double v, const Totals& t) { return v * 1e6 / t.rounds; };
  const double trips_p = static_cast<double>(piped.trips) / piped.rounds;
  const double trips_b = static_cast<double>(base.trips) / base.rounds;
  std::printf(
      "BENCH switch_round_bench ports=64 counters_per_round=%zu round_trips_per_round=%.1f "
      "baseline_round_trips_per_round=%.1f agent_cpu_us_per_round=%.1f "
      "baseline_agent_cpu_us_per_round=%.1f redis_cpu_us_per_round=%.1f "
      "baseline_redis_cpu_us_per_round=%.1f wall_us_per_round=%.1f "
      "baseline_wall_us_per_round=%.1f round_trip_ratio=%.0fx agent_cpu_ratio=%.1fx "
      "redis_cpu_ratio=%.1fx wall_ratio=%.1fx\n",
      first.size(), trips_p, trips_b, per(piped.cpu, piped), per(base.cpu, base),
      per(piped.redis_cpu, piped), per(base.redis_cpu, base), per(piped.wall, piped),
      per(base.wall, base), trips_b / trips_p, base.cpu / piped.cpu,
      base.redis_cpu / std::max(piped.redis_cpu, 1e-9), base.wall / piped.wall);
  return 0;
}

}  // namespace
}  // namespace rocetune

int main(int argc, char** argv) { return rocetune::Main(argc, argv); }
