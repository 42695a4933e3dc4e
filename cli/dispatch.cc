// Command-line dispatch: flags, the command table, usage and the Context.
#include <algorithm>
#include <fstream>
#include <sstream>

#include "absl/algorithm/container.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "cli/commands.h"
#include "cli/output.h"
#include "daemon/process_metrics.h"

namespace rocetune::cli {
namespace {

bool StartsWithWords(const std::vector<std::string>& positional,
                     const std::vector<std::string>& words) {
  if (positional.size() < words.size()) return false;
  return std::equal(words.begin(), words.end(), positional.begin());
}

std::string CommandUsage(const CommandSpec& c) {
  std::string line = absl::StrCat("rocetunectl ", absl::StrJoin(c.words, " "));
  if (!c.arguments.empty()) absl::StrAppend(&line, " ", c.arguments);
  for (const std::string& f : c.flags) absl::StrAppend(&line, " [--", f, "]");
  if (c.mutating) absl::StrAppend(&line, " [--dry-run]");
  return line;
}

std::string FlagsHelp() {
  std::string out;
  for (const FlagSpec& f : AllFlags()) {
    std::string name = f.name == "output"     ? "-o, --output"
                       : f.name == "filename" ? "-f, --filename"
                                              : absl::StrCat("--", f.name);
    if (f.name == "dry_run") name = "--dry-run";
    absl::StrAppend(&out, "  ", name, std::string(name.size() < 22 ? 22 - name.size() : 1, ' '),
                    f.help, "\n");
  }
  return out;
}

// Commands whose words start with `prefix`, with their help lines.
std::string CommandList(const std::vector<std::string>& prefix) {
  std::string out;
  for (const CommandSpec& c : AllCommands()) {
    if (c.hidden || !StartsWithWords(c.words, prefix)) continue;
    std::string head = absl::StrJoin(c.words, " ");
    if (!c.arguments.empty()) absl::StrAppend(&head, " ", c.arguments);
    if (head.size() < 34) {
      absl::StrAppend(&out, "  ", head, std::string(34 - head.size(), ' '), c.help, "\n");
    } else {
      absl::StrAppend(&out, "  ", head, "\n", std::string(36, ' '), c.help, "\n");
    }
  }
  return out;
}

bool PrintableAscii(const std::string& s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return c >= 0x20 && c < 0x7f; });
}

}  // namespace

std::vector<std::string> GlobalFlagNames() {
  return {"controller",        "output",   "actor",   "timeout",
          "insecure_loopback", "tls_cert", "tls_key", "tls_ca",
          "tls_server_name",   "help",     "version"};
}

std::vector<FlagSpec> AllFlags() {
  return {
      {"controller", false, "controller admin address host:port (default 127.0.0.1:7070)"},
      {"filename", false, "apply/diff: the policy file (also -f FILE)"},
      {"output", false,
       "table (default), wide (tables with more columns: hosts, changes), json or yaml"},
      {"actor", false, "who you are, sent with every call (default $USER, else \"unknown\")"},
      {"timeout", false, "deadline of each call, and of push --wait (default 10s)"},
      {"insecure_loopback", true,
       "without TLS files: plaintext gRPC, only to a numeric loopback address or localhost"},
      {"tls_cert", false, "PEM client certificate (its CN is your identity) for mutual TLS"},
      {"tls_key", false, "PEM private key of --tls_cert"},
      {"tls_ca", false, "PEM CA bundle the controller's certificate must chain to"},
      {"tls_server_name", false, "name the controller's certificate must carry (default: host)"},
      {"help", true, "list commands (exit 0)"},
      {"version", true, "print rocetunectl's version and source revision (exit 0)"},
      {"dry_run", true, "mutating commands: ask the controller to check, not to act"},
      {"reason", false, "why; recorded in the audit log"},
      {"override_rejected", false,
       "change propose: why values a judge FAIL or a guard rolled back before are proposed "
       "again (audited); without it such a proposal is refused"},
      {"selector", false, "hosts/status: label selector k1=v1,k2=v2"},
      {"page_size", false, "hosts/change list: rows per request"},
      {"page", false, "audit/change list: continue from this page token"},
      {"limit", false, "audit: rows per page (default 50)"},
      {"host", false, "audit: only rows about this host"},
      {"change", false, "audit: only rows about this change"},
      {"since", false, "audit: rows since a duration ago (1h) or an RFC 3339 time"},
      {"state", false, "change list: states, e.g. PROPOSED,CANARY"},
      {"campaign", false, "change list: only trials of this campaign"},
      {"budget", false, "tuning start: trial budget (default: the policy's)"},
      {"scenario", false, "change rehearse: scenario file (text-format Scenario)"},
      {"wait", true, "push: wait until the host acks (exit 0) or nacks (exit 1)"},
      {"replace", true,
       "push: the named parameters become the host's whole desired state (default: merged "
       "into it; what is not named is no longer managed nor corrected on drift)"},
  };
}

