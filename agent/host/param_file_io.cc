#include "agent/host/param_file_io.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
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

  absl::Status Write(const std::string& path, const std::string& data) override {
    int fd = open(path.c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC);
    if (fd < 0) return ErrnoToStatus(errno, absl::StrCat("open ", path, " for writing"));
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
