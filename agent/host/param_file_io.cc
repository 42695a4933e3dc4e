#include "agent/host/param_file_io.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"

namespace rocetune {
namespace {

class RealParamFileIo : public ParamFileIo {
 public:
  absl::StatusOr<std::string> Read(const std::string& path) override {
    int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return ErrnoToStatus(errno, absl::StrCat("open ", path));
    std::string out;
    char buf[256];
    while (true) {
      ssize_t n = read(fd, buf, sizeof(buf));
      if (n < 0) {
        if (errno == EINTR) continue;
        int err = errno;
        close(fd);
        return ErrnoToStatus(err, absl::StrCat("read ", path));
      }
      if (n == 0) break;
      out.append(buf, static_cast<size_t>(n));
      if (out.size() > (1 << 16)) break;  // parameter files are a few bytes
    }
    close(fd);
    return out;
  }

  // sysfs and debugfs take a value in one write() (there is no truncated
  // state to see). Any other filesystem is a fixture tree standing in for
  // them: the value goes to a temp file renamed over the parameter file, so a
  // process killed mid-write leaves the old or the new value, as on sysfs.
  absl::Status Write(const std::string& path, const std::string& data) override {
    int fd = open(path.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0) return ErrnoToStatus(errno, absl::StrCat("open ", path, " for writing"));
    struct statfs fs;
    if (fstatfs(fd, &fs) == 0 && fs.f_type != SYSFS_MAGIC && fs.f_type != DEBUGFS_MAGIC &&
        fs.f_type != TRACEFS_MAGIC) {
      struct stat st;
      const mode_t mode = fstat(fd, &st) == 0 ? (st.st_mode & 07777) : 0644;
      close(fd);
      return ReplaceFile(path, data, mode);
    }
    ssize_t n;
    do {
      n = write(fd, data.data(), data.size());
    } while (n < 0 && errno == EINTR);
    if (n < 0) {
      int err = errno;
      close(fd);
      return ErrnoToStatus(err, absl::StrCat("write ", path));
    }
    if (static_cast<size_t>(n) != data.size()) {
      close(fd);
      return absl::InternalError(
          absl::StrCat("write ", path, ": short write (", n, " of ", data.size(), " bytes)"));
    }
    if (close(fd) != 0) return ErrnoToStatus(errno, absl::StrCat("close ", path));
    return absl::OkStatus();
  }

 private:
  // Writes `data` to a temp file beside the resolved `path` and renames it over.
  static absl::Status ReplaceFile(const std::string& path, const std::string& data, mode_t mode) {
    char* resolved = realpath(path.c_str(), nullptr);
    if (resolved == nullptr) return ErrnoToStatus(errno, absl::StrCat("resolve ", path));
    const std::string target = resolved;
    free(resolved);
    const std::string tmp = absl::StrCat(target, ".rocetune-tmp");
    int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
    if (fd < 0) return ErrnoToStatus(errno, absl::StrCat("open ", tmp, " for writing"));
    ssize_t n;
    do {
      n = write(fd, data.data(), data.size());
    } while (n < 0 && errno == EINTR);
    const int err = errno;
    if (close(fd) != 0 || n < 0 || static_cast<size_t>(n) != data.size()) {
      unlink(tmp.c_str());
      return ErrnoToStatus(n < 0 ? err : EIO, absl::StrCat("write ", tmp));
    }
    if (rename(tmp.c_str(), target.c_str()) != 0) {
      const int rerr = errno;
      unlink(tmp.c_str());
      return ErrnoToStatus(rerr, absl::StrCat("rename ", tmp, " to ", target));
    }
    return absl::OkStatus();
  }
};

}  // namespace

ParamFileIo* ParamFileIo::Real() {
  static RealParamFileIo* io = new RealParamFileIo();
  return io;
}

absl::Status ErrnoToStatus(int err, const std::string& what) {
  std::string msg = absl::StrCat(what, ": ", strerror(err), " (errno ", err, ")");
  switch (err) {
    case ENOENT:
    case ENODEV:
    case ENXIO:
      return absl::UnavailableError(msg);
    case EACCES:
    case EPERM:
    case EROFS:
      return absl::PermissionDeniedError(msg);
    case EINVAL:
    case ERANGE:
      return absl::InvalidArgumentError(msg);
    case EOPNOTSUPP:
      return absl::UnimplementedError(msg);
    default:
      return absl::InternalError(msg);
  }
}

absl::StatusOr<int64_t> ParseParamValue(const std::string& text, const std::string& path) {
  absl::string_view v = absl::StripAsciiWhitespace(text);
  int64_t value = 0;
  if (v.empty() || !absl::SimpleAtoi(v, &value)) {
    return absl::DataLossError(
        absl::StrCat("parse ", path, ": not an integer: \"", absl::CEscape(text), "\""));
  }
  return value;
}

absl::Status WriteParamValue(ParamFileIo* io, const std::string& path, const std::string& device,
                             const std::string& name, int64_t value) {
  absl::Status st = io->Write(path, absl::StrCat(value, "\n"));
  if (st.ok()) return st;
  return absl::Status(st.code(), absl::StrCat(device, ": ", name, "=", value, ": ", st.message()));
}

}  // namespace rocetune