namespace {

// kubectl-style verbs over the resource commands: `get KIND` lists,
// `describe KIND NAME` shows one. Each runs the command it names, with its
// flags; the singular/plural form kubectl also accepts is a hidden synonym.
struct Alias {
  std::vector<std::string> words;
  std::vector<std::string> target;
  std::string arguments;
  int min_args;
  int max_args;
  bool hidden;
};

const std::vector<Alias>& Aliases() {
  static const auto* aliases = new std::vector<Alias>{
      {{"get", "hosts"}, {"hosts"}, "", 0, 0, false},
      {{"get", "host"}, {"hosts"}, "", 0, 0, true},
      {{"get", "policies"}, {"policy", "list"}, "", 0, 0, false},
      {{"get", "policy"}, {"policy", "list"}, "", 0, 0, true},
      {{"get", "changes"}, {"change", "list"}, "", 0, 0, false},
      {{"get", "change"}, {"change", "list"}, "", 0, 0, true},
      {{"get", "campaigns"}, {"tuning", "show"}, "", 0, 0, false},
      {{"get", "campaign"}, {"tuning", "show"}, "", 0, 0, true},
      {{"describe", "host"}, {"host"}, "HOST", 1, 1, false},
      {{"describe", "hosts"}, {"host"}, "HOST", 1, 1, true},
      {{"describe", "policy"}, {"policy", "show"}, "NAME[@VERSION]", 1, 1, false},
      {{"describe", "policies"}, {"policy", "show"}, "NAME[@VERSION]", 1, 1, true},
      {{"describe", "change"}, {"change", "show"}, "ID", 1, 1, false},
      {{"describe", "changes"}, {"change", "show"}, "ID", 1, 1, true},
      {{"describe", "campaign"}, {"tuning", "show"}, "ID", 1, 1, false},
      {{"describe", "campaigns"}, {"tuning", "show"}, "ID", 1, 1, true},
  };
  return *aliases;
}

}  // namespace

std::vector<CommandSpec> AllCommands() {
  std::vector<CommandSpec> all;
  for (auto group : {FleetCommands, AuditCommands, WatchCommands, PolicyCommands, ChangeCommands,
                     TuningCommands}) {
    for (CommandSpec& c : group()) all.push_back(std::move(c));
  }
  const size_t base = all.size();
  for (const Alias& a : Aliases()) {
    auto target = std::find_if(all.begin(), all.begin() + base,
                               [&](const CommandSpec& c) { return c.words == a.target; });
    if (target == all.begin() + base) continue;  // a table typo; CliTest checks every alias runs
    CommandSpec c = *target;
    c.help = absl::StrCat("same as ", absl::StrJoin(a.target, " "),
                          a.arguments.empty() ? "" : absl::StrCat(" ", a.arguments));
    c.words = a.words;
    c.arguments = a.arguments;
    c.min_args = a.min_args;
    c.max_args = a.max_args;
    c.hidden = a.hidden;
    all.push_back(std::move(c));
  }
  return all;
}

std::string UsageText() {
  return absl::StrCat(
      "rocetunectl: inspect and steer a rocetune controller.\n\n"
      "usage: rocetunectl [flags] COMMAND [ARGS] [flags]\n\ncommands:\n",
      CommandList({}), "  help [COMMAND]                    this text\n\nflags:\n", FlagsHelp(),
      "\nexit codes: 0 ok, 1 error (call failed or refused, invalid input), 2 usage\n");
}

absl::Status ReadFile(const std::string& path, std::string* contents) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open"));
  std::stringstream buf;
  buf << in.rdbuf();
  if (in.bad()) return absl::InvalidArgumentError(absl::StrCat(path, ": read error"));
  *contents = buf.str();
  return absl::OkStatus();
}

Client* Context::client() {
  if (client_ != nullptr) return client_.get();
  if (connect_failed_) return nullptr;
  absl::StatusOr<std::unique_ptr<Client>> c = Client::Connect(options_);
  if (!c.ok()) {
    connect_failed_ = true;
    err_ << "rocetunectl: " << c.status().message() << "\n";
    return nullptr;
  }
  client_ = *std::move(c);
  return client_.get();
}

int Context::Call(const char* method,
                  const std::function<grpc::Status(grpc::ClientContext*)>& call) {
  Client* c = client();
  if (c == nullptr) return kExitUsage;
  std::unique_ptr<grpc::ClientContext> ctx = c->NewContext();
  grpc::Status s = call(ctx.get());
  if (s.ok()) return kExitOk;
  err_ << "rocetunectl: " << method << " (controller " << options_.controller
       << "): " << StatusCodeName(s.error_code()) << ": " << s.error_message() << "\n";
  if (std::string hint = TlsRefusalHint(s, options_.tls.enabled()); !hint.empty()) {
    err_ << "rocetunectl: " << hint << "\n";
  }
  return kExitError;
}

