#ifndef ROCETUNE_TESTS_AGENT_APPLY_APPLY_TEST_SEAMS_H_
#define ROCETUNE_TESTS_AGENT_APPLY_APPLY_TEST_SEAMS_H_

#include <errno.h>

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "agent/host/param_file_io.h"
#include "agent/host/pfc_config.h"

namespace rocetune::testing_util {

// Real file access with injectable faults, recording every write in `log`.
class FaultyFileIo : public ParamFileIo {
 public:
  explicit FaultyFileIo(std::vector<std::string>* log) : log_(log) {}

  absl::StatusOr<std::string> Read(const std::string& path) override {
    return ParamFileIo::Real()->Read(path);
  }
  absl::Status Write(const std::string& path, const std::string& data) override {
    log_->push_back(path);
    if (path == fail_path || (fail_after >= 0 && writes_ >= fail_after)) {
      return ErrnoToStatus(fail_errno, absl::StrCat("write ", path));
    }
    ++writes_;
    std::string out = data;
    int64_t v = 0;
    if (path == clamp_path && absl::SimpleAtoi(absl::StripAsciiWhitespace(data), &v) &&
        v > clamp_max) {
      out = absl::StrCat(clamp_max, "\n");  // what firmware that clamps would report
    }
    return ParamFileIo::Real()->Write(path, out);
  }

  std::string fail_path;  // every write to this path fails with fail_errno
  int fail_after = -1;    // >= 0: every write after this many successes fails
  int fail_errno = EIO;
  std::string clamp_path;  // writes above clamp_max to this path store clamp_max
  int64_t clamp_max = 0;

 private:
  std::vector<std::string>* log_;
  int writes_ = 0;
};

// PfcConfig over an in-memory map, recording writes as "pfc:<netdev>" in `log`.
class FakePfcConfig : public PfcConfig {
 public:
  explicit FakePfcConfig(std::vector<std::string>* log) : log_(log) {}

  absl::StatusOr<PfcState> Read(const std::string& netdev) override {
    auto it = states.find(netdev);
    if (it == states.end()) return absl::UnavailableError(absl::StrCat("no netdev ", netdev));
    return it->second;
  }
  absl::Status Write(const std::string& netdev, const v1::PfcSettings& s) override {
    log_->push_back("pfc:" + netdev);
    if (netdev == fail_netdev) return absl::UnimplementedError("dcbnl: Operation not supported");
    auto it = states.find(netdev);
    if (it == states.end()) return absl::UnavailableError(absl::StrCat("no netdev ", netdev));
    it->second.enable_mask = static_cast<uint8_t>(s.enable_mask());
    if (s.has_delay()) it->second.delay = static_cast<uint16_t>(s.delay());
    if (s.has_prevention_timeout_ms()) {
      uint16_t v = static_cast<uint16_t>(s.prevention_timeout_ms());
      if (v == 0xffff && auto_reads_as != 0) v = auto_reads_as;
      it->second.prevention_timeout_ms = v;
    }
    return absl::OkStatus();
  }

  std::map<std::string, PfcState> states;
  std::string fail_netdev;
  uint16_t auto_reads_as = 0;  // non-zero: a written 0xffff ("auto") reads back as this

 private:
  std::vector<std::string>* log_;
};

// Contents of every regular file under `dir`, by path.
inline std::map<std::string, std::string> TreeContents(const std::string& dir) {
  std::map<std::string, std::string> out;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir)) {
    if (!e.is_regular_file() || e.is_symlink()) continue;
    absl::StatusOr<std::string> s = ParamFileIo::Real()->Read(e.path().string());
    out[e.path().string()] = s.ok() ? *s : "<unreadable>";
  }
  return out;
}

}  // namespace rocetune::testing_util

#endif  // ROCETUNE_TESTS_AGENT_APPLY_APPLY_TEST_SEAMS_H_
