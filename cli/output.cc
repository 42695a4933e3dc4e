#include "cli/output.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "google/protobuf/struct.pb.h"
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

namespace {

// The shortest %g text of `v` that parses back to it.
std::string ShortestNumber(double v) {
  if (std::isfinite(v) && v == std::trunc(v) && std::fabs(v) < 1e15) {
    return absl::StrFormat("%.0f", v);
  }
  std::string s = absl::StrFormat("%.17g", v);
  for (int precision = 6; precision < 17; ++precision) {
    std::string shorter = absl::StrFormat("%.*g", precision, v);
    if (std::strtod(shorter.c_str(), nullptr) == v) {
      s = shorter;
      break;
    }
  }
  // YAML 1.1 reads an exponent without a mantissa dot ("1e+300") as a string.
  if (size_t e = s.find('e'); e != std::string::npos && s.find('.') == std::string::npos) {
    s.insert(e, ".0");
  }
  return s;
}

// Whether `s` can be written as a plain YAML scalar and read back as this
// string: letters, digits and a few punctuation marks, not starting with one
// YAML gives meaning to, and not a word YAML reads as a bool, null or number.
bool PlainYaml(const std::string& s) {
  // Starting with a letter or '_' rules out numbers in every YAML dialect
  // (0o17, 1_000, 2024-05-01) and the indicators ('-', '@', '`', ...).
  if (s.empty() ||
      !(absl::ascii_isalpha(static_cast<unsigned char>(s.front())) || s.front() == '_')) {
    return false;
  }
  for (char c : s) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-' && c != '.' &&
        c != '/' && c != '@') {
      return false;
    }
  }
  std::string lower = absl::AsciiStrToLower(s);
  for (const char* word :
       {"true", "false", "yes", "no", "on", "off", "y", "n", "null", "nan", "inf"}) {
    if (lower == word) return false;
  }
  char* end = nullptr;
  std::strtod(s.c_str(), &end);
  return end != s.c_str() + s.size();  // not a number
}

// A double-quoted YAML scalar: YAML's escapes (not C's: no \' nor octal).
std::string YamlString(const std::string& s) {
  if (PlainYaml(s)) return s;
  std::string out = "\"";
  for (char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\r':
        out += "\\r";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
          absl::StrAppend(&out, absl::StrFormat("\\x%02x", static_cast<unsigned char>(c)));
        } else {
          out += c;  // UTF-8 stays as it is
        }
    }
  }
  return out + "\"";
}

std::string YamlScalar(const google::protobuf::Value& v) {
  switch (v.kind_case()) {
    case google::protobuf::Value::kNullValue:
      return "null";
    case google::protobuf::Value::kBoolValue:
      return v.bool_value() ? "true" : "false";
    case google::protobuf::Value::kNumberValue:
      return ShortestNumber(v.number_value());
    case google::protobuf::Value::kStringValue:
      return YamlString(v.string_value());
    case google::protobuf::Value::kStructValue:
      return "{}";
    case google::protobuf::Value::kListValue:
      return "[]";
    default:
      return "null";
  }
}

bool IsCollection(const google::protobuf::Value& v) {
  return (v.has_struct_value() && !v.struct_value().fields().empty()) ||
         (v.has_list_value() && v.list_value().values_size() > 0);
}

void AppendYaml(const google::protobuf::Value& v, int indent, std::string* out);

// A mapping's entries at `indent`; the first starts where the caller left
// the cursor when `inline_first` (a list item's "- ").
void AppendMapping(const google::protobuf::Struct& s, int indent, bool inline_first,
                   std::string* out) {
  std::map<std::string, const google::protobuf::Value*> sorted;
  for (const auto& [k, v] : s.fields()) sorted[k] = &v;
  bool first = true;
  for (const auto& [k, v] : sorted) {
    if (!(first && inline_first)) absl::StrAppend(out, std::string(indent, ' '));
    first = false;
    absl::StrAppend(out, YamlString(k), ":");
    if (IsCollection(*v)) {
      absl::StrAppend(out, "\n");
      AppendYaml(*v, v->has_list_value() ? indent : indent + 2, out);
    } else {
      absl::StrAppend(out, " ", YamlScalar(*v), "\n");
    }
  }
}

void AppendYaml(const google::protobuf::Value& v, int indent, std::string* out) {
  if (v.has_struct_value() && !v.struct_value().fields().empty()) {
    AppendMapping(v.struct_value(), indent, false, out);
  } else if (v.has_list_value() && v.list_value().values_size() > 0) {
    for (const google::protobuf::Value& item : v.list_value().values()) {
      absl::StrAppend(out, std::string(indent, ' '), "-");
      if (item.has_struct_value() && !item.struct_value().fields().empty()) {
        absl::StrAppend(out, " ");
        AppendMapping(item.struct_value(), indent + 2, true, out);
      } else if (IsCollection(item)) {
        absl::StrAppend(out, "\n");
        AppendYaml(item, indent + 2, out);
      } else {
        absl::StrAppend(out, " ", YamlScalar(item), "\n");
      }
    }
  } else {
    absl::StrAppend(out, std::string(indent, ' '), YamlScalar(v), "\n");
  }
}

}  // namespace

absl::StatusOr<std::string> JsonToYaml(const std::string& json) {
  google::protobuf::Value value;
  auto status = google::protobuf::util::JsonStringToMessage(json, &value);
  if (!status.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("not JSON: ", status.ToString()));
  }
  std::string out;
  AppendYaml(value, 0, &out);
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
