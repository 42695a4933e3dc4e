#ifndef ROCETUNE_AGENT_HOST_SYSFS_COUNTER_SOURCE_H_
#define ROCETUNE_AGENT_HOST_SYSFS_COUNTER_SOURCE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "agent/host/counter_source.h"
#include "model/counter_names.h"

namespace rocetune {

struct SysfsCounterOptions {
  bool hw_counters = true;    // ports/<p>/hw_counters/* (and device-level hw_counters/ as port 0)
  bool port_counters = true;  // ports/<p>/counters/* (PMA; port_*_data in 4-byte words)
  std::vector<std::string> devices;  // RDMA device names to read; empty = every device
  // Directory listings are cached and redone after this many rounds, or at
  // once when a file or device disappears.
  int relist_every_rounds = 60;
  size_t max_open_files = 2048;
};

// CounterSource over <sysfs_root>/class/infiniband/<dev>/ports/<p>/{hw_counters,counters}.
// Names are mapped with counter_names.h (vendor from the device's driver link or
// name); `lifespan` is skipped. When two vendor files of one port map to the
// same canonical name, the first (in directory order) gets the canonical name
// and the other keeps its vendor name.
//
// Cost: the directories are listed and every counter file is opened once (at
// the first Collect, and at once after a read error); every
// `relist_every_rounds` rounds the directories are listed again, and a file
// whose entry still lists the inode its descriptor was opened on keeps that
// descriptor (new, replaced or re-created files are opened, vanished ones
// closed). Each round then costs one pread(fd, 0) per counter plus one fstat()
// per device. sysfs regenerates an attribute on every read from offset
// 0, so the values are fresh; a removed sysfs node fails the pread (ENODEV).
// Beyond `max_open_files` descriptors the remaining files are opened per read.
// CollectInto (the sampler's path) allocates nothing in a steady round: each
// value goes into a kept buffer element that already holds its key and key id
// (CounterBuffer::AppendKeyed: the id is compared, not the key).
//
// Degraded modes: a listed entry that is not a readable regular file (a
// directory, FIFO, dangling symlink) or whose read fails or is not a number is
// skipped, counted in skipped_files() (once per listing for entries that
// cannot be opened, once per round for failing reads) and logged once per
// path. A device whose directory has vanished is logged once and relisted;
// Collect returns kUnavailable when nothing at all could be read.
class SysfsCounterSource : public CounterSource {
 public:
  explicit SysfsCounterSource(std::string sysfs_root, SysfsCounterOptions options = {});
  ~SysfsCounterSource() override;
  SysfsCounterSource(const SysfsCounterSource&) = delete;
  SysfsCounterSource& operator=(const SysfsCounterSource&) = delete;

  std::string name() const override { return "sysfs"; }
  absl::Status Collect(std::vector<CounterValue>* out) override;
  absl::Status CollectInto(CounterBuffer* out) override;

  // Files skipped since construction (each skip of each round counts).
  uint64_t skipped_files() const { return skipped_files_; }
  // Counter files opened by listings since construction (a file kept open
  // across a relist is not opened again; per-read files count at listing).
  uint64_t files_opened() const { return files_opened_; }

 private:
  struct File {
    std::string path;
    int fd = -1;         // -1: opened per read
    uint64_t inode = 0;  // of the file when it was opened
    CounterKey key;
    uint64_t key_id = 0;  // names `key` (CounterValue::key_id); new at each listing
    uint64_t multiplier = 1;
    uint8_t width_bits = 64;
  };
  struct Device {
    std::string name;
    std::string dir;
    std::vector<File> files;
  };

  // One round: every value goes into the element `next(file)` returns, which
  // already holds the file's key and key id. A template (two instances, in
  // the .cc) so that the per-counter call is inlined.
  template <typename Next>
  absl::Status CollectWith(Next next);
  // Open files of the previous listing by path (pointers into it).
  using OpenByPath = absl::flat_hash_map<std::string, File*>;
  absl::Status Relist(bool reuse_descriptors);
  void CloseAll();
  static bool DeviceStillThere(const Device& d);
  // Opens (or not, past max_open_files) a listed file; false when it cannot be
  // read as a regular file (counted and logged).
  bool OpenFile(File* f);
  void ListCounterDir(const std::string& dir, const std::string& device, uint32_t port, bool hw,
                      CounterVendor vendor, OpenByPath* reusable, std::vector<std::string>* used,
                      std::vector<File>* files);

  std::string root_;
  SysfsCounterOptions options_;
  std::vector<Device> plan_;
  int rounds_since_list_ = 0;
  bool need_relist_ = true;
  uint64_t skipped_files_ = 0;
  uint64_t files_opened_ = 0;
  size_t open_files_ = 0;
};

}  // namespace rocetune

#endif  // ROCETUNE_AGENT_HOST_SYSFS_COUNTER_SOURCE_H_
