#include "daemon/init.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>

#include "absl/flags/flag.h"
#include "absl/flags/internal/parse.h"
#include "absl/flags/parse.h"
#include "absl/flags/reflection.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "daemon/logging.h"
#include "google/protobuf/io/tokenizer.h"
#include "google/protobuf/text_format.h"

ABSL_FLAG(std::string, config, "",
          "Optional config file in protobuf text format; each field sets the flag of the "
          "same name. Flags given on the command line win.");
ABSL_FLAG(std::string, log_level, "info", "Log level: debug, info, warning or error.");

namespace rocetune {
namespace {

class CollectingErrors : public google::protobuf::io::ErrorCollector {
 public:
  void AddError(int line, int column, const std::string& message) override {
    if (!first.empty()) return;
    first = absl::StrCat("line ", line + 1, ", column ", column + 1, ": ", message);
  }
  void AddWarning(int, int, const std::string&) override {}
  std::string first;
};

}  // namespace

absl::Status ParseTextProto(const std::string& text, const std::string& name,
                            google::protobuf::Message* msg) {
  google::protobuf::TextFormat::Parser parser;
  CollectingErrors errors;
  parser.RecordErrorsTo(&errors);
  if (!parser.ParseFromString(text, msg)) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": ", errors.first));
  }
  return absl::OkStatus();
}

absl::Status ReadTextProtoFile(const std::string& path, google::protobuf::Message* msg) {
  std::ifstream in(path);
  if (!in) {
    return absl::NotFoundError(absl::StrCat(path, ": cannot open"));
  }
  std::stringstream buf;
  buf << in.rdbuf();
  return ParseTextProto(buf.str(), path, msg);
}

absl::Status ApplyConfigToFlags(const google::protobuf::Message& config) {
  const auto* reflection = config.GetReflection();
  std::vector<const google::protobuf::FieldDescriptor*> fields;
  reflection->ListFields(config, &fields);
  for (const auto* field : fields) {
    const std::string& name = field->name();
    absl::CommandLineFlag* flag = absl::FindCommandLineFlag(name);
    if (flag == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("config field \"", name, "\" has no matching flag"));
    }
    if (absl::flags_internal::WasPresentOnCommandLine(name)) continue;
    std::string value;
    google::protobuf::TextFormat::PrintFieldValueToString(config, field, -1, &value);
    if (field->type() == google::protobuf::FieldDescriptor::TYPE_STRING) {
      value = reflection->GetString(config, field);
    }
    std::string error;
    if (!flag->ParseFrom(value, &error)) {
      return absl::InvalidArgumentError(absl::StrCat("config field \"", name, "\": ", error));
    }
  }
  return absl::OkStatus();
}

absl::Status ParseLabels(absl::string_view text,
                         std::vector<std::pair<std::string, std::string>>* out) {
  out->clear();
  if (text.empty()) return absl::OkStatus();
  for (absl::string_view part : absl::StrSplit(text, ',', absl::SkipWhitespace())) {
    std::pair<std::string, std::string> kv = absl::StrSplit(part, absl::MaxSplits('=', 1));
    absl::string_view k = absl::StripAsciiWhitespace(kv.first);
    if (k.empty() || !absl::StrContains(part, '=')) {
      return absl::InvalidArgumentError(absl::StrCat("label \"", part, "\": want key=value"));
    }
    out->emplace_back(std::string(k), std::string(absl::StripAsciiWhitespace(kv.second)));
  }
  return absl::OkStatus();
}

std::vector<std::string> InitDaemon(int argc, char** argv, absl::string_view component,
                                    absl::string_view usage,
                                    const google::protobuf::Message* config_prototype) {
  absl::FlagsUsageConfig cfg;
  // --help lists the flags defined by rocetune itself, not Abseil's internals.
  cfg.contains_help_flags = [](absl::string_view file) {
    return !absl::StrContains(file, "absl/");
  };
  cfg.contains_helpshort_flags = cfg.contains_help_flags;
  cfg.version_string = []() { return std::string("rocetune 0.1.0\n"); };
  cfg.normalize_filename = [](absl::string_view file) {
    size_t pos = file.rfind("/main/");
    for (const char* dir : {"/daemon/", "/agent/", "/controller/", "/cli/", "/sim/"}) {
      size_t p = file.rfind(dir);
      if (p != absl::string_view::npos) return std::string(file.substr(p + 1));
    }
    if (pos != absl::string_view::npos) return std::string(file.substr(pos + 6));
    return std::string(file);
  };
  absl::SetFlagsUsageConfig(cfg);
  absl::SetProgramUsageMessage(usage);
  std::vector<char*> positional = absl::ParseCommandLine(argc, argv);
  SetLogComponent(component);
  std::string config_path = absl::GetFlag(FLAGS_config);
  if (!config_path.empty()) {
    if (config_prototype == nullptr) {
      std::fprintf(stderr, "%s: --config is not supported by this program\n", argv[0]);
      std::exit(2);
    }
    std::unique_ptr<google::protobuf::Message> config(config_prototype->New());
    absl::Status s = ReadTextProtoFile(config_path, config.get());
    if (s.ok()) s = ApplyConfigToFlags(*config);
    if (!s.ok()) {
      std::fprintf(stderr, "%s: bad --config: %s\n", argv[0], std::string(s.message()).c_str());
      std::exit(2);
    }
  }
  if (absl::Status s = SetLogLevel(absl::GetFlag(FLAGS_log_level)); !s.ok()) {
    std::fprintf(stderr, "%s: --log_level: %s\n", argv[0], std::string(s.message()).c_str());
    std::exit(1);
  }
  return std::vector<std::string>(positional.begin(), positional.end());
}

}  // namespace rocetune
