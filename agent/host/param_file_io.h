#ifndef ROCETUNE_AGENT_HOST_PARAM_FILE_IO_H_
#define ROCETUNE_AGENT_HOST_PARAM_FILE_IO_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace rocetune {

// The file access under the sysfs / debugfs parameter stores. The real
// implementation uses open/read/write/close; tests substitute one that injects
// errors a root-owned test cannot produce on a real filesystem (EIO).
class ParamFileIo {
 public:
  virtual ~ParamFileIo() = default;
  // Whole contents of `path`. Errors name the path and the errno text.
  virtual absl::StatusOr<std::string> Read(const std::string& path) = 0;
  // Replaces the contents of `path` with `data` in one write(2). Errors name
  // the path and the errno text; the code follows the errno (see ErrnoToStatus).
  virtual absl::Status Write(const std::string& path, const std::string& data) = 0;

  // The process-wide real implementation.
  static ParamFileIo* Real();
};

// Maps an errno to a status code: ENOENT/ENODEV/ENXIO -> kUnavailable,
// EACCES/EPERM/EROFS -> kPermissionDenied, EINVAL/ERANGE -> kInvalidArgument,
// EOPNOTSUPP -> kUnimplemented, everything else (EIO, ...) -> kInternal.
// The message is "<what>: <strerror(err)> (errno <err>)".
absl::Status ErrnoToStatus(int err, const std::string& what);

// Writes `value` ("%d\n") for parameter `name` of `device` to `path`; on failure
// the status keeps the I/O error's code and names device, parameter and value.
absl::Status WriteParamValue(ParamFileIo* io, const std::string& path, const std::string& device,
                             const std::string& name, int64_t value);

// Parses a sysfs/debugfs integer ("%d\n" or "%u\n"); kDataLoss naming `path` on garbage.
absl::StatusOr<int64_t> ParseParamValue(const std::string& text, const std::string& path);

}  // namespace rocetune

#endif  // ROCETUNE_AGENT_HOST_PARAM_FILE_IO_H_
