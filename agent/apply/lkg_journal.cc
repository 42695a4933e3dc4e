#include "agent/apply/lkg_journal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <system_error>
#include <utility>

#include "absl/strings/str_cat.h"
#include "agent/host/param_file_io.h"
#include "google/protobuf/io/tokenizer.h"
#include "google/protobuf/text_format.h"
#include "rocetune/v1/agent.pb.h"

namespace rocetune {
namespace {

class CollectErrors : public google::protobuf::io::ErrorCollector {
 public:
  void AddError(int line, google::protobuf::io::ColumnNumber column,
                const std::string& message) override {
    if (first.empty()) first = absl::StrCat("line ", line + 1, ":", column + 1, ": ", message);
  }
  std::string first;
};

absl::Status WriteAll(int fd, const std::string& data, const std::string& path) {
  size_t off = 0;
  while (off < data.size()) {
    ssize_t n = write(fd, data.data() + off, data.size() - off);
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoToStatus(errno, absl::StrCat("write ", path));
    }
    off += static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

std::string Fmt(std::optional<int64_t> v) {
  return v.has_value() ? absl::StrCat(*v) : std::string("missing");
}

void Compare(const std::string& where, std::optional<int64_t> lkg, std::optional<int64_t> cur,
             std::vector<std::string>* out) {
  if (lkg == cur) return;
  out->push_back(absl::StrCat(where, ": ", Fmt(cur), " (last-known-good ", Fmt(lkg), ")"));
}

}  // namespace

absl::Status WriteFileAtomically(const std::string& dir, const std::string& path,
                                 const std::string& body) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return absl::UnavailableError(absl::StrCat("create state dir ", dir, ": ", ec.message()));
  const std::string tmp = absl::StrCat(path, ".tmp");
  int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return ErrnoToStatus(errno, absl::StrCat("open ", tmp));
  absl::Status st = WriteAll(fd, body, tmp);
  if (st.ok() && fsync(fd) != 0) st = ErrnoToStatus(errno, absl::StrCat("fsync ", tmp));
  if (close(fd) != 0 && st.ok()) st = ErrnoToStatus(errno, absl::StrCat("close ", tmp));
  if (st.ok() && rename(tmp.c_str(), path.c_str()) != 0) {
    st = ErrnoToStatus(errno, absl::StrCat("rename ", tmp, " to ", path));
  }
  if (!st.ok()) {
    unlink(tmp.c_str());
    return st;
  }
  int dfd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0) return ErrnoToStatus(errno, absl::StrCat("open ", dir));
  if (fsync(dfd) != 0) st = ErrnoToStatus(errno, absl::StrCat("fsync ", dir));
  close(dfd);
  return st;
}

LkgJournal::LkgJournal(std::string state_dir)
    : state_dir_(std::move(state_dir)),
      path_(absl::StrCat(state_dir_, "/", kFileName)),
      provisional_path_(absl::StrCat(state_dir_, "/", kProvisionalFileName)) {}

namespace {

// The text-format DesiredState in `path`: nullopt when there is no such file;
// kDataLoss naming `what` and the path when it cannot be parsed.
absl::StatusOr<std::optional<v1::DesiredState>> ReadStateFile(const std::string& path,
                                                              const std::string& what) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return std::optional<v1::DesiredState>();
  absl::StatusOr<std::string> text = ParamFileIo::Real()->Read(path);
  if (!text.ok()) return text.status();
  v1::DesiredState state;
  google::protobuf::TextFormat::Parser parser;
  CollectErrors errors;
  parser.RecordErrorsTo(&errors);
  if (!parser.ParseFromString(*text, &state)) {
    return absl::DataLossError(absl::StrCat(what, " ", path, " is corrupt: ", errors.first));
  }
  return std::optional<v1::DesiredState>(std::move(state));
}

}  // namespace

absl::Status LkgJournal::Load() {
  absl::StatusOr<std::optional<v1::DesiredState>> read =
      ReadStateFile(path_, "last-known-good journal");
  if (!read.ok()) return read.status();
  if (!read->has_value()) return absl::OkStatus();
  const v1::DesiredState& state = **read;
  if (state.version().empty()) {
    return absl::DataLossError(absl::StrCat("last-known-good journal ", path_, " has no version"));
  }
  absl::MutexLock lock(&mu_);
  entry_ = LkgEntry{state.version(), state.parameters()};
  return absl::OkStatus();
}

absl::Status LkgJournal::Save(const std::string& version, const v1::ParameterSet& parameters) {
  if (version.empty()) return absl::InvalidArgumentError("last-known-good version is empty");
  v1::DesiredState state;
  state.set_version(version);
  *state.mutable_parameters() = parameters;
  std::string body;
  if (!google::protobuf::TextFormat::PrintToString(state, &body)) {
    return absl::InternalError("cannot print the last-known-good set");
  }
  body = absl::StrCat("# rocetune-agent last-known-good parameter set (rocetune.v1.DesiredState)\n",
                      body);

  if (absl::Status st = WriteFileAtomically(state_dir_, path_, body); !st.ok()) return st;
  absl::MutexLock lock(&mu_);
  entry_ = LkgEntry{version, parameters};
  return absl::OkStatus();
}

