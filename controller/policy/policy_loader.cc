#include "controller/policy/policy_loader.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/descriptor.pb.h"
#include "google/protobuf/dynamic_message.h"
#include "google/protobuf/io/tokenizer.h"
#include "google/protobuf/text_format.h"

namespace rocetune::controller {
namespace {

namespace pb = google::protobuf;

// Converts a tokenizer column (0-based, a tab advances to the next multiple of
// 8) into a byte offset within `line`.
size_t ByteOffset(absl::string_view line, int column) {
  int col = 0;
  size_t i = 0;
  for (; i < line.size() && col < column; ++i) {
    col = line[i] == '\t' ? col + 8 - col % 8 : col + 1;
  }
  return i;
}

// The tokenizer column (0-based) of byte `offset` within `line`.
int TabColumn(absl::string_view line, size_t offset) {
  int col = 0;
  for (size_t i = 0; i < offset && i < line.size(); ++i) {
    col = line[i] == '\t' ? col + 8 - col % 8 : col + 1;
  }
  return col;
}

// Collects every error the text-format parser reports, 1-based.
class SyntaxErrors : public pb::io::ErrorCollector {
 public:
  SyntaxErrors(const std::string& file, const std::string& text)
      : file_(file), lines_(absl::StrSplit(text, '\n')) {}

  void AddError(int line, int column, const std::string& message) override {
    PolicyError error{file_, line + 1, column + 1, "syntax", message};
    PointAtFieldName(line, column, &error);
    ExplainNegativeUnsigned(line, column, &error);
    errors_.push_back(std::move(error));
  }
  void AddWarning(int, int, const std::string&) override {}

  const std::vector<PolicyError>& errors() const { return errors_; }

 private:
  // Errors about a field name ("has no field named "x"", "Non-repeated field
  // "x" is specified multiple times") come after the name has been read; point
  // at the name itself.
  void PointAtFieldName(int line, int column, PolicyError* error) const {
    if (line < 0 || static_cast<size_t>(line) >= lines_.size()) return;
    static constexpr const char* kMarkers[] = {"has no field named \"", "Non-repeated field \""};
    for (const char* marker : kMarkers) {
      const size_t m = error->message.find(marker);
      if (m == std::string::npos) continue;
      const size_t name_start = m + std::strlen(marker);
      const size_t name_end = error->message.find('"', name_start);
      if (name_end == std::string::npos) return;
      const std::string name = error->message.substr(name_start, name_end - name_start);
      absl::string_view text = lines_[line];
      const size_t at = text.substr(0, ByteOffset(text, column)).rfind(name);
      if (at == absl::string_view::npos) return;
      error->column = TabColumn(text, at) + 1;
      return;
    }
  }

  // The parser says only "Expected integer, got: -" for "approvers: -1"; name
  // the field and say why instead.
  void ExplainNegativeUnsigned(int line, int column, PolicyError* error) const {
    if (!absl::StartsWith(error->message, "Expected integer, got: -")) return;
    if (line < 0 || static_cast<size_t>(line) >= lines_.size()) return;
    absl::string_view text = lines_[line];
    const size_t at = ByteOffset(text, column);
    absl::string_view before = absl::StripTrailingAsciiWhitespace(text.substr(0, at));
    if (absl::ConsumeSuffix(&before, ":")) before = absl::StripTrailingAsciiWhitespace(before);
    size_t start = before.size();
    while (start > 0 && (absl::ascii_isalnum(before[start - 1]) || before[start - 1] == '_')) {
      --start;
    }
    absl::string_view field = before.substr(start);
    absl::string_view value = at < text.size() ? text.substr(at) : "";
    size_t end = 1;
    while (end < value.size() && absl::ascii_isspace(value[end])) ++end;
    while (end < value.size() && (absl::ascii_isalnum(value[end]) || value[end] == '.')) ++end;
    value = value.substr(0, end);
    error->rule = "negative_unsigned";
    error->message = absl::StrCat(field.empty() ? std::string("value") : std::string(field), ": ",
                                  value, " is negative, but the field is unsigned (0 or more)");
  }

