#include "agent/host/sysfs_counter_source.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "agent/host/sysfs_file.h"
#include "daemon/logging.h"

namespace rocetune {
namespace {

// Reads one "%llu\n" counter file. Returns false (with *err set to an errno) when the
// file is missing, not readable as a regular file, or not a number.
bool ReadCounterFile(const std::string& path, uint64_t* value, int* err) {
  const int fd = open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) {
    *err = errno;
    return false;
  }
  char buf[32];
  ssize_t n;
  do {
    n = read(fd, buf, sizeof(buf));
  } while (n < 0 && errno == EINTR);
  *err = n < 0 ? errno : EINVAL;
  close(fd);
  if (n <= 0) return false;
  uint64_t v = 0;
  ssize_t i = 0;
  for (; i < n && buf[i] >= '0' && buf[i] <= '9'; ++i) {
    const uint64_t digit = static_cast<uint64_t>(buf[i] - '0');
    if (v > (UINT64_MAX - digit) / 10) return false;  // overflow
    v = v * 10 + digit;
  }
  if (i == 0) return false;
  for (; i < n; ++i) {
    if (buf[i] != '\n' && buf[i] != ' ') return false;
  }
  if (n == static_cast<ssize_t>(sizeof(buf))) return false;  // longer than any u64
  *value = v;
  return true;
}

bool DirExists(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

}  // namespace

SysfsCounterSource::SysfsCounterSource(std::string sysfs_root, SysfsCounterOptions options)
    : root_(std::move(sysfs_root)), options_(std::move(options)) {}

void SysfsCounterSource::ListCounterDir(const std::string& dir, const std::string& device,
                                        uint32_t port, bool hw, CounterVendor vendor,
                                        std::vector<std::string>* used, std::vector<File>* files) {
  absl::StatusOr<std::vector<std::string>> names = ListSysfsDir(dir);
  if (!names.ok()) return;  // this driver has no such directory
  for (const std::string& n : *names) {
    if (hw && n == "lifespan") continue;
    MappedCounter m = hw ? MapHwCounter(vendor, n) : MapPortCounter(n);
    if (m.mapped) {
      if (std::find(used->begin(), used->end(), m.name) != used->end()) {
        m.name = n;  // a second vendor name for the same canonical counter
      } else {
        used->push_back(m.name);
      }
    }
    File f;
    f.path = absl::StrCat(dir, "/", n);
    f.key.device = device;
    f.key.port = port;
    f.key.priority = m.priority;
    f.key.name = std::move(m.name);
    f.multiplier = m.multiplier;
    f.width_bits = m.width_bits;
    files->push_back(std::move(f));
  }
}

absl::Status SysfsCounterSource::Relist() {
  plan_.clear();
  const std::string ib = root_ + "/class/infiniband";
  std::vector<std::string> devices = options_.devices;
  if (devices.empty()) {
    absl::StatusOr<std::vector<std::string>> names = ListSysfsDir(ib);
    if (!names.ok())
      return absl::UnavailableError(absl::StrCat("no RDMA devices: ", names.status().message()));
    devices = *std::move(names);
  }
  for (const std::string& name : devices) {
    Device d;
    d.name = name;
    d.dir = ib + "/" + name;
    const CounterVendor vendor = CounterVendorFor(SymlinkBasename(d.dir + "/device/driver"), name);
    std::vector<std::string> used;
    if (options_.hw_counters) {
      ListCounterDir(d.dir + "/hw_counters", name, 0, true, vendor, &used, &d.files);
    }
    absl::StatusOr<std::vector<std::string>> ports = ListSysfsDir(d.dir + "/ports");
    if (ports.ok()) {
      for (const std::string& p : *ports) {
        uint32_t port = 0;
        if (!absl::SimpleAtoi(p, &port)) continue;
        used.clear();
        const std::string pdir = d.dir + "/ports/" + p;
        if (options_.hw_counters) {
          ListCounterDir(pdir + "/hw_counters", name, port, true, vendor, &used, &d.files);
        }
        if (options_.port_counters) {
          ListCounterDir(pdir + "/counters", name, port, false, vendor, &used, &d.files);
        }
      }
    }
    plan_.push_back(std::move(d));
  }
  rounds_since_list_ = 0;
  need_relist_ = false;
  return absl::OkStatus();
}

absl::Status SysfsCounterSource::Collect(std::vector<CounterValue>* out) {
  if (need_relist_ || ++rounds_since_list_ >= options_.relist_every_rounds) {
    if (absl::Status s = Relist(); !s.ok()) {
      need_relist_ = true;
      return s;
    }
  }
  size_t read_ok = 0;
  std::string first_missing;
  for (const Device& d : plan_) {
    size_t device_ok = 0;
    for (const File& f : d.files) {
      uint64_t v = 0;
      int err = 0;
      if (!ReadCounterFile(f.path, &v, &err)) {
        ++skipped_files_;
        if (err == ENOENT || err == ENODEV) need_relist_ = true;
        LogOnce(absl::StrCat("sysfs_counter_unreadable:", f.path), LogLevel::kWarning,
                "skipping unreadable counter file",
                {{"path", f.path}, {"error", std::strerror(err)}});
        continue;
      }
      CounterValue cv;
      cv.key = f.key;
      cv.value = v * f.multiplier;
      cv.width_bits = f.width_bits;
      out->push_back(std::move(cv));
      ++device_ok;
    }
    if (device_ok == 0 && !DirExists(d.dir)) {
      need_relist_ = true;
      if (first_missing.empty()) first_missing = d.name;
      LogOnce(absl::StrCat("sysfs_device_vanished:", d.dir), LogLevel::kWarning,
              "RDMA device vanished", {{"device", d.name}});
    }
    read_ok += device_ok;
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