absl::Status LkgJournal::SaveProvisional(const std::string& version, uint32_t lease_seconds,
                                         const v1::ParameterSet& parameters) {
  if (version.empty()) return absl::InvalidArgumentError("provisional version is empty");
  v1::DesiredState state;
  state.set_version(version);
  state.set_provisional_lease_seconds(lease_seconds);
  *state.mutable_parameters() = parameters;
  std::string body;
  if (!google::protobuf::TextFormat::PrintToString(state, &body)) {
    return absl::InternalError("cannot print the provisional set");
  }
  body = absl::StrCat(
      "# rocetune-agent: the set on the NIC is provisional, not last-known-good "
      "(rocetune.v1.DesiredState)\n",
      body);
  return WriteFileAtomically(state_dir_, provisional_path_, body);
}

absl::Status LkgJournal::ClearProvisional() {
  if (unlink(provisional_path_.c_str()) != 0 && errno != ENOENT) {
    return ErrnoToStatus(errno, absl::StrCat("unlink ", provisional_path_));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::optional<v1::DesiredState>> LkgJournal::LoadProvisional() const {
  absl::StatusOr<std::optional<v1::DesiredState>> read =
      ReadStateFile(provisional_path_, "provisional record");
  if (!read.ok() || !read->has_value()) return read;
  if ((*read)->version().empty() || (*read)->provisional_lease_seconds() == 0) {
    return absl::DataLossError(
        absl::StrCat("provisional record ", provisional_path_, " has no version or no lease"));
  }
  return read;
}

std::optional<LkgEntry> LkgJournal::Get() const {
  absl::MutexLock lock(&mu_);
  return entry_;
}

std::vector<std::string> LkgJournal::Drift(const v1::ParameterSet& current) const {
  std::optional<LkgEntry> entry = Get();
  std::vector<std::string> out;
  if (!entry.has_value()) return out;
  std::map<std::string, const v1::DeviceParameters*> cur;
  for (const v1::DeviceParameters& d : current.devices()) cur[d.device()] = &d;
  for (const v1::DeviceParameters& want : entry->parameters.devices()) {
    auto it = cur.find(want.device());
    if (it == cur.end()) {
      out.push_back(absl::StrCat(want.device(), ": device missing (last-known-good version ",
                                 entry->version, ")"));
      continue;
    }
    const v1::DeviceParameters& have = *it->second;
    std::map<std::string, int64_t> sorted(want.dcqcn().begin(), want.dcqcn().end());
    for (const auto& [name, value] : sorted) {
      auto h = have.dcqcn().find(name);
      Compare(absl::StrCat(want.device(), "/", name), value,
              h == have.dcqcn().end() ? std::nullopt : std::optional<int64_t>(h->second), &out);
    }
    if (want.has_rp_enable_mask()) {
      Compare(
          absl::StrCat(want.device(), "/rp_enable_mask"), want.rp_enable_mask(),
          have.has_rp_enable_mask() ? std::optional<int64_t>(have.rp_enable_mask()) : std::nullopt,
          &out);
    }
    if (want.has_np_enable_mask()) {
      Compare(
          absl::StrCat(want.device(), "/np_enable_mask"), want.np_enable_mask(),
          have.has_np_enable_mask() ? std::optional<int64_t>(have.np_enable_mask()) : std::nullopt,
          &out);
    }
    if (want.has_pfc()) {
      const v1::PfcSettings& w = want.pfc();
      if (!have.has_pfc()) {
        out.push_back(absl::StrCat(want.device(), "/pfc: missing (last-known-good enable_mask ",
                                   w.enable_mask(), ")"));
        continue;
      }
      const v1::PfcSettings& h = have.pfc();
      Compare(absl::StrCat(want.device(), "/pfc.enable_mask"), w.enable_mask(), h.enable_mask(),
              &out);
      if (w.has_delay()) {
        Compare(absl::StrCat(want.device(), "/pfc.delay"), w.delay(),
                h.has_delay() ? std::optional<int64_t>(h.delay()) : std::nullopt, &out);
      }
      if (w.has_prevention_timeout_ms()) {
        Compare(absl::StrCat(want.device(), "/pfc.prevention_timeout_ms"),
                w.prevention_timeout_ms(),
                h.has_prevention_timeout_ms() ? std::optional<int64_t>(h.prevention_timeout_ms())
                                              : std::nullopt,
                &out);
      }
    }
  }
  return out;
}

}  // namespace rocetune
