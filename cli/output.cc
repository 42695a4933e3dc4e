#include "cli/output.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "google/protobuf/util/json_util.h"

namespace rocetune::cli {

Table::Table(std::vector<std::string> header) : header_(std::move(header)) {}

void Table::AddRow(std::vector<std::string> cells) {
  cells.resize(header_.size());
  rows_.push_back(std::move(cells));
}

void Table::AddNote(std::string line) { notes_.emplace_back(rows_.size(), std::move(line)); }

size_t DisplayWidth(absl::string_view text) {
  size_t n = 0;
  for (char c : text) {
    if ((static_cast<unsigned char>(c) & 0xC0) != 0x80) ++n;
  }
  return n;
}

std::string Table::Render() const {
  std::vector<size_t> width(header_.size(), 0);
  auto measure = [&](const std::vector<std::string>& row) {
    for (size_t i = 0; i < row.size(); ++i) width[i] = std::max(width[i], DisplayWidth(row[i]));
  };
  measure(header_);
  for (const auto& row : rows_) measure(row);
  std::string out;
  auto emit = [&](const std::vector<std::string>& row) {
    std::string line;
    for (size_t i = 0; i < row.size(); ++i) {
      line += row[i];
      if (i + 1 < row.size()) line.append(width[i] - DisplayWidth(row[i]) + 2, ' ');
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line;
    out += '\n';
  };
  emit(header_);
  size_t note = 0;
  for (size_t r = 0; r <= rows_.size(); ++r) {
    for (; note < notes_.size() && notes_[note].first == r; ++note) {
      out += notes_[note].second;
      out += '\n';
    }
    if (r < rows_.size()) emit(rows_[r]);
  }
  return out;
}

std::string MessageToJson(const google::protobuf::Message& message, bool multiline) {
  google::protobuf::util::JsonPrintOptions opts;
  opts.add_whitespace = multiline;
  opts.preserve_proto_field_names = true;
  std::string out;
  (void)google::protobuf::util::MessageToJsonString(message, &out, opts);
  if (!multiline) {
    // add_whitespace=false already yields one line; keep the contract explicit.
    out.erase(std::remove(out.begin(), out.end(), '\n'), out.end());
  } else if (out.empty() || out.back() != '\n') {
    out += '\n';
  }
  return out;
}

std::string FormatTimestamp(int64_t unix_nanos) {
  if (unix_nanos == 0) return "-";
  return absl::FormatTime("%Y-%m-%d %H:%M:%SZ", absl::FromUnixNanos(unix_nanos),
                          absl::UTCTimeZone());
}

std::string FormatAgo(int64_t unix_nanos, absl::Time now) {
  if (unix_nanos == 0) return "-";
  absl::Duration d = now - absl::FromUnixNanos(unix_nanos);
  if (d < absl::Milliseconds(100)) return "just now";
  if (d >= absl::Hours(1)) d = absl::Trunc(d, absl::Minutes(1));
  return absl::StrCat(absl::FormatDuration(absl::Trunc(d, absl::Milliseconds(100))), " ago");
}

std::string FormatSeconds(double seconds) {
  if (!std::isfinite(seconds) || seconds == 0) return "-";
  struct Unit {
    double scale;
    const char* name;
  };
  static constexpr Unit kUnits[] = {{1, "s"}, {1e-3, "ms"}, {1e-6, "us"}, {1e-9, "ns"}};
  for (const Unit& u : kUnits) {
    double v = seconds / u.scale;
    if (std::fabs(v) >= 1 || u.scale == 1e-9) {
      int decimals = std::fabs(v) >= 100 ? 0 : (std::fabs(v) >= 10 ? 1 : 2);
      return absl::StrFormat("%.*f%s", decimals, v, u.name);
    }
  }
  return "-";
}

std::string FormatNumber(double value) {
  if (!std::isfinite(value)) return "-";
  return absl::StrFormat("%.3g", value);
}

std::string OrDash(const std::string& s) { return s.empty() ? "-" : s; }

std::string FormatLabels(const google::protobuf::Map<std::string, std::string>& labels) {
  std::map<std::string, std::string> sorted(labels.begin(), labels.end());
  if (sorted.empty()) return "-";
  return absl::StrJoin(sorted, ",", absl::PairFormatter("="));
}

std::string FormatKnobs(const google::protobuf::Map<std::string, int64_t>& knobs) {
  std::map<std::string, int64_t> sorted(knobs.begin(), knobs.end());
  if (sorted.empty()) return "-";
  return absl::StrJoin(sorted, " ", absl::PairFormatter("="));
}

}  // namespace rocetune::cli
