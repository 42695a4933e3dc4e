#ifndef ROCETUNE_DAEMON_INIT_H_
#define ROCETUNE_DAEMON_INIT_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "google/protobuf/message.h"

namespace rocetune {

// Parses the command line with absl flags (unknown flags: message and exit 1;
// --help lists every rocetune flag), then, when --config=FILE is given, loads
// FILE as a text-format `config_prototype` message and applies each field to the
// flag of the same name unless that flag was given on the command line. Sets
// the log level and component. Returns positional arguments (argv[0] first).
// On a bad config file prints the error (with line and column) and exits 2.
std::vector<std::string> InitDaemon(int argc, char** argv, absl::string_view component,
                                    absl::string_view usage,
                                    const google::protobuf::Message* config_prototype);

// Applies the set fields of `config` to same-named flags, skipping flags given
// on the command line. kInvalidArgument names the field when a value is rejected
// or no flag of that name exists.
absl::Status ApplyConfigToFlags(const google::protobuf::Message& config);

// Reads a text-format protobuf file into `msg`. Errors name the file, line and column.
absl::Status ReadTextProtoFile(const std::string& path, google::protobuf::Message* msg);
// Parses text-format `text`; errors are "<name>: line:column: message".
absl::Status ParseTextProto(const std::string& text, const std::string& name,
                            google::protobuf::Message* msg);

// Parses "k1=v1,k2=v2" into a map-like vector. kInvalidArgument on a malformed entry.
absl::Status ParseLabels(absl::string_view text,
                         std::vector<std::pair<std::string, std::string>>* out);

}  // namespace rocetune

#endif  // ROCETUNE_DAEMON_INIT_H_
