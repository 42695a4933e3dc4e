#include "agent/host/sysfs_counter_source.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "agent/host/sysfs_file.h"
#include "daemon/logging.h"

namespace rocetune {
namespace {

// Parses "%llu\n" text. False for anything else (empty, junk, overflow).
bool ParseCounter(const char* buf, ssize_t n, uint64_t* value) {
  if (n <= 0 || n >= 32) return false;  // 20 digits + newline is the longest valid text
  uint64_t v = 0;
  ssize_t i = 0;
  // 19 decimal digits never overflow 64 bits: no check for those.
  for (; i < n && i < 19 && buf[i] >= '0' && buf[i] <= '9'; ++i) {
    v = v * 10 + static_cast<uint64_t>(buf[i] - '0');
  }
  for (; i < n && buf[i] >= '0' && buf[i] <= '9'; ++i) {
    const uint64_t digit = static_cast<uint64_t>(buf[i] - '0');
    if (v > (UINT64_MAX - digit) / 10) return false;
    v = v * 10 + digit;
  }
  if (i == 0) return false;
  for (; i < n; ++i) {
    if (buf[i] != '\n' && buf[i] != ' ') return false;
  }
  *value = v;
  return true;
}

// Opens a regular file for reading; *inode receives its inode number.
int OpenRegular(const std::string& path, int* err, uint64_t* inode) {
  constexpr int kFlags = O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY;
  // O_NOATIME spares the access-time check on every pread of a file-backed
  // tree (fixtures, offline copies); it needs ownership or CAP_FOWNER.
  int fd = open(path.c_str(), kFlags | O_NOATIME);
  if (fd < 0 && errno == EPERM) fd = open(path.c_str(), kFlags);
  if (fd < 0) {
    *err = errno;
    return -1;
  }
  struct stat st = {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    *err = S_ISDIR(st.st_mode) ? EISDIR : EINVAL;
    close(fd);
    return -1;
  }
  *inode = static_cast<uint64_t>(st.st_ino);
  return fd;
}

// Reads one counter through `fd` (pread at offset 0) or, when fd < 0, by path.
bool ReadCounter(int fd, const std::string& path, uint64_t* value, int* err) {
  char buf[32];
  ssize_t n;
  if (fd >= 0) {
    do {
      n = pread(fd, buf, sizeof(buf), 0);
    } while (n < 0 && errno == EINTR);
  } else {
    uint64_t inode = 0;
    const int f = OpenRegular(path, err, &inode);
    if (f < 0) return false;
    do {
      n = read(f, buf, sizeof(buf));
    } while (n < 0 && errno == EINTR);
    const int saved = errno;
    close(f);
    errno = saved;
  }
  if (n < 0) {
    *err = errno;
    return false;
  }
  *err = EINVAL;
  return ParseCounter(buf, n, value);
}

bool DirExists(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

}  // namespace

// One fstat on a descriptor the device's files hold (an unlinked file has no
// links left; a removed sysfs node also fails every later pread with ENODEV),
// or a stat of the device directory when no descriptor is held.
bool SysfsCounterSource::DeviceStillThere(const Device& d) {
  for (const File& f : d.files) {
    if (f.fd < 0) continue;
    struct stat st;
    return fstat(f.fd, &st) == 0 && st.st_nlink > 0;
  }
  return DirExists(d.dir);
}

namespace {}  // namespace

SysfsCounterSource::SysfsCounterSource(std::string sysfs_root, SysfsCounterOptions options)
    : root_(std::move(sysfs_root)), options_(std::move(options)) {}

SysfsCounterSource::~SysfsCounterSource() { CloseAll(); }

void SysfsCounterSource::CloseAll() {
  for (Device& d : plan_) {
    for (File& f : d.files) {
      if (f.fd >= 0) close(f.fd);
      f.fd = -1;
    }
  }
  plan_.clear();
  open_files_ = 0;
}

bool SysfsCounterSource::OpenFile(File* f) {
  int err = 0;
  if (open_files_ < options_.max_open_files) {
    f->fd = OpenRegular(f->path, &err, &f->inode);
    if (f->fd >= 0) {
      ++open_files_;
      ++files_opened_;
      return true;
    }
    if (err != EMFILE && err != ENFILE) {
      ++skipped_files_;
      LogOnce(absl::StrCat("sysfs_counter_unreadable:", f->path), LogLevel::kWarning,
              "skipping unreadable counter file",
              {{"path", f->path}, {"error", std::strerror(err)}});
      return false;
    }
    LogOnce("sysfs_counter_fd_limit", LogLevel::kWarning,
            "out of file descriptors; reading the remaining counter files by path",
            {{"open", absl::StrCat(open_files_)}});
    options_.max_open_files = open_files_;
  }
  // Per-read mode: check once that it is a readable regular file.
  const int fd = OpenRegular(f->path, &err, &f->inode);
  if (fd < 0) {
    ++skipped_files_;
    LogOnce(absl::StrCat("sysfs_counter_unreadable:", f->path), LogLevel::kWarning,
            "skipping unreadable counter file", {{"path", f->path}, {"error", std::strerror(err)}});
    return false;
  }
  close(fd);
  f->fd = -1;
  ++files_opened_;
  return true;
}

void SysfsCounterSource::ListCounterDir(const std::string& dir, const std::string& device,
                                        uint32_t port, bool hw, CounterVendor vendor,
                                        OpenByPath* reusable, std::vector<std::string>* used,
                                        std::vector<File>* files) {
  absl::StatusOr<std::vector<SysfsDirEntry>> entries = ListSysfsDirEntries(dir);
  if (!entries.ok()) return;  // this driver has no such directory
  for (const SysfsDirEntry& e : *entries) {
    const std::string& n = e.name;
    if (hw && n == "lifespan") continue;
    File f;
    f.path = absl::StrCat(dir, "/", n);
    // A descriptor of the previous listing still names this entry when the
    // directory lists the inode it was opened on (a file replaced or a sysfs
    // node re-created has another one): it is kept instead of reopened.
    File* kept = nullptr;
    if (reusable != nullptr && open_files_ < options_.max_open_files) {
      auto it = reusable->find(f.path);
      if (it != reusable->end() && it->second->fd >= 0 && it->second->inode == e.inode) {
        kept = it->second;
      }
    }
    if (kept != nullptr) {
      f.fd = kept->fd;
      f.inode = kept->inode;
      kept->fd = -1;  // taken: not closed with the old listing
      ++open_files_;
    } else if (!OpenFile(&f)) {
      continue;
    }
    MappedCounter m = hw ? MapHwCounter(vendor, n) : MapPortCounter(n);
    if (m.mapped) {
      if (std::find(used->begin(), used->end(), m.name) != used->end()) {
        m.name = n;  // a second vendor name for the same canonical counter
      } else {
        used->push_back(m.name);
      }
    }
    f.key.device = device;
    f.key.port = port;
    f.key.priority = m.priority;
    f.key.name = std::move(m.name);
    f.multiplier = m.multiplier;
    f.width_bits = m.width_bits;
    files->push_back(std::move(f));
  }
}

absl::Status SysfsCounterSource::Relist(bool reuse_descriptors) {
  // The previous listing's open files, by path, when they may be kept.
  std::vector<Device> old;
  OpenByPath reusable;
  if (reuse_descriptors) {
    old.swap(plan_);
    open_files_ = 0;
    for (Device& d : old) {
      for (File& f : d.files) {
        if (f.fd >= 0) reusable.emplace(f.path, &f);
      }
    }
  }
  CloseAll();  // what was not moved to `old`
  // Whatever the new listing did not take is closed when this returns.
  absl::Cleanup close_old = [&old] {
    for (Device& d : old) {
      for (File& f : d.files) {
        if (f.fd >= 0) close(f.fd);
      }
    }
  };
  OpenByPath* keep = reuse_descriptors ? &reusable : nullptr;
  const std::string ib = root_ + "/class/infiniband";
  std::vector<std::string> devices = options_.devices;
  if (devices.empty()) {
    absl::StatusOr<std::vector<std::string>> names = ListSysfsDir(ib);
    if (!names.ok()) {
      return absl::UnavailableError(absl::StrCat("no RDMA devices: ", names.status().message()));
    }
    devices = *std::move(names);
  }
  for (const std::string& name : devices) {
    Device d;
    d.name = name;
    d.dir = ib + "/" + name;
    const CounterVendor vendor = CounterVendorFor(SymlinkBasename(d.dir + "/device/driver"), name);
    std::vector<std::string> used;
    if (options_.hw_counters) {
      ListCounterDir(d.dir + "/hw_counters", name, 0, true, vendor, keep, &used, &d.files);
    }
    absl::StatusOr<std::vector<std::string>> ports = ListSysfsDir(d.dir + "/ports");
    if (ports.ok()) {
      for (const std::string& p : *ports) {
        uint32_t port = 0;
        if (!absl::SimpleAtoi(p, &port)) continue;
        used.clear();
        const std::string pdir = d.dir + "/ports/" + p;
        if (options_.hw_counters) {
          ListCounterDir(pdir + "/hw_counters", name, port, true, vendor, keep, &used, &d.files);
        }
        if (options_.port_counters) {
          ListCounterDir(pdir + "/counters", name, port, false, vendor, keep, &used, &d.files);
        }
      }
    }
    plan_.push_back(std::move(d));
  }
  // Fresh key ids for this listing's files (a kept descriptor's key may have
  // changed with the listing, e.g. the mapping of a second vendor name).
  size_t total = 0;
  for (const Device& d : plan_) total += d.files.size();
  uint64_t id = NewCounterKeyIds(total);
  for (Device& d : plan_) {
    for (File& f : d.files) f.key_id = id++;
  }
  rounds_since_list_ = 0;
  need_relist_ = false;
  return absl::OkStatus();
}

absl::Status SysfsCounterSource::Collect(std::vector<CounterValue>* out) {
  size_t total = 0;
  for (const Device& d : plan_) total += d.files.size();
  out->reserve(out->size() + total);
  return CollectWith([out](const File& f) -> CounterValue& {
    CounterValue& v = out->emplace_back();
    v.key = f.key;
    v.key_id = f.key_id;
    return v;
  });
}

absl::Status SysfsCounterSource::CollectInto(CounterBuffer* out) {
  return CollectWith(
      [out](const File& f) -> CounterValue& { return out->AppendKeyed(f.key_id, f.key); });
}

template <typename Next>
absl::Status SysfsCounterSource::CollectWith(Next next) {
  if (need_relist_ || ++rounds_since_list_ >= options_.relist_every_rounds) {
    // A periodic relist keeps the descriptors of unchanged files; one after a
    // failed read or a vanished device (need_relist_) reopens everything.
    if (absl::Status s = Relist(/*reuse_descriptors=*/!need_relist_); !s.ok()) {
      need_relist_ = true;
      return s;
    }
  }
  size_t read_ok = 0;
  std::string first_missing;
  for (const Device& d : plan_) {
    if (!DeviceStillThere(d)) {
      need_relist_ = true;
      if (first_missing.empty()) first_missing = d.name;
      LogOnce(absl::StrCat("sysfs_device_vanished:", d.dir), LogLevel::kWarning,
              "RDMA device vanished", {{"device", d.name}});
      continue;
    }
    for (const File& f : d.files) {
      uint64_t v = 0;
      int err = 0;
      if (!ReadCounter(f.fd, f.path, &v, &err)) {
        ++skipped_files_;
        if (err == ENOENT || err == ENODEV) need_relist_ = true;
        LogOnce(absl::StrCat("sysfs_counter_unreadable:", f.path), LogLevel::kWarning,
                "skipping unreadable counter file",
                {{"path", f.path}, {"error", std::strerror(err)}});
        continue;
      }
      CounterValue& cv = next(f);
      cv.value = v * f.multiplier;
      cv.width_bits = f.width_bits;
      ++read_ok;
    }
  }
  if (read_ok == 0) {
    if (!first_missing.empty()) {
      return absl::UnavailableError(
          absl::StrCat("RDMA device ", first_missing, " is gone from ", root_));
    }
    return absl::UnavailableError(absl::StrCat("no RDMA counter readable under ", root_));
  }
  return absl::OkStatus();
}

}  // namespace rocetune
