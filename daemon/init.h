#ifndef ROCETUNE_DAEMON_INIT_H_
#define ROCETUNE_DAEMON_INIT_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "google/protobuf/message.h"

namespace rocetune {

// Sets the --help conventions of every rocetune binary (only rocetune's own
// flags are listed, under `usage`) and parses the command line: --help,
// --helpfull, --helpshort and --version print to stdout and exit 0; an unknown
// flag, a missing value or a value the flag rejects prints "<program>: ..." to
// stderr and exits 2. Returns positional arguments (argv[0] first).
std::vector<std::string> ParseFlags(int argc, char** argv, absl::string_view usage);

// ParseFlags, then, when --config=FILE is given, loads
// FILE as a text-format `config_prototype` message and applies each field to the
// flag of the same name unless that flag was given on the command line. Sets
// the log level and component. Returns positional arguments (argv[0] first).
// On a bad config file or --log_level prints the error and exits 2.
std::vector<std::string> InitDaemon(int argc, char** argv, absl::string_view component,
                                    absl::string_view usage,
                                    const google::protobuf::Message* config_prototype);

// Applies the set fields of `config` to same-named flags, skipping flags given
// on the command line. kInvalidArgument names the field when a value is rejected
// or no flag of that name exists.
absl::Status ApplyConfigToFlags(const google::protobuf::Message& config);

// One flag a config reload set to a new value.
struct FlagChange {
  std::string name;
  std::string before;
  std::string after;
};

// Re-reads the --config file given at start into a `config_prototype` message
// and applies its fields to the same-named flags (flags given on the command
// line still win). Returns the flags whose value changed; on an unreadable or
// invalid file no flag changes and the error names the file. A field removed
// from the file keeps its current value. With no --config: an empty list.
absl::StatusOr<std::vector<FlagChange>> ReloadConfigFlags(
    const google::protobuf::Message& config_prototype);

// The SIGHUP handler of a daemon: ReloadConfigFlags, then the log level, then
// `apply_live` for the daemon's own live settings (it returns an error text,
// empty when all applied). Logs one line: the changed flags ("name: before ->
// after"), the ones that need a restart (changed, but not in `live`), or the
// error. Never exits.
void ReloadOnHangup(const google::protobuf::Message& config_prototype,
                    const std::vector<std::string>& live,
                    const std::function<std::string()>& apply_live);

// Reads a text-format protobuf file into `msg`. Errors name the file, line and column.
absl::Status ReadTextProtoFile(const std::string& path, google::protobuf::Message* msg);
// Parses text-format `text`; errors are "<name>: line:column: message".
absl::Status ParseTextProto(const std::string& text, const std::string& name,
                            google::protobuf::Message* msg);

// Parses "k1=v1,k2=v2" into a map-like vector. kInvalidArgument on a malformed entry.
absl::Status ParseLabels(absl::string_view text,
                         std::vector<std::pair<std::string, std::string>>* out);

// The daemons' exit codes when they cannot start: 2 for a configuration
// error (a flag's value, a TLS file, the roles file: kInvalidArgument,
// kNotFound, kFailedPrecondition), which a restart will not fix (the units
// set RestartPreventExitStatus=2); 1 for anything else (a port in use, a
// locked or unwritable state dir, a store that cannot open), which one may.
int StartupExitCode(const absl::Status& status);

}  // namespace rocetune

#endif  // ROCETUNE_DAEMON_INIT_H_
