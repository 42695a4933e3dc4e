#include "cli/args.h"

#include <algorithm>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace rocetune::cli {
namespace {

const FlagSpec* Find(const std::vector<FlagSpec>& known, const std::string& name) {
  for (const FlagSpec& f : known) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

absl::Status CheckBool(const std::string& name, const std::string& value) {
  if (value == "true" || value == "false" || value == "1" || value == "0") {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat("--", name, "=", value, ": want true or false"));
}

}  // namespace

std::string NormaliseFlagName(std::string name) {
  std::replace(name.begin(), name.end(), '-', '_');
  return name;
}

std::string ParsedArgs::Get(const std::string& name, const std::string& fallback) const {
  auto it = flags.find(name);
  return it == flags.end() ? fallback : it->second;
}

bool ParsedArgs::GetBool(const std::string& name) const {
  auto it = flags.find(name);
  return it != flags.end() && (it->second == "true" || it->second == "1");
}

absl::StatusOr<ParsedArgs> ParseArgs(const std::vector<std::string>& argv,
                                     const std::vector<FlagSpec>& known) {
  ParsedArgs out;
  bool flags_done = false;
  for (size_t i = 0; i < argv.size(); ++i) {
    const std::string& arg = argv[i];
    if (flags_done || arg.size() < 2 || arg[0] != '-') {
      out.positional.push_back(arg);
      continue;
    }
    if (arg == "--") {
      flags_done = true;
      continue;
    }
    std::string name;
    std::string value;
    bool has_value = false;
    if (arg[1] != '-') {
      // Short forms: -h, -o VALUE, -oVALUE, -o=VALUE, and the same for -f.
      if (arg == "-h") {
        name = "help";
      } else if (arg[1] == 'o' || arg[1] == 'f') {
        name = arg[1] == 'o' ? "output" : "filename";
        if (arg.size() > 2) {
          value = arg.substr(arg[2] == '=' ? 3 : 2);
          has_value = true;
        }
      } else {
        return absl::InvalidArgumentError(absl::StrCat("unknown flag ", arg));
      }
    } else {
      std::string body = arg.substr(2);
      size_t eq = body.find('=');
      name = NormaliseFlagName(body.substr(0, eq));
      if (eq != std::string::npos) {
        value = body.substr(eq + 1);
        has_value = true;
      }
    }
    const FlagSpec* spec = Find(known, name);
    if (spec == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("unknown flag ", arg));
    }
    if (spec->is_bool) {
      if (!has_value) value = "true";
      if (absl::Status s = CheckBool(name, value); !s.ok()) return s;
    } else if (!has_value) {
      if (i + 1 >= argv.size()) {
        return absl::InvalidArgumentError(absl::StrCat("flag --", name, " needs a value"));
      }
      value = argv[++i];
    }
    out.flags[name] = value;
  }
  return out;
}

}  // namespace rocetune::cli