  std::string file_;
  std::vector<std::string> lines_;
  std::vector<PolicyError> errors_;
};

// A copy of the policy schema in which map fields are plain repeated entry
// messages. Parsing into it keeps map entries in file order, so each entry's
// location can be paired with its key (a parsed proto map has no order).
struct OrderedSchema {
  pb::DescriptorPool pool;
  pb::DynamicMessageFactory factory{&pool};
  const pb::Descriptor* policy = nullptr;
  const pb::Message* prototype = nullptr;  // of `policy`, owned by `factory`
};

void ClearMapEntryOption(pb::DescriptorProto* message) {
  message->mutable_options()->clear_map_entry();
  for (pb::DescriptorProto& nested : *message->mutable_nested_type()) {
    ClearMapEntryOption(&nested);
  }
}

void BuildOrderedFile(const pb::FileDescriptor* file, std::set<std::string>* built,
                      pb::DescriptorPool* pool) {
  if (!built->insert(file->name()).second) return;
  for (int i = 0; i < file->dependency_count(); ++i) {
    BuildOrderedFile(file->dependency(i), built, pool);
  }
  pb::FileDescriptorProto proto;
  file->CopyTo(&proto);
  for (pb::DescriptorProto& message : *proto.mutable_message_type()) {
    ClearMapEntryOption(&message);
  }
  pool->BuildFile(proto);
}

const OrderedSchema& Schema() {
  static const OrderedSchema* schema = [] {
    auto* s = new OrderedSchema;
    std::set<std::string> built;
    BuildOrderedFile(v1::Policy::descriptor()->file(), &built, &s->pool);
    s->policy = s->pool.FindMessageTypeByName(v1::Policy::descriptor()->full_name());
    if (s->policy != nullptr) s->prototype = s->factory.GetPrototype(s->policy);
    return s;
  }();
  return *schema;
}

// True when `type` is a map entry in the real schema.
bool IsMapEntry(const pb::Descriptor* type) {
  const pb::Descriptor* real =
      pb::DescriptorPool::generated_pool()->FindMessageTypeByName(type->full_name());
  return real != nullptr && real->options().map_entry();
}

std::string MapKeyText(const pb::Message& entry) {
  const pb::Descriptor* type = entry.GetDescriptor();
  const pb::FieldDescriptor* key = type->FindFieldByName("key");
  if (key->cpp_type() == pb::FieldDescriptor::CPPTYPE_STRING) {
    return entry.GetReflection()->GetString(entry, key);
  }
  std::string text;
  pb::TextFormat::PrintFieldValueToString(entry, key, -1, &text);
  return text;
}

struct Walker {
  std::vector<std::pair<std::string, std::pair<int, int>>>* locations;
  std::vector<std::pair<std::string, std::pair<int, int>>>* duplicates;

  void Record(const std::string& path, const pb::TextFormat::ParseLocation& loc) {
    if (loc.line < 0) return;
    locations->push_back({path, {loc.line + 1, loc.column + 1}});
  }