int Context::UsageError(const std::string& message) {
  err_ << "rocetunectl " << command_name << ": " << message << "\nusage: " << command_usage << "\n";
  return kExitUsage;
}

int Context::Error(const std::string& message) {
  err_ << "rocetunectl: " << message << "\n";
  return kExitError;
}

void Context::PrintJson(const google::protobuf::Message& message) {
  PrintJsonText(MessageToJson(message, /*multiline=*/true));
}

void Context::PrintJsonText(const std::string& json) {
  if (!yaml()) {
    out_ << json;
    if (!json.empty() && json.back() != '\n') out_ << "\n";
    return;
  }
  absl::StatusOr<std::string> yaml = JsonToYaml(json);
  out_ << (yaml.ok() ? *yaml : json);  // our own JSON always converts
}

int RunCli(const std::vector<std::string>& argv, const std::string& env_user, bool stdout_tty,
           std::ostream& out, std::ostream& err) {
  absl::StatusOr<ParsedArgs> parsed = ParseArgs(argv, AllFlags());
  if (!parsed.ok()) {
    err << "rocetunectl: " << parsed.status().message() << " (try --help)\n";
    return kExitUsage;
  }
  const ParsedArgs& args = *parsed;
  const std::vector<std::string>& pos = args.positional;
  if (args.GetBool("version")) {
    out << "rocetunectl " << BuildVersion() << " (revision " << BuildRevision() << ")\n";
    return kExitOk;
  }
  bool help_word = !pos.empty() && pos[0] == "help";
  if (args.GetBool("help") || help_word) {
    std::vector<std::string> prefix(pos.begin() + (help_word ? 1 : 0), pos.end());
    std::string list = CommandList(prefix);
    out << (prefix.empty() || list.empty() ? UsageText() : absl::StrCat("commands:\n", list));
    return kExitOk;
  }
  if (pos.empty()) {
    err << UsageText() << "\nrocetunectl: no command given\n";
    return kExitUsage;
  }
  std::vector<CommandSpec> commands = AllCommands();
  const CommandSpec* spec = nullptr;
  for (const CommandSpec& c : commands) {
    if (StartsWithWords(pos, c.words) && (spec == nullptr || c.words.size() > spec->words.size())) {
      spec = &c;
    }
  }
  if (spec == nullptr) {
    std::string list = CommandList({pos[0]});
    err << "rocetunectl: unknown command \"" << absl::StrJoin(pos, " ") << "\"\n"
        << (list.empty() ? UsageText() : absl::StrCat("commands:\n", list));
    return kExitUsage;
  }
  Context probe(args, {}, "table", false, false, out, err);
  probe.command_name = absl::StrJoin(spec->words, " ");
  probe.command_usage = CommandUsage(*spec);
  std::vector<std::string> globals = GlobalFlagNames();
  for (const auto& [name, value] : args.flags) {
    bool ok = absl::c_linear_search(globals, name) || absl::c_linear_search(spec->flags, name) ||
              (name == "dry_run" && spec->mutating);
    if (!ok) return probe.UsageError(absl::StrCat("flag --", name, " does not apply here"));
  }
  std::vector<std::string> rest(pos.begin() + spec->words.size(), pos.end());
  int n = static_cast<int>(rest.size());
  if (n < spec->min_args) return probe.UsageError("missing arguments");
  if (spec->max_args >= 0 && n > spec->max_args) {
    return probe.UsageError(absl::StrCat("unexpected argument \"", rest[spec->max_args], "\""));
  }
  std::string output = args.Get("output", "table");
  if (output != "table" && output != "wide" && output != "json" && output != "yaml") {
    return probe.UsageError(
        absl::StrCat("--output must be table, wide, json or yaml, not \"", output, "\""));
  }
  ClientOptions options;
  options.controller = args.Get("controller", options.controller);
  options.actor = args.Get("actor", env_user.empty() ? "unknown" : env_user);
  if (options.actor.empty() || !PrintableAscii(options.actor)) {
    return probe.UsageError("--actor must be non-empty printable ASCII");
  }
  options.insecure_loopback = args.GetBool("insecure_loopback");
  options.tls.cert_file = args.Get("tls_cert");
  options.tls.key_file = args.Get("tls_key");
  options.tls.ca_file = args.Get("tls_ca");
  options.tls.server_name = args.Get("tls_server_name");
  if (args.Has("timeout") && (!absl::ParseDuration(args.Get("timeout"), &options.timeout) ||
                              options.timeout <= absl::ZeroDuration())) {
    return probe.UsageError(
        absl::StrCat("--timeout=", args.Get("timeout"), ": want a positive duration like 10s"));
  }
  Context ctx(args, options, output, args.GetBool("dry_run"), stdout_tty, out, err);
  ctx.command_name = probe.command_name;
  ctx.command_usage = probe.command_usage;
  return spec->run(ctx, rest);
}

}  // namespace rocetune::cli
