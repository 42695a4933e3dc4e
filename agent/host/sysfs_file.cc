#include "agent/host/sysfs_file.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace rocetune {
namespace {

bool AllDigits(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

absl::Status ErrnoStatus(int err, const std::string& what, const std::string& path) {
  const std::string msg = absl::StrCat(what, " ", path, ": ", std::strerror(err));
  if (err == ENOENT || err == ENOTDIR || err == ENODEV || err == ENXIO) {
    return absl::NotFoundError(msg);
  }
  if (err == EISDIR) return absl::FailedPreconditionError(msg);
  return absl::InternalError(msg);
}

}  // namespace

absl::StatusOr<std::string> ReadSysfsFile(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) return ErrnoStatus(errno, "cannot open", path);
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    return absl::FailedPreconditionError(absl::StrCat("not a regular file: ", path));
  }
  char buf[4096];
  size_t used = 0;
  while (used < sizeof(buf)) {
    const ssize_t n = read(fd, buf + used, sizeof(buf) - used);
    if (n < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      close(fd);
      return ErrnoStatus(err, "cannot read", path);
    }
    if (n == 0) break;
    used += static_cast<size_t>(n);
  }
  close(fd);
  return std::string(buf, used);
}

absl::StatusOr<std::string> ReadSysfsString(const std::string& path) {
  absl::StatusOr<std::string> text = ReadSysfsFile(path);
  if (!text.ok()) return text.status();
  return std::string(absl::StripAsciiWhitespace(*text));
}

absl::StatusOr<uint64_t> ReadSysfsU64(const std::string& path) {
  absl::StatusOr<std::string> text = ReadSysfsString(path);
  if (!text.ok()) return text.status();
  uint64_t v = 0;
  if (text->empty() || (*text)[0] == '-' || !absl::SimpleAtoi(*text, &v)) {
    return absl::InvalidArgumentError(
        absl::StrCat("not an unsigned number in ", path, ": \"", text->substr(0, 40), "\""));
  }
  return v;
}

absl::StatusOr<std::vector<SysfsDirEntry>> ListSysfsDirEntries(const std::string& path) {
  DIR* dir = opendir(path.c_str());
  if (dir == nullptr) return ErrnoStatus(errno, "cannot list", path);
  std::vector<SysfsDirEntry> entries;
  while (struct dirent* e = readdir(dir)) {
    if (std::strcmp(e->d_name, ".") == 0 || std::strcmp(e->d_name, "..") == 0) continue;
    entries.push_back({e->d_name, static_cast<uint64_t>(e->d_ino)});
  }
  closedir(dir);
  std::sort(entries.begin(), entries.end(), [](const SysfsDirEntry& x, const SysfsDirEntry& y) {
    const std::string& a = x.name;
    const std::string& b = y.name;
    const bool da = AllDigits(a), db = AllDigits(b);
    if (da && db && a.size() != b.size()) return a.size() < b.size();
    return a < b;
  });
  return entries;
}

absl::StatusOr<std::vector<std::string>> ListSysfsDir(const std::string& path) {
  absl::StatusOr<std::vector<SysfsDirEntry>> entries = ListSysfsDirEntries(path);
  if (!entries.ok()) return entries.status();
  std::vector<std::string> names;
  names.reserve(entries->size());
  for (SysfsDirEntry& e : *entries) names.push_back(std::move(e.name));
  return names;
}

std::string SymlinkBasename(const std::string& path) {
  char buf[4096];
  const ssize_t n = readlink(path.c_str(), buf, sizeof(buf) - 1);
  if (n <= 0) return "";
  std::string target(buf, static_cast<size_t>(n));
  while (!target.empty() && target.back() == '/') target.pop_back();
  const size_t slash = target.rfind('/');
  return slash == std::string::npos ? target : target.substr(slash + 1);
}

}  // namespace rocetune
