#ifndef ROCETUNE_AGENT_HOST_SYSFS_COUNTER_SOURCE_H_
#define ROCETUNE_AGENT_HOST_SYSFS_COUNTER_SOURCE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "agent/host/counter_names.h"
#include "agent/host/counter_source.h"

namespace rocetune {

struct SysfsCounterOptions {
  bool hw_counters = true;    // ports/<p>/hw_counters/* (and device-level hw_counters/ as port 0)
  bool port_counters = true;  // ports/<p>/counters/* (PMA; port_*_data in 4-byte words)
  std::vector<std::string> devices;  // RDMA device names to read; empty = every device
  // Directory listings are cached and redone after this many rounds, or at
  // once when a file or device disappears.
  int relist_every_rounds = 60;
};

// CounterSource over <sysfs_root>/class/infiniband/<dev>/ports/<p>/{hw_counters,counters}.
// Names are mapped with counter_names.h (vendor from the device's driver link or
// name); `lifespan` is skipped. When two vendor files of one port map to the
// same canonical name, the first (in directory order) gets the canonical name
// and the other keeps its vendor name.
// A file that is missing, not a regular file (directory, FIFO), a dangling
// symlink or not a number is skipped, counted in skipped_files() and logged
// once per path. A listed device whose directory has vanished is logged once;
// Collect returns kUnavailable when nothing at all could be read.
class SysfsCounterSource : public CounterSource {
 public:
  explicit SysfsCounterSource(std::string sysfs_root, SysfsCounterOptions options = {});

  std::string name() const override { return "sysfs"; }
  absl::Status Collect(std::vector<CounterValue>* out) override;

  // Files skipped since construction (each skip of each round counts).
  uint64_t skipped_files() const { return skipped_files_; }

 private:
  struct File {
    std::string path;
    CounterKey key;
    uint64_t multiplier = 1;
    uint8_t width_bits = 64;
  };
  struct Device {
    std::string name;
    std::string dir;
    std::vector<File> files;
  };

  absl::Status Relist();
  void ListCounterDir(const std::string& dir, const std::string& device, uint32_t port, bool hw,
                      CounterVendor vendor, std::vector<std::string>* used,
                      std::vector<File>* files);

  std::string root_;
  SysfsCounterOptions options_;
  std::vector<Device> plan_;
  int rounds_since_list_ = 0;
  bool need_relist_ = true;
  uint64_t skipped_files_ = 0;
};

}  // namespace rocetune

#endif  // ROCETUNE_AGENT_HOST_SYSFS_COUNTER_SOURCE_H_