  void Walk(const pb::Message& message, const pb::TextFormat::ParseInfoTree* tree,
            const std::string& prefix) {
    const pb::Descriptor* type = message.GetDescriptor();
    const pb::Reflection* reflection = message.GetReflection();
    for (int f = 0; f < type->field_count(); ++f) {
      const pb::FieldDescriptor* field = type->field(f);
      const std::string path = absl::StrCat(prefix, field->name());
      const bool is_message = field->cpp_type() == pb::FieldDescriptor::CPPTYPE_MESSAGE;
      if (!field->is_repeated()) {
        // Recorded whenever the file names the field, even with its default value.
        Record(path, tree->GetLocation(field, -1));
        if (is_message) {
          if (const auto* nested = tree->GetTreeForNested(field, -1); nested != nullptr) {
            Walk(reflection->GetMessage(message, field), nested, path + ".");
          }
        }
        continue;
      }
      const int size = reflection->FieldSize(message, field);
      if (size > 0) Record(path, tree->GetLocation(field, 0));
      const bool is_map = is_message && IsMapEntry(field->message_type());
      std::set<std::string> keys;
      for (int i = 0; i < size; ++i) {
        std::string element;
        if (is_map) {
          const std::string key = MapKeyText(reflection->GetRepeatedMessage(message, field, i));
          element = absl::StrCat(path, "[", key, "]");
          if (!keys.insert(key).second) {
            const auto loc = tree->GetLocation(field, i);
            if (loc.line >= 0) duplicates->push_back({element, {loc.line + 1, loc.column + 1}});
            continue;
          }
        } else {
          element = absl::StrCat(path, "[", i, "]");
        }
        Record(element, tree->GetLocation(field, i));
        if (is_message) {
          if (const auto* nested = tree->GetTreeForNested(field, i); nested != nullptr) {
            Walk(reflection->GetRepeatedMessage(message, field, i), nested, element + ".");
          }
        }
      }
    }
  }
};

}  // namespace

std::string PolicyError::ToString() const {
  if (line <= 0) return absl::StrCat(file, ": ", message, " [", rule, "]");
  return absl::StrCat(file, ":", line, ":", column, ": ", message, " [", rule, "]");
}

absl::Status ErrorsToStatus(const std::vector<PolicyError>& errors) {
  if (errors.empty()) return absl::OkStatus();
  std::vector<std::string> lines;
  lines.reserve(errors.size());
  for (const PolicyError& e : errors) lines.push_back(e.ToString());
  return absl::InvalidArgumentError(absl::StrJoin(lines, "\n"));
}

namespace {

// The first byte of `text` that does not start or continue a well-formed
// UTF-8 sequence (overlong forms, surrogates and code points past U+10FFFF
// included); npos when all of it is UTF-8.
size_t FirstInvalidUtf8(const std::string& text) {
  const auto* p = reinterpret_cast<const unsigned char*>(text.data());
  size_t n = text.size(), i = 0;
  while (i < n) {
    unsigned char c = p[i];
    size_t len = c < 0x80           ? 1
                 : (c >> 5) == 0x6  ? 2
                 : (c >> 4) == 0xe  ? 3
                 : (c >> 3) == 0x1e ? 4
                                    : 0;
    if (len == 0 || i + len > n || (len == 2 && c < 0xc2) || (len == 4 && c > 0xf4)) return i;
    for (size_t k = 1; k < len; ++k) {
      if ((p[i + k] & 0xc0) != 0x80) return i;
    }
    if (len == 3 && ((c == 0xe0 && p[i + 1] < 0xa0) || (c == 0xed && p[i + 1] >= 0xa0))) return i;
    if (len == 4 && ((c == 0xf0 && p[i + 1] < 0x90) || (c == 0xf4 && p[i + 1] >= 0x90))) return i;
    i += len;
  }
  return std::string::npos;
}

// A text-format policy is UTF-8 without a byte-order mark (protobuf's text
// parser reads a BOM as a stray token, and invalid UTF-8 in a string only
// fails after parsing, with no position).
std::optional<PolicyError> CheckEncoding(const std::string& text, const std::string& file_name) {
  if (text.rfind("\xEF\xBB\xBF", 0) == 0) {
    return PolicyError{file_name, 1, 1, "encoding",
                       "the file starts with a UTF-8 byte-order mark (U+FEFF); save it as UTF-8 "
                       "without a BOM"};
  }
  size_t bad = FirstInvalidUtf8(text);
  if (bad == std::string::npos) return std::nullopt;
  size_t line_start = text.rfind('\n', bad == 0 ? 0 : bad - 1);
  line_start = (line_start == std::string::npos || bad == 0) ? 0 : line_start + 1;
  int line = 1 + static_cast<int>(std::count(text.begin(), text.begin() + bad, '\n'));
  int column = 1 + static_cast<int>(bad - line_start);
  return PolicyError{file_name, line, column, "encoding",
                     absl::StrFormat("byte 0x%02X is not valid UTF-8 (a policy file is UTF-8 text)",
                                     static_cast<unsigned char>(text[bad]))};
}

}  // namespace

absl::StatusOr<PolicyFile> PolicyFile::Parse(const std::string& text,
                                             const std::string& file_name) {
  if (std::optional<PolicyError> e = CheckEncoding(text, file_name)) return ErrorsToStatus({*e});
  const OrderedSchema& schema = Schema();
  if (schema.prototype == nullptr) {
    return absl::InternalError("the policy schema could not be rebuilt for parsing");
  }
  std::unique_ptr<pb::Message> ordered(schema.prototype->New());
  pb::TextFormat::Parser parser;
  SyntaxErrors errors(file_name, text);
  parser.RecordErrorsTo(&errors);
  pb::TextFormat::ParseInfoTree tree;
  parser.WriteLocationsTo(&tree);
  if (!parser.ParseFromString(text, ordered.get())) {
    std::vector<PolicyError> found = errors.errors();
    if (found.empty()) found.push_back({file_name, 0, 0, "syntax", "not a text-format Policy"});
    return ErrorsToStatus(found);
  }

  PolicyFile file;
  std::string wire;
  if (!ordered->SerializeToString(&wire) || !file.policy_.ParseFromString(wire)) {
    return absl::InternalError(absl::StrCat(file_name, ": parsed policy did not convert"));
  }
  file.file_ = file_name;
  file.text_ = text;
  std::vector<std::pair<std::string, std::pair<int, int>>> locations;
  std::vector<std::pair<std::string, std::pair<int, int>>> duplicates;
  Walker{&locations, &duplicates}.Walk(*ordered, &tree, "");
  for (auto& [path, loc] : locations) {
    file.locations_.push_back({std::move(path), loc.first, loc.second});
  }
  for (auto& [path, loc] : duplicates) {
    file.duplicate_keys_.push_back({std::move(path), loc.first, loc.second});
  }
  return file;
}

absl::StatusOr<PolicyFile> PolicyFile::Load(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::NotFoundError(absl::StrCat(path, ": cannot open: ", std::strerror(errno)));
  }
  std::stringstream buf;
  buf << in.rdbuf();
  if (in.bad()) return absl::DataLossError(absl::StrCat(path, ": read failed"));
  return Parse(buf.str(), path);
}

std::pair<int, int> PolicyFile::Find(const std::string& path) const {
  std::string p = path;
  while (!p.empty()) {
    for (const Location& loc : locations_) {
      if (loc.path == p) return {loc.line, loc.column};
    }
    if (p.back() == ']') {
      const size_t open = p.rfind('[');
      p.resize(open == std::string::npos ? 0 : open);
    } else {
      const size_t dot = p.rfind('.');
      p.resize(dot == std::string::npos ? 0 : dot);
    }
  }
  // The policy message itself starts where the file does.
  return {1, 1};
}

}  // namespace rocetune::controller
