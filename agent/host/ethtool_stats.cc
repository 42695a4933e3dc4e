#include "agent/host/ethtool_stats.h"

#include <linux/ethtool.h>
#include <linux/sockios.h>
#include <net/if.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "daemon/logging.h"
#include "model/counter_names.h"

namespace rocetune {
namespace {

constexpr int kMaxAttempts = 3;
constexpr uint32_t kSlackEntries = 256;
// Refuse absurd counts rather than allocating gigabytes.
constexpr uint32_t kMaxStats = 1 << 16;

absl::Status IoctlError(int rc, const std::string& ifname, const char* what) {
  const int err = -rc;
  const std::string msg = absl::StrCat(what, " on ", ifname, ": ", std::strerror(err));
  if (err == ENODEV || err == ENXIO) return absl::UnavailableError(msg);
  if (err == EOPNOTSUPP) return absl::UnimplementedError(msg);
  if (err == EPERM || err == EACCES) return absl::PermissionDeniedError(msg);
  return absl::InternalError(msg);
}

// Heap buffer aligned for the u64 arrays of ethtool structs.
std::unique_ptr<uint64_t[]> AllocWords(size_t bytes) {
  auto buf = std::make_unique<uint64_t[]>((bytes + 7) / 8);
  std::memset(buf.get(), 0, (bytes + 7) / 8 * 8);
  return buf;
}

}  // namespace

int RealEthtoolIoctl(const std::string& ifname, void* cmd) {
  if (ifname.empty() || ifname.size() >= IFNAMSIZ) return -ENODEV;
  // One datagram socket for the process lifetime: SIOCETHTOOL only needs some
  // socket to name the interface, and ioctl on a shared socket is thread-safe.
  static const int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -EAFNOSUPPORT;
  struct ifreq ifr;
  std::memset(&ifr, 0, sizeof(ifr));
  std::memcpy(ifr.ifr_name, ifname.data(), ifname.size());
  ifr.ifr_data = static_cast<char*>(cmd);
  return ioctl(fd, SIOCETHTOOL, &ifr) < 0 ? -errno : 0;
}

std::vector<EthtoolTarget> EthtoolTargetsFromInventory(const std::vector<v1::NicDevice>& devices) {
  std::vector<EthtoolTarget> targets;
  for (const v1::NicDevice& d : devices) {
    for (const v1::NicPort& p : d.ports()) {
      if (p.netdev().empty()) continue;
      targets.push_back({d.name(), p.port(), p.netdev()});
    }
  }
  return targets;
}

EthtoolCounterSource::EthtoolCounterSource(std::vector<EthtoolTarget> targets, EthtoolIoctl ioctl)
    : targets_(std::move(targets)),
      warned_(targets_.size(), false),
      ioctl_(std::move(ioctl)),
      target_keys_(targets_.size()) {}

absl::StatusOr<uint32_t> EthtoolCounterSource::StatCount(const std::string& ifname) {
  // ethtool_sset_info plus its one u32 of data, on the stack (u64-aligned).
  uint64_t buf[(sizeof(struct ethtool_sset_info) + sizeof(uint32_t) + 7) / 8] = {};
  auto* info = reinterpret_cast<struct ethtool_sset_info*>(buf);
  info->cmd = ETHTOOL_GSSET_INFO;
  info->sset_mask = uint64_t{1} << ETH_SS_STATS;
  if (int rc = ioctl_(ifname, info); rc != 0) return IoctlError(rc, ifname, "ETHTOOL_GSSET_INFO");
  if ((info->sset_mask & (uint64_t{1} << ETH_SS_STATS)) == 0) return 0u;  // no stats set
  const uint32_t count = info->data[0];
  if (count > kMaxStats) {
    return absl::InternalError(
        absl::StrCat("ETHTOOL_GSSET_INFO on ", ifname, " reported ", count, " statistics"));
  }
  return count;
}

absl::Status EthtoolCounterSource::Enumerate(const std::string& ifname, uint32_t count) {
  for (int attempt = 0; attempt < kMaxAttempts; ++attempt) {
    const size_t bytes = sizeof(struct ethtool_gstrings) + size_t{count} * ETH_GSTRING_LEN +
                         size_t{kSlackEntries} * ETH_GSTRING_LEN;
    auto buf = AllocWords(bytes);
    auto* gs = reinterpret_cast<struct ethtool_gstrings*>(buf.get());
    gs->cmd = ETHTOOL_GSTRINGS;
    gs->string_set = ETH_SS_STATS;
    gs->len = count;
    if (int rc = ioctl_(ifname, gs); rc != 0) return IoctlError(rc, ifname, "ETHTOOL_GSTRINGS");
    if (gs->len == count) {
      StatNames names;
      names.enumeration = ++enumerations_;
      names.vendor.reserve(count);
      names.mapped.reserve(count);
      const char* data = reinterpret_cast<const char*>(gs->data);
      for (uint32_t i = 0; i < count; ++i) {
        const char* s = data + size_t{i} * ETH_GSTRING_LEN;
        names.vendor.emplace_back(s, strnlen(s, ETH_GSTRING_LEN));
        // Mapped once per enumeration, not per read.
        names.mapped.push_back(MapEthtoolCounter(names.vendor.back()));
      }
      auto [it, inserted] = names_.insert_or_assign(ifname, std::move(names));
      (void)it;
      if (!inserted) ++reenumerations_;
      return absl::OkStatus();
    }
    // The set changed between GSSET_INFO and GSTRINGS: ask again.
    absl::StatusOr<uint32_t> again = StatCount(ifname);
    if (!again.ok()) return again.status();
    count = *again;
  }
  return absl::UnavailableError(
      absl::StrCat("ethtool string set of ", ifname, " kept changing while being read"));
}

absl::StatusOr<const EthtoolCounterSource::StatNames*> EthtoolCounterSource::ReadStats(
    const std::string& ifname) {
  for (int attempt = 0; attempt < kMaxAttempts; ++attempt) {
    absl::StatusOr<uint32_t> count = StatCount(ifname);
    if (!count.ok()) return count.status();
    auto cached = names_.find(ifname);
    if (cached == names_.end() || cached->second.vendor.size() != *count) {
      if (absl::Status s = Enumerate(ifname, *count); !s.ok()) return s;
      cached = names_.find(ifname);
    }
    const uint32_t expected = static_cast<uint32_t>(cached->second.vendor.size());
    if (expected == 0) return &cached->second;
    // One buffer for every interface and round; it only grows. Slack entries
    // so an old kernel that copies a grown set cannot overrun it.
    const size_t words =
        (sizeof(struct ethtool_stats) + 7) / 8 + size_t{expected} + size_t{kSlackEntries};
    if (stats_buf_.size() < words) stats_buf_.resize(words);
    auto* st = reinterpret_cast<struct ethtool_stats*>(stats_buf_.data());
    st->cmd = ETHTOOL_GSTATS;
    st->n_stats = expected;
    if (int rc = ioctl_(ifname, st); rc != 0) return IoctlError(rc, ifname, "ETHTOOL_GSTATS");
    if (st->n_stats != expected) {
      names_.erase(ifname);  // forces a fresh GSTRINGS on the next attempt
      ++reenumerations_;
      continue;
    }
    return &cached->second;
  }
  return absl::UnavailableError(
      absl::StrCat("ethtool statistics of ", ifname, " kept changing while being read"));
}

absl::StatusOr<std::vector<std::pair<std::string, uint64_t>>> EthtoolCounterSource::ReadInterface(
    const std::string& ifname) {
  absl::StatusOr<const StatNames*> names = ReadStats(ifname);
  if (!names.ok()) return names.status();
  std::vector<std::pair<std::string, uint64_t>> values;
  if ((*names)->vendor.empty()) return values;
  const __u64* data = reinterpret_cast<const struct ethtool_stats*>(stats_buf_.data())->data;
  values.reserve((*names)->vendor.size());
  for (size_t i = 0; i < (*names)->vendor.size(); ++i) {
    values.emplace_back((*names)->vendor[i], data[i]);
  }
  return values;
}

absl::Status EthtoolCounterSource::Collect(std::vector<CounterValue>* out) {
  return CollectWith([out](uint64_t key_id, const CounterKey& key) -> CounterValue& {
    CounterValue& v = out->emplace_back();
    v.key = key;
    v.key_id = key_id;
    return v;
  });
}

absl::Status EthtoolCounterSource::CollectInto(CounterBuffer* out) {
  return CollectWith([out](uint64_t key_id, const CounterKey& key) -> CounterValue& {
    return out->AppendKeyed(key_id, key);
  });
}

absl::Status EthtoolCounterSource::CollectWith(
    absl::FunctionRef<CounterValue&(uint64_t, const CounterKey&)> next) {
  absl::Status first_error;
  size_t ok_targets = 0;
  for (size_t ti = 0; ti < targets_.size(); ++ti) {
    const EthtoolTarget& t = targets_[ti];
    absl::StatusOr<const StatNames*> names = ReadStats(t.ifname);
    if (!names.ok()) {
      if (first_error.ok()) first_error = names.status();
      if (warned_[ti]) continue;
      warned_[ti] = true;
      LogOnce(absl::StrCat("ethtool_unreadable:", t.ifname), LogLevel::kWarning,
              "cannot read ethtool statistics",
              {{"ifname", t.ifname}, {"device", t.device}, {"error", names.status().ToString()}});
      continue;
    }
    ++ok_targets;
    const std::vector<MappedCounter>& mapped = (*names)->mapped;
    if (mapped.empty()) continue;
    TargetKeys& tk = target_keys_[ti];
    if (tk.enumeration != (*names)->enumeration) {
      tk.keys.clear();
      tk.keys.reserve(mapped.size());
      for (const MappedCounter& m : mapped) {
        CounterKey& k = tk.keys.emplace_back();
        k.device = t.device;
        k.port = t.port;
        k.priority = m.priority;
        k.name = m.name;
      }
      tk.first_id = NewCounterKeyIds(mapped.size());
      tk.enumeration = (*names)->enumeration;
    }
    const __u64* data = reinterpret_cast<const struct ethtool_stats*>(stats_buf_.data())->data;
    for (size_t i = 0; i < mapped.size(); ++i) {
      const MappedCounter& m = mapped[i];
      CounterValue& cv = next(tk.first_id + i, tk.keys[i]);
      cv.value = data[i] * m.multiplier;
      cv.width_bits = m.width_bits;
    }
  }
  if (ok_targets == 0 && !targets_.empty()) return first_error;
  return absl::OkStatus();
}

absl::StatusOr<std::vector<CounterValue>> ParseEthtoolDump(absl::string_view text,
                                                           const std::string& device,
                                                           uint32_t port) {
  std::vector<CounterValue> out;
  int line_no = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_no;
    line = absl::StripAsciiWhitespace(line);
    if (line.empty()) continue;
    const size_t colon = line.rfind(':');
    if (colon == absl::string_view::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat("ethtool dump line ", line_no, ": no \"name: value\" in \"", line, "\""));
    }
    absl::string_view name = absl::StripAsciiWhitespace(line.substr(0, colon));
    absl::string_view value_text = absl::StripAsciiWhitespace(line.substr(colon + 1));
    if (value_text.empty()) continue;  // a section header such as "NIC statistics:"
    uint64_t value = 0;
    if (name.empty() || value_text[0] == '-' || !absl::SimpleAtoi(value_text, &value)) {
      return absl::InvalidArgumentError(
          absl::StrCat("ethtool dump line ", line_no, ": bad counter \"", line, "\""));
    }
    MappedCounter m = MapEthtoolCounter(name);
    CounterValue& cv = out.emplace_back();
    cv.key.device = device;
    cv.key.port = port;
    cv.key.priority = m.priority;
    cv.key.name = std::move(m.name);
    cv.value = value * m.multiplier;
    cv.width_bits = m.width_bits;
  }
  return out;
}

}  // namespace rocetune
