// DiffPolicies: a reflection walk over two policies in field-number order.

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "controller/policy/policy_loader.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/text_format.h"

namespace rocetune::controller {
namespace {

namespace pb = google::protobuf;

constexpr char kUnset[] = "(unset)";

// Repeated messages matched by a key field rather than by position.
const char* KeyFieldOf(const pb::Descriptor* type) {
  if (type->full_name() == v1::Knob::descriptor()->full_name()) return "parameter";
  if (type->full_name() == v1::Constraint::descriptor()->full_name()) return "metric";
  return nullptr;
}

std::string ScalarText(const pb::Message& m, const pb::FieldDescriptor* f, int index) {
  std::string s;
  pb::TextFormat::PrintFieldValueToString(m, f, index, &s);
  return s;
}

std::string MessageText(const pb::Message& m) {
  pb::TextFormat::Printer printer;
  printer.SetSingleLineMode(true);
  std::string s;
  printer.PrintToString(m, &s);
  return absl::StrCat("{", absl::StripTrailingAsciiWhitespace(s), "}");
}

class Differ {
 public:
  explicit Differ(std::vector<std::string>* out) : out_(out) {}

  void Message(const pb::Message& a, const pb::Message& b, const std::string& prefix) {
    const pb::Descriptor* type = a.GetDescriptor();
    for (int i = 0; i < type->field_count(); ++i) {
      const pb::FieldDescriptor* f = type->field(i);
      const std::string path = prefix + f->name();
      if (f->is_map()) {
        Map(a, b, f, path);
      } else if (f->is_repeated() && f->cpp_type() == pb::FieldDescriptor::CPPTYPE_MESSAGE) {
        RepeatedMessages(a, b, f, path);
      } else if (f->is_repeated()) {
        const std::string la = List(a, f), lb = List(b, f);
        if (la != lb) Add(path, la, lb);
      } else if (f->cpp_type() == pb::FieldDescriptor::CPPTYPE_MESSAGE) {
        SubMessage(a, b, f, path);
      } else {
        const pb::Reflection* ra = a.GetReflection();
        const pb::Reflection* rb = b.GetReflection();
        const bool ha = !f->has_presence() || ra->HasField(a, f);
        const bool hb = !f->has_presence() || rb->HasField(b, f);
        const std::string va = ha ? ScalarText(a, f, -1) : kUnset;
        const std::string vb = hb ? ScalarText(b, f, -1) : kUnset;
        if (va != vb) Add(path, va, vb);
      }
    }
  }

 private:
  void Add(const std::string& path, const std::string& from, const std::string& to) {
    out_->push_back(absl::StrCat(path, ": ", from, " -> ", to));
  }

  static std::string List(const pb::Message& m, const pb::FieldDescriptor* f) {
    std::vector<std::string> items;
    for (int i = 0; i < m.GetReflection()->FieldSize(m, f); ++i) {
      items.push_back(ScalarText(m, f, i));
    }
    return absl::StrCat("[", absl::StrJoin(items, ", "), "]");
  }

  void SubMessage(const pb::Message& a, const pb::Message& b, const pb::FieldDescriptor* f,
                  const std::string& path) {
    const bool ha = a.GetReflection()->HasField(a, f);
    const bool hb = b.GetReflection()->HasField(b, f);
    if (!ha && !hb) return;
    const size_t before = out_->size();
    Message(a.GetReflection()->GetMessage(a, f), b.GetReflection()->GetMessage(b, f), path + ".");
    // Present but empty on one side only: no field differs, the presence does.
    if (out_->size() == before && ha != hb) {
      Add(path, ha ? "{}" : kUnset, hb ? "{}" : kUnset);
    }
  }

