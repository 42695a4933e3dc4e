// The agent's counter parsers: a sysfs counter file and a saved ethtool -S dump.
#include <cstddef>
#include <cstdint>
#include <string>

#include "agent/host/ethtool_stats.h"
#include "agent/host/sysfs_file.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  {
    rocetune::fuzz::MemFile f(data, size);
    absl::StatusOr<uint64_t> v = rocetune::ReadSysfsU64(f.path());
    (void)v;
  }
  const absl::string_view text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<std::vector<rocetune::CounterValue>> c =
      rocetune::ParseEthtoolDump(text, "mlx5_0", 1);
  (void)c;
  return 0;
}
