#include "agent/host/counter_source.h"

#include <atomic>

namespace rocetune {

uint64_t NewCounterKeyIds(size_t n) {
  static std::atomic<uint64_t> next{1};
  return next.fetch_add(n == 0 ? 1 : n, std::memory_order_relaxed);
}

}  // namespace rocetune
