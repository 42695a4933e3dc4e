#include "sim/scenario_loader.h"

#include <memory>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "daemon/init.h"
#include "google/protobuf/descriptor.h"

namespace rocetune::sim {
namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;

absl::Status Bad(const std::string& path, const std::string& why) {
  return absl::InvalidArgumentError(absl::StrCat("--set ", path, ": ", why));
}

absl::Status SetScalar(const std::string& path, const std::string& value, Message* msg,
                       const FieldDescriptor* f) {
  const auto* r = msg->GetReflection();
  auto bad_value = [&](const char* type) {
    return Bad(path, absl::StrCat("\"", value, "\" is not a valid ", type));
  };
  switch (f->cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT32: {
      int32_t v;
      if (!absl::SimpleAtoi(value, &v)) return bad_value("int32");
      r->SetInt32(msg, f, v);
      break;
    }
    case FieldDescriptor::CPPTYPE_INT64: {
      int64_t v;
      if (!absl::SimpleAtoi(value, &v)) return bad_value("int64");
      r->SetInt64(msg, f, v);
      break;
    }
    case FieldDescriptor::CPPTYPE_UINT32: {
      uint32_t v;
      if (!absl::SimpleAtoi(value, &v)) return bad_value("uint32");
      r->SetUInt32(msg, f, v);
      break;
    }
    case FieldDescriptor::CPPTYPE_UINT64: {
      uint64_t v;
      if (!absl::SimpleAtoi(value, &v)) return bad_value("uint64");
      r->SetUInt64(msg, f, v);
      break;
    }
    case FieldDescriptor::CPPTYPE_DOUBLE: {
      double v;
      if (!absl::SimpleAtod(value, &v)) return bad_value("number");
      r->SetDouble(msg, f, v);
      break;
    }
    case FieldDescriptor::CPPTYPE_FLOAT: {
      float v;
      if (!absl::SimpleAtof(value, &v)) return bad_value("number");
      r->SetFloat(msg, f, v);
      break;
    }
    case FieldDescriptor::CPPTYPE_BOOL: {
      bool v;
      if (!absl::SimpleAtob(value, &v)) return bad_value("bool");
      r->SetBool(msg, f, v);
      break;
    }
    case FieldDescriptor::CPPTYPE_STRING:
      r->SetString(msg, f, value);
      break;
    case FieldDescriptor::CPPTYPE_ENUM: {
      const auto* e = f->enum_type()->FindValueByName(value);
      int n;
      if (e == nullptr && absl::SimpleAtoi(value, &n)) e = f->enum_type()->FindValueByNumber(n);
      if (e == nullptr) return bad_value(f->enum_type()->name().c_str());
      r->SetEnum(msg, f, e);
      break;
    }
    case FieldDescriptor::CPPTYPE_MESSAGE:
      return Bad(path, "is a message, not a scalar field");
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ApplyOverride(const std::string& spec, Message* msg) {
  const size_t eq = spec.find('=');
  if (eq == std::string::npos || eq == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--set \"", spec, "\": want path=value, e.g. dcqcn.rpg_ai_rate=20"));
  }
  const std::string path = spec.substr(0, eq);
  const std::string value = spec.substr(eq + 1);
  // Work on a copy so a failure leaves `msg` unchanged.
  std::unique_ptr<Message> copy(msg->New());
  copy->CopyFrom(*msg);
  Message* cur = copy.get();
  std::vector<std::string> parts = absl::StrSplit(path, '.');
  for (size_t i = 0; i < parts.size(); ++i) {
    std::string name = parts[i];
    int index = -1;
    const size_t lb = name.find('[');
    if (lb != std::string::npos) {
      if (name.back() != ']' ||
          !absl::SimpleAtoi(name.substr(lb + 1, name.size() - lb - 2), &index) || index < 0) {
        return Bad(path, absl::StrCat("bad index in \"", name, "\""));
      }
      name = name.substr(0, lb);
    }
    const auto* desc = cur->GetDescriptor();
    const FieldDescriptor* f = desc->FindFieldByName(name);
    if (f == nullptr) {
      return Bad(path, absl::StrCat("no field \"", name, "\" in ", desc->full_name()));
    }
    const auto* r = cur->GetReflection();
    const bool last = i + 1 == parts.size();
    if (f->is_repeated()) {
      if (index < 0) return Bad(path, absl::StrCat("\"", name, "\" is repeated: give an index"));
      const int size = r->FieldSize(*cur, f);
      if (index > size) {
        return Bad(path, absl::StrCat("index ", index, " beyond ", name, " (size ", size, ")"));
      }
      if (f->cpp_type() != FieldDescriptor::CPPTYPE_MESSAGE) {
        if (!last) return Bad(path, absl::StrCat("\"", name, "\" is not a message"));
        // Repeated scalar (the uint32 / uint64 lists of the scenario).
        const FieldDescriptor* tf = f;
        switch (f->cpp_type()) {
          case FieldDescriptor::CPPTYPE_UINT32: {
            uint32_t v;
            if (!absl::SimpleAtoi(value, &v)) return Bad(path, "not a valid uint32");
            index == size ? r->AddUInt32(cur, tf, v) : r->SetRepeatedUInt32(cur, tf, index, v);
            break;
          }
          case FieldDescriptor::CPPTYPE_UINT64: {
            uint64_t v;
            if (!absl::SimpleAtoi(value, &v)) return Bad(path, "not a valid uint64");
            index == size ? r->AddUInt64(cur, tf, v) : r->SetRepeatedUInt64(cur, tf, index, v);
            break;
          }
          default:
            return Bad(path, "repeated field of this type cannot be set");
        }
        msg->CopyFrom(*copy);
        return absl::OkStatus();
      }
      if (last) return Bad(path, "is a message, not a scalar field");
      cur = index == size ? r->AddMessage(cur, f) : r->MutableRepeatedMessage(cur, f, index);
      continue;
    }
    if (index >= 0) return Bad(path, absl::StrCat("\"", name, "\" is not repeated"));
    if (f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
      if (last) return Bad(path, "is a message, not a scalar field");
      cur = r->MutableMessage(cur, f);
      continue;
    }
    if (!last) return Bad(path, absl::StrCat("\"", name, "\" is not a message"));
    absl::Status s = SetScalar(path, value, cur, f);
    if (!s.ok()) return s;
  }
  msg->CopyFrom(*copy);
  return absl::OkStatus();
}

absl::StatusOr<v1::Scenario> LoadScenario(const std::string& path,
                                          const std::vector<std::string>& overrides) {
  v1::Scenario scenario;
  absl::Status s = ReadTextProtoFile(path, &scenario);
  if (!s.ok()) return s;
  for (const std::string& o : overrides) {
    s = ApplyOverride(o, &scenario);
    if (!s.ok()) return s;
  }
  return scenario;
}

}  // namespace rocetune::sim
