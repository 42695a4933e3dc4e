#ifndef ROCETUNE_SIM_BYTE_FIFO_H_
#define ROCETUNE_SIM_BYTE_FIFO_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace rocetune::sim {

// Bytes one flow added to a queue in one run of consecutive arrivals. The
// owner is (flow_id, slot, hop): the flow, the slot that holds it, and the
// index of this queue's link in its path.
struct ByteRun {
  uint64_t flow_id = 0;
  int slot = 0;
  int hop = 0;
  double bytes = 0;
};

// The arrival order of one egress (port, priority) queue as a FIFO of byte
// runs: bytes that arrive behind others leave after them.
class ByteFifo {
 public:
  bool empty() const { return head_ == runs_.size(); }
  // Runs waiting, including stale ones not yet discarded.
  size_t size() const { return runs_.size() - head_; }
  // The oldest run; not empty().
  const ByteRun& front() const { return runs_[head_]; }

  // Appends `bytes` for the owner; merges with the newest run when it has the
  // same owner.
  void Push(uint64_t flow_id, int slot, int hop, double bytes) {
    if (!empty()) {
      ByteRun& back = runs_.back();
      if (back.slot == slot && back.flow_id == flow_id && back.hop == hop) {
        back.bytes += bytes;
        return;
      }
    }
    runs_.push_back(ByteRun{flow_id, slot, hop, bytes});
  }

  // Serves up to `budget` bytes from the head, oldest first, and returns the
  // bytes served. Runs for which `live(run)` is false (their owner left) are
  // discarded unserved, also when the budget is spent. A run that would keep
  // less than `dust` bytes is served whole, so the result may exceed `budget`
  // by less than `dust`. Calls `sink(run, bytes)` for every piece served, after
  // run.bytes has been reduced by it; a run reaching zero bytes leaves the FIFO.
  template <typename Live, typename Sink>
  double Serve(double budget, double dust, Live&& live, Sink&& sink) {
    double served = 0;
    while (!empty()) {
      ByteRun& run = runs_[head_];
      if (!live(static_cast<const ByteRun&>(run))) {
        ++head_;
        continue;
      }
      if (budget <= 0) break;
      double out = std::min(run.bytes, budget);
      if (run.bytes - out < dust) out = run.bytes;
      budget -= out;
      served += out;
      run.bytes -= out;
      sink(static_cast<const ByteRun&>(run), out);
      if (run.bytes <= 0) ++head_;
    }
    Compact();
    return served;
  }

  void Clear() {
    runs_.clear();
    head_ = 0;
  }

 private:
  // Drops served runs from the front once they are most of the storage.
  void Compact() {
    if (empty()) {
      Clear();
    } else if (head_ > 64 && head_ * 2 > runs_.size()) {
      runs_.erase(runs_.begin(), runs_.begin() + static_cast<std::ptrdiff_t>(head_));
      head_ = 0;
    }
  }

  std::vector<ByteRun> runs_;
  size_t head_ = 0;
};

}  // namespace rocetune::sim

#endif  // ROCETUNE_SIM_BYTE_FIFO_H_
