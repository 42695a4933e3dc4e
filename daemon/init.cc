#include "daemon/init.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>

#include "absl/flags/flag.h"
#include "absl/flags/internal/parse.h"
#include "absl/flags/internal/usage.h"
#include "absl/flags/parse.h"
#include "absl/flags/reflection.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
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

namespace {

// Help flags and flags that change how Abseil reads the rest of the command
// line; Abseil handles them itself.
bool IsAbseilControlFlag(absl::string_view name) {
  return name == "flagfile" || name == "fromenv" || name == "tryfromenv" || name == "undefok";
}

// The usage flags Abseil's parser knows without registering them.
bool IsUsageFlag(absl::string_view name) {
  return name == "help" || name == "helpfull" || name == "helpshort" || name == "helppackage" ||
         name == "version" || name == "only_check_args" || name == "helpon" || name == "helpmatch";
}

[[noreturn]] void UsageExit(const char* argv0, const std::string& message) {
  std::string program(argv0);
  if (size_t slash = program.rfind('/'); slash != std::string::npos) {
    program = program.substr(slash + 1);
  }
  std::fprintf(stderr, "%s: %s (see --help)\n", program.c_str(), message.c_str());
  std::exit(2);
}

// Checks every flag on the command line before Abseil parses it (Abseil exits
// 1 on these errors): the flag exists, it has a value when it needs one, and
// it accepts the value.
void CheckCommandLine(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (IsAbseilControlFlag(absl::StripPrefix(absl::StripPrefix(argv[i], "-"), "-"))) return;
  }
  for (int i = 1; i < argc; ++i) {
    absl::string_view arg = argv[i];
    if (arg == "--") return;
    if (arg.size() < 2 || arg[0] != '-') continue;  // positional, or "-"
    arg.remove_prefix(arg[1] == '-' ? 2 : 1);
    const size_t eq = arg.find('=');
    absl::string_view name = arg.substr(0, eq);
    const bool has_value = eq != absl::string_view::npos;
    std::string value = has_value ? std::string(arg.substr(eq + 1)) : "";
    if (IsUsageFlag(name)) continue;
    absl::CommandLineFlag* flag = absl::FindCommandLineFlag(name);
    if (flag == nullptr && absl::StartsWith(name, "no")) {
      absl::CommandLineFlag* negated = absl::FindCommandLineFlag(name.substr(2));
      if (negated != nullptr && negated->IsOfType<bool>()) {
        if (has_value) UsageExit(argv[0], absl::StrCat("--", name, " takes no value"));
        continue;
      }
    }
    if (flag == nullptr) UsageExit(argv[0], absl::StrCat("unknown flag --", name));
    if (!has_value) {
      if (flag->IsOfType<bool>()) continue;
      if (i + 1 >= argc) UsageExit(argv[0], absl::StrCat("--", name, " needs a value"));
      value = argv[++i];
    }
    // Abseil sets the flag again when it parses the command line.
    std::string error;
    if (!flag->ParseFrom(value, &error)) {
      UsageExit(argv[0], absl::StrCat("--", name, "=", value, ": ", error));
    }
  }
}

}  // namespace

std::vector<std::string> ParseFlags(int argc, char** argv, absl::string_view usage) {
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
  CheckCommandLine(argc, argv);
  std::vector<char*> positional = absl::flags_internal::ParseCommandLineImpl(
      argc, argv, absl::flags_internal::ArgvListAction::kRemoveParsedArgs,
      absl::flags_internal::UsageFlagsAction::kIgnoreUsage,
      absl::flags_internal::OnUndefinedFlag::kAbortIfUndefined);
  // Help and version were asked for: not an error.
  if (absl::flags_internal::HandleUsageFlags(std::cout, absl::ProgramUsageMessage()) != -1) {
    std::cout.flush();
    std::exit(0);
  }
  return std::vector<std::string>(positional.begin(), positional.end());
}

absl::StatusOr<std::vector<FlagChange>> ReloadConfigFlags(
    const google::protobuf::Message& config_prototype) {
  std::vector<FlagChange> changes;
  const std::string path = absl::GetFlag(FLAGS_config);
  if (path.empty()) return changes;
  std::unique_ptr<google::protobuf::Message> config(config_prototype.New());
  if (absl::Status s = ReadTextProtoFile(path, config.get()); !s.ok()) return s;
  // Every flag the file can set, as it is now: restored if any field fails.
  std::vector<std::pair<absl::CommandLineFlag*, std::string>> before;
  const google::protobuf::Descriptor* d = config->GetDescriptor();
  for (int i = 0; i < d->field_count(); ++i) {
    if (absl::CommandLineFlag* f = absl::FindCommandLineFlag(d->field(i)->name())) {
      before.emplace_back(f, f->CurrentValue());
    }
  }
  if (absl::Status s = ApplyConfigToFlags(*config); !s.ok()) {
    for (auto& [flag, value] : before) {
      std::string ignored;
      (void)flag->ParseFrom(value, &ignored);
    }
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", s.message()));
  }
  for (auto& [flag, value] : before) {
    std::string now = flag->CurrentValue();
    if (now != value) changes.push_back({std::string(flag->Name()), value, std::move(now)});
  }
  return changes;
}

void ReloadOnHangup(const google::protobuf::Message& config_prototype,
                    const std::vector<std::string>& live,
                    const std::function<std::string()>& apply_live) {
  absl::StatusOr<std::vector<FlagChange>> changes = ReloadConfigFlags(config_prototype);
  if (!changes.ok()) {
    LogError("SIGHUP: configuration not reloaded, nothing changed",
             {{"error", std::string(changes.status().message())}});
    return;
  }
  std::vector<std::string> changed;
  std::vector<std::string> restart;
  for (const FlagChange& c : *changes) {
    const bool is_live =
        c.name == "log_level" || std::find(live.begin(), live.end(), c.name) != live.end();
    (is_live ? changed : restart).push_back(absl::StrCat(c.name, ": ", c.before, " -> ", c.after));
  }
  if (absl::Status s = SetLogLevel(absl::GetFlag(FLAGS_log_level)); !s.ok()) {
    LogError("SIGHUP: --log_level not applied", {{"error", std::string(s.message())}});
  }
  const std::string error = apply_live ? apply_live() : "";
  if (!error.empty()) LogError("SIGHUP: a live setting was not applied", {{"error", error}});
  LogInfo("SIGHUP: configuration reloaded",
          {{"config", absl::GetFlag(FLAGS_config)},
           {"changed", changed.empty() ? "none" : absl::StrJoin(changed, "; ")},
           {"restart_needed", restart.empty() ? "none" : absl::StrJoin(restart, "; ")}});
}

std::vector<std::string> InitDaemon(int argc, char** argv, absl::string_view component,
                                    absl::string_view usage,
                                    const google::protobuf::Message* config_prototype) {
  std::vector<std::string> positional = ParseFlags(argc, argv, usage);
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
    std::exit(2);
  }
  return positional;
}

int StartupExitCode(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kNotFound:
    case absl::StatusCode::kFailedPrecondition:
      return 2;
    default:
      return 1;
  }
}

}  // namespace rocetune