  void Map(const pb::Message& a, const pb::Message& b, const pb::FieldDescriptor* f,
           const std::string& path) {
    const pb::FieldDescriptor* key = f->message_type()->map_key();
    const pb::FieldDescriptor* value = f->message_type()->map_value();
    auto entries = [&](const pb::Message& m) {
      std::map<std::string, const pb::Message*> by_key;
      for (int i = 0; i < m.GetReflection()->FieldSize(m, f); ++i) {
        const pb::Message& e = m.GetReflection()->GetRepeatedMessage(m, f, i);
        const std::string k = key->cpp_type() == pb::FieldDescriptor::CPPTYPE_STRING
                                  ? e.GetReflection()->GetString(e, key)
                                  : ScalarText(e, key, -1);
        by_key[k] = &e;
      }
      return by_key;
    };
    const auto ea = entries(a), eb = entries(b);
    std::set<std::string> keys;
    for (const auto& [k, e] : ea) keys.insert(k);
    for (const auto& [k, e] : eb) keys.insert(k);
    for (const std::string& k : keys) {
      const std::string element = absl::StrCat(path, "[", k, "]");
      const auto ia = ea.find(k), ib = eb.find(k);
      if (value->cpp_type() == pb::FieldDescriptor::CPPTYPE_MESSAGE && ia != ea.end() &&
          ib != eb.end()) {
        Message(ia->second->GetReflection()->GetMessage(*ia->second, value),
                ib->second->GetReflection()->GetMessage(*ib->second, value), element + ".");
        continue;
      }
      auto text = [&](const auto& it, const auto& end) -> std::string {
        if (it == end) return kUnset;
        if (value->cpp_type() == pb::FieldDescriptor::CPPTYPE_MESSAGE) {
          return MessageText(it->second->GetReflection()->GetMessage(*it->second, value));
        }
        return ScalarText(*it->second, value, -1);
      };
      const std::string va = text(ia, ea.end()), vb = text(ib, eb.end());
      if (va != vb) Add(element, va, vb);
    }
  }

  void RepeatedMessages(const pb::Message& a, const pb::Message& b, const pb::FieldDescriptor* f,
                        const std::string& path) {
    const pb::Reflection* ra = a.GetReflection();
    const pb::Reflection* rb = b.GetReflection();
    const int na = ra->FieldSize(a, f), nb = rb->FieldSize(b, f);
    const char* key_name = KeyFieldOf(f->message_type());
    const pb::FieldDescriptor* key =
        key_name == nullptr ? nullptr : f->message_type()->FindFieldByName(key_name);
    // Keys of each list in order; matching by key needs them unique on both sides.
    auto keys_of = [&](const pb::Message& m, int n, std::vector<std::string>* keys) {
      std::set<std::string> seen;
      for (int i = 0; i < n; ++i) {
        const pb::Message& e = m.GetReflection()->GetRepeatedMessage(m, f, i);
        keys->push_back(e.GetReflection()->GetString(e, key));
        if (!seen.insert(keys->back()).second) return false;
      }
      return true;
    };
    std::vector<std::string> ka, kb;
    if (key == nullptr || key->cpp_type() != pb::FieldDescriptor::CPPTYPE_STRING ||
        !keys_of(a, na, &ka) || !keys_of(b, nb, &kb)) {
      for (int i = 0; i < std::max(na, nb); ++i) {
        const std::string element = absl::StrCat(path, "[", i, "]");
        if (i < na && i < nb) {
          Message(ra->GetRepeatedMessage(a, f, i), rb->GetRepeatedMessage(b, f, i), element + ".");
        } else if (i < na) {
          out_->push_back(
              absl::StrCat(element, ": removed ", MessageText(ra->GetRepeatedMessage(a, f, i))));
        } else {
          out_->push_back(
              absl::StrCat(element, ": added ", MessageText(rb->GetRepeatedMessage(b, f, i))));
        }
      }
      return;
    }
    std::map<std::string, int> ib;
    for (int i = 0; i < nb; ++i) ib[kb[i]] = i;
    std::vector<std::string> common_a, common_b;
    for (int i = 0; i < na; ++i) {
      const std::string element = absl::StrCat(path, "[", ka[i], "]");
      const auto it = ib.find(ka[i]);
      if (it == ib.end()) {
        out_->push_back(
            absl::StrCat(element, ": removed ", MessageText(ra->GetRepeatedMessage(a, f, i))));
        continue;
      }
      common_a.push_back(ka[i]);
      Message(ra->GetRepeatedMessage(a, f, i), rb->GetRepeatedMessage(b, f, it->second),
              element + ".");
    }
    const std::set<std::string> in_a(ka.begin(), ka.end());
    for (int i = 0; i < nb; ++i) {
      if (in_a.count(kb[i]) == 0) {
        out_->push_back(absl::StrCat(path, "[", kb[i], "]: added ",
                                     MessageText(rb->GetRepeatedMessage(b, f, i))));
      } else {
        common_b.push_back(kb[i]);
      }
    }
    if (common_a != common_b) {
      out_->push_back(absl::StrCat(path, " order: [", absl::StrJoin(common_a, ", "), "] -> [",
                                   absl::StrJoin(common_b, ", "), "]"));
    }
  }

  std::vector<std::string>* out_;
};

}  // namespace

std::vector<std::string> DiffPolicies(const v1::Policy& a, const v1::Policy& b) {
  std::vector<std::string> out;
  Differ(&out).Message(a, b, "");
  return out;
}

}  // namespace rocetune::controller
