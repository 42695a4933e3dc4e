#ifndef ROCETUNE_AGENT_HOST_COUNTER_SOURCE_H_
#define ROCETUNE_AGENT_HOST_COUNTER_SOURCE_H_

#include <cstdint>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/status/status.h"

namespace rocetune {

// Identifies one counter: (device, port[, priority], canonical name).
struct CounterKey {
  std::string device;  // RDMA device, e.g. "mlx5_0"
  uint32_t port = 1;
  int32_t priority = -1;  // -1: not per priority
  std::string name;       // canonical name (see model/counter_names.h) or raw vendor name

  friend bool operator==(const CounterKey& a, const CounterKey& b) {
    return std::tie(a.device, a.port, a.priority, a.name) ==
           std::tie(b.device, b.port, b.priority, b.name);
  }
  friend bool operator<(const CounterKey& a, const CounterKey& b) {
    return std::tie(a.device, a.port, a.priority, a.name) <
           std::tie(b.device, b.port, b.priority, b.name);
  }
  template <typename H>
  friend H AbslHashValue(H h, const CounterKey& k) {
    return H::combine(std::move(h), k.device, k.port, k.priority, k.name);
  }
};

// What a value is: a counter only grows (the sampler turns it into deltas and
// rates); a level goes up and down (a queue's occupancy, a watermark, a state)
// and is reported as read, every round (v1::LevelSample).
enum class CounterKind : uint8_t { kCounter, kLevel };

struct CounterValue {
  CounterKey key;
  uint64_t value = 0;
  CounterKind kind = CounterKind::kCounter;
  // Hardware width of the counter: 32 or 64. A 32-bit counter that goes down
  // from near 2^32 wrapped; any other decrease is a reset (see the sampler).
  uint8_t width_bits = 64;
  // 0, or an id from NewCounterKeyIds that stands for `key`: two values with
  // the same nonzero id have equal keys, so comparing ids is enough (the
  // sampler's alignment, CounterBuffer::AppendKeyed). Whoever sets an id sets
  // the key along with it; code that changes `key` in place must reset it to
  // 0 (CounterBuffer::Append does).
  uint64_t key_id = 0;
};

// `n` fresh key ids (the first is returned; the others follow it), never 0 and
// never handed out twice in this process. Thread-safe.
uint64_t NewCounterKeyIds(size_t n);

// Sets *dst to src, copying a string only when it differs: refilling a kept
// element with the key it already holds (the steady state) is a compare.
inline void AssignCounterKey(const CounterKey& src, CounterKey* dst) {
  if (dst->device != src.device) dst->device = src.device;
  dst->port = src.port;
  dst->priority = src.priority;
  if (dst->name != src.name) dst->name = src.name;
}

// A list of CounterValues meant to be refilled every sampling round. Clear()
// keeps the elements (and their strings' capacity), and Append() hands back
// the next kept element, so refilling it with the same keys round after round
// allocates nothing: assigning a key of the same length is a copy into
// existing storage.
class CounterBuffer {
 public:
  // Forgets the values; keeps the storage.
  void Clear() { size_ = 0; }
  // The next element. It still holds what that slot held before (a stale key
  // and value; its key_id is reset to 0 and its kind to kCounter): the caller
  // sets every other field.
  CounterValue& Append() {
    if (size_ == values_.size()) values_.emplace_back();
    CounterValue& v = values_[size_++];
    v.key_id = 0;
    v.kind = CounterKind::kCounter;
    return v;
  }
  void Append(CounterValue v) { Append() = std::move(v); }
  // The next element with `key` and `key_id` (from NewCounterKeyIds) set:
  // when the kept slot already holds that id (the steady state of a source
  // refilling the buffer in the same order), the key is not even compared.
  // The caller sets value and width_bits, and kind for a level (it is reset
  // to kCounter here).
  CounterValue& AppendKeyed(uint64_t key_id, const CounterKey& key) {
    if (size_ == values_.size()) values_.emplace_back();
    CounterValue& v = values_[size_++];
    v.kind = CounterKind::kCounter;
    if (key_id == 0 || v.key_id != key_id) {
      AssignCounterKey(key, &v.key);
      v.key_id = key_id;
    }
    return v;
  }
  void Reserve(size_t n) { values_.reserve(n); }

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  CounterValue& operator[](size_t i) { return values_[i]; }
  const CounterValue& operator[](size_t i) const { return values_[i]; }
  const CounterValue* begin() const { return values_.data(); }
  const CounterValue* end() const { return values_.data() + size_; }

  void swap(CounterBuffer& other) {
    values_.swap(other.values_);
    std::swap(size_, other.size_);
  }

 private:
  std::vector<CounterValue> values_;  // [0, size_) live, the rest kept for reuse
  size_t size_ = 0;
};

// Hardware seam: a snapshot of named u64 counters, and of levels marked
// CounterKind::kLevel (switch sources only, today). Real implementations: sysfs
// hw_counters/ and counters/, RDMA netlink statistics, ethtool stats, SONiC's
// COUNTERS_DB; the fabric simulator provides its own.
class CounterSource {
 public:
  virtual ~CounterSource() = default;
  // Short name of the mechanism: "sysfs", "netlink", "ethtool", "sim".
  virtual std::string name() const = 0;
  // Appends the current value of every counter this source knows to `out`.
  // A partially readable source appends what it could and returns OK; it fails
  // only when nothing could be read (kUnavailable for a missing device).
  virtual absl::Status Collect(std::vector<CounterValue>* out) = 0;
  // Collect into a buffer reused across rounds (what the Sampler calls each
  // interval); same contract as Collect. Sources read every round override it
  // to fill the buffer's kept elements in place; the default collects into a
  // temporary vector and moves the values over.
  virtual absl::Status CollectInto(CounterBuffer* out) {
    std::vector<CounterValue> values;
    absl::Status s = Collect(&values);
    for (CounterValue& v : values) out->Append(std::move(v));
    return s;
  }
};

}  // namespace rocetune

#endif  // ROCETUNE_AGENT_HOST_COUNTER_SOURCE_H_
