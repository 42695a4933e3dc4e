#ifndef ROCETUNE_CLI_ARGS_H_
#define ROCETUNE_CLI_ARGS_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace rocetune::cli {

// A flag the command line may carry. Names use underscores; on the command
// line '-' and '_' are interchangeable (--dry-run == --dry_run).
struct FlagSpec {
  std::string name;
  bool is_bool = false;
  std::string help;
};

// The command line split into positional words and flags.
struct ParsedArgs {
  std::vector<std::string> positional;
  std::map<std::string, std::string> flags;  // normalised name -> value ("true" for bools)

  bool Has(const std::string& name) const { return flags.count(name) > 0; }
  std::string Get(const std::string& name, const std::string& fallback = "") const;
  // A bool flag: "true"/"1"/"" -> true, "false"/"0" -> false.
  bool GetBool(const std::string& name) const;
};

// Parses argv (without the program name). Accepted forms: --name=value,
// --name value (non-bool flags), --name (bool flags), -o VALUE / -oVALUE
// (--output), -h (--help); "--" ends flag parsing. kInvalidArgument names the
// offending argument for an unknown flag, a missing value or a bad bool.
absl::StatusOr<ParsedArgs> ParseArgs(const std::vector<std::string>& argv,
                                     const std::vector<FlagSpec>& known);

// "dry-run" -> "dry_run".
std::string NormaliseFlagName(std::string name);

}  // namespace rocetune::cli

#endif  // ROCETUNE_CLI_ARGS_H_
