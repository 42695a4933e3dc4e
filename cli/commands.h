#ifndef ROCETUNE_CLI_COMMANDS_H_
#define ROCETUNE_CLI_COMMANDS_H_

#include <functional>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "cli/args.h"
#include "cli/client.h"
#include "google/protobuf/message.h"

namespace rocetune::cli {

inline constexpr int kExitOk = 0;
inline constexpr int kExitError = 1;  // an RPC failed or was refused, or the input is invalid
inline constexpr int kExitUsage = 2;  // unknown command or flag, missing arguments

// What a command runs with.
class Context {
 public:
  // `output`: "table", "wide", "json" or "yaml" (checked by RunCli).
  Context(const ParsedArgs& args, ClientOptions options, std::string output, bool dry_run,
          bool stdout_tty, std::ostream& out, std::ostream& err)
      : args_(args),
        options_(std::move(options)),
        output_(std::move(output)),
        dry_run_(dry_run),
        stdout_tty_(stdout_tty),
        out_(out),
        err_(err) {}

  const ParsedArgs& args() const { return args_; }
  const ClientOptions& options() const { return options_; }
  // A structured document rather than a table: -o json or -o yaml (PrintJson
  // writes whichever was asked for).
  bool json() const { return output_ == "json" || output_ == "yaml"; }
  bool yaml() const { return output_ == "yaml"; }
  // -o wide: tables with more columns.
  bool wide() const { return output_ == "wide"; }
  bool dry_run() const { return dry_run_; }
  bool stdout_tty() const { return stdout_tty_; }
  std::ostream& out() { return out_; }
  std::ostream& err() { return err_; }
  absl::Time now() const { return absl::Now(); }

  // The controller connection, made on first use. Null after printing why
  // not (see Client::Connect); commands then return kExitUsage.
  Client* client();

  // Runs one unary call (`call` gets a fresh context with actor metadata and
  // deadline). On failure prints "rocetunectl: METHOD: CODE_NAME: message" and
  // returns kExitError; kExitUsage when no client can be made; else kExitOk.
  int Call(const char* method, const std::function<grpc::Status(grpc::ClientContext*)>& call);

  // Prints a usage error for the running command and returns kExitUsage.
  int UsageError(const std::string& message);
  // Prints "rocetunectl: message" to stderr and returns kExitError.
  int Error(const std::string& message);
  // Writes `message` as pretty JSON, or as YAML under -o yaml, to stdout.
  void PrintJson(const google::protobuf::Message& message);
  // The same for a JSON document built by hand.
  void PrintJsonText(const std::string& json);

  std::string command_name;  // "change show", for messages
  std::string command_usage;

 private:
  const ParsedArgs& args_;
  ClientOptions options_;
  std::string output_;
  bool dry_run_;
  bool stdout_tty_;
  std::ostream& out_;
  std::ostream& err_;
  std::unique_ptr<Client> client_;
  bool connect_failed_ = false;
};

using CommandFn = std::function<int(Context&, const std::vector<std::string>& args)>;

// One command of the CLI.
struct CommandSpec {
  std::vector<std::string> words;  // {"policy", "validate"}
  std::string arguments;           // "FILE..."
  std::string help;                // one line
  std::vector<std::string> flags;  // command flags it accepts besides the global ones
  bool mutating = false;           // accepts --dry-run
  int min_args = 0;
  int max_args = 0;  // -1 = unbounded
  bool hidden = false;
  CommandFn run;
};

// The command table, in help order. Each commands_*.cc file contributes one group.
std::vector<CommandSpec> AllCommands();
std::vector<CommandSpec> FleetCommands();   // status, hosts, host, push
std::vector<CommandSpec> AuditCommands();   // audit, audit verify
std::vector<CommandSpec> WatchCommands();   // watch
std::vector<CommandSpec> PolicyCommands();  // policy ..., policies
std::vector<CommandSpec> ChangeCommands();  // change ..., changes
std::vector<CommandSpec> TuningCommands();  // tuning ...

// Every flag the CLI knows (global and per command), for the parser.
std::vector<FlagSpec> AllFlags();
// The global flags (accepted by every command).
std::vector<std::string> GlobalFlagNames();

// The top-level usage text listing commands and global flags.
std::string UsageText();

// Runs the CLI on argv (without the program name); returns the exit code.
// `env_user` is $USER (empty when unset).
int RunCli(const std::vector<std::string>& argv, const std::string& env_user, bool stdout_tty,
           std::ostream& out, std::ostream& err);

// Reads a whole file; kNotFound / kInvalidArgument name the path.
absl::Status ReadFile(const std::string& path, std::string* contents);

}  // namespace rocetune::cli

#endif  // ROCETUNE_CLI_COMMANDS_H_
