#ifndef ROCETUNE_AGENT_HOST_SYSFS_FILE_H_
#define ROCETUNE_AGENT_HOST_SYSFS_FILE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace rocetune {

// Small helpers for reading sysfs-like trees. All are safe on hostile trees: a
// directory, FIFO or dangling symlink where a file is expected yields an error,
// never a hang (files are opened O_NONBLOCK).

// Reads up to 4 KiB of a regular file. Errors: kNotFound (missing / dangling),
// kFailedPrecondition (not a regular file), kInternal (read error), each naming
// the path.
absl::StatusOr<std::string> ReadSysfsFile(const std::string& path);

// ReadSysfsFile with surrounding whitespace removed.
absl::StatusOr<std::string> ReadSysfsString(const std::string& path);

// Parses a file holding one unsigned decimal (as printed by "%llu\n").
// kInvalidArgument names the path and the text when it is not a number.
absl::StatusOr<uint64_t> ReadSysfsU64(const std::string& path);

// Entry names of a directory, sorted, without "." and "..". Names that are all
// digits sort numerically ("2" before "10"). kNotFound when it does not exist.
absl::StatusOr<std::vector<std::string>> ListSysfsDir(const std::string& path);

// A directory entry and the inode number the directory lists for it (d_ino).
struct SysfsDirEntry {
  std::string name;
  uint64_t inode = 0;
};

// ListSysfsDir with each entry's inode number, in the same order.
absl::StatusOr<std::vector<SysfsDirEntry>> ListSysfsDirEntries(const std::string& path);

// Basename of a symlink's target ("" when `path` is not a symlink).
std::string SymlinkBasename(const std::string& path);

}  // namespace rocetune

#endif  // ROCETUNE_AGENT_HOST_SYSFS_FILE_H_
