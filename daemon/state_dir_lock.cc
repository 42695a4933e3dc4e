#include "daemon/state_dir_lock.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <system_error>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace rocetune {

absl::StatusOr<std::unique_ptr<StateDirLock>> StateDirLock::Acquire(const std::string& state_dir,
                                                                    const std::string& program) {
  std::error_code ec;
  std::filesystem::create_directories(state_dir, ec);
  if (ec) {
    return absl::PermissionDeniedError(
        absl::StrCat("cannot create state dir ", state_dir, ": ", ec.message()));
  }
  const std::string path = absl::StrCat(state_dir, "/lock");
  int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) {
    return absl::PermissionDeniedError(absl::StrCat("cannot open ", path, ": ", strerror(errno)));
  }
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    std::string holder;
    char buf[128] = {0};
    ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
    close(fd);
    if (err != EWOULDBLOCK) {
      return absl::InternalError(absl::StrCat("cannot lock ", path, ": ", strerror(err)));
    }
    std::string text = n > 0 ? std::string(absl::StripAsciiWhitespace(std::string(buf, n))) : "";
    return absl::FailedPreconditionError(absl::StrCat(
        "state dir ", state_dir, " is in use by ", text.empty() ? "another process" : text,
        "; one ", program, " per state dir (stop it, or give this one another --state_dir)"));
  }
  const std::string me = absl::StrCat(program, " (pid ", getpid(), ")\n");
  if (ftruncate(fd, 0) != 0 ||
      pwrite(fd, me.data(), me.size(), 0) != static_cast<ssize_t>(me.size())) {
    const int err = errno;
    close(fd);
    return absl::InternalError(absl::StrCat("cannot write ", path, ": ", strerror(err)));
  }
  return std::unique_ptr<StateDirLock>(new StateDirLock(fd, path));
}

StateDirLock::~StateDirLock() {
  // Emptied first: a reader never sees the PID of a process that let go.
  if (ftruncate(fd_, 0) != 0) {
  }
  close(fd_);
}

}  // namespace rocetune
