// policy validate|apply|show|diff|history|list, and policies.
#include "absl/algorithm/container.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "cli/commands.h"
#include "cli/output.h"
#include "controller/policy/policy_loader.h"
#include "daemon/json.h"
#include "google/protobuf/text_format.h"

namespace rocetune::cli {
namespace {

using controller::PolicyError;
using controller::PolicyFile;

std::string ShortHash(const std::string& hash) { return hash.substr(0, 12); }

// "NAME[@VERSION]" -> request.
v1::GetPolicyRequest PolicyRef(const std::string& ref) {
  v1::GetPolicyRequest req;
  size_t at = ref.rfind('@');
  req.set_name(ref.substr(0, at));
  if (at != std::string::npos) req.set_version(ref.substr(at + 1));
  return req;
}

// Parses and validates one file; problems as PolicyErrors (a parse failure
// becomes one error with rule "syntax" carrying the parser's message).
std::vector<PolicyError> CheckFile(const std::string& path, std::string* name) {
  absl::StatusOr<PolicyFile> file = PolicyFile::Load(path);
  if (!file.ok()) {
    PolicyError e;
    e.file = path;
    e.rule = file.status().code() == absl::StatusCode::kInvalidArgument ? "syntax" : "io";
    e.message = std::string(file.status().message());
    return {e};
  }
  *name = file->policy().name();
  return file->Validate();
}

// True when `line` ends in a rule tag like " [syntax]".
bool HasRuleTag(absl::string_view line) {
  if (!absl::EndsWith(line, "]")) return false;
  size_t open = line.rfind(" [");
  if (open == absl::string_view::npos) return false;
  absl::string_view tag = line.substr(open + 2, line.size() - open - 3);
  return !tag.empty() &&
         absl::c_all_of(tag, [](char c) { return absl::ascii_isalnum(c) || c == '_'; });
}

// A parse failure's message already names file:line:column, one problem per
// line, each with its rule tag (syntax, encoding); a line without one gets
// this error's.
std::string ErrorLine(const PolicyError& e) {
  if (e.rule != "syntax" && e.rule != "io") return e.ToString();
  std::vector<std::string> lines;
  for (absl::string_view line : absl::StrSplit(e.message, '\n', absl::SkipEmpty())) {
    lines.push_back(HasRuleTag(line) ? std::string(line) : absl::StrCat(line, " [", e.rule, "]"));
  }
  return absl::StrJoin(lines, "\n");
}

std::string ErrorJson(const PolicyError& e) {
  return absl::StrCat("{\"file\": ", JsonQuote(e.file), ", \"line\": ", e.line,
                      ", \"column\": ", e.column, ", \"rule\": ", JsonQuote(e.rule),
                      ", \"message\": ", JsonQuote(e.message), "}");
}

int Validate(Context& ctx, const std::vector<std::string>& files) {
  if (ctx.json() && ctx.args().Has("controller")) {
    return ctx.Error(
        "policy validate --controller prints the controller's notes as text; drop -o json");
  }
  bool all_valid = true;
  std::vector<std::string> json;
  for (const std::string& path : files) {
    std::string name;
    std::vector<PolicyError> errors = CheckFile(path, &name);
    all_valid = all_valid && errors.empty();
    if (ctx.json()) {
      std::vector<std::string> items;
      for (const PolicyError& e : errors) items.push_back(ErrorJson(e));
      json.push_back(absl::StrCat("{\"file\": ", JsonQuote(path), ", \"policy\": ", JsonQuote(name),
                                  ", \"valid\": ", errors.empty() ? "true" : "false",
                                  ", \"errors\": [", absl::StrJoin(items, ", "), "]}"));
      continue;
    }
    for (const PolicyError& e : errors) ctx.out() << ErrorLine(e) << "\n";
    if (errors.empty()) ctx.out() << path << ": ok (policy " << name << ")\n";
  }
  if (ctx.json()) ctx.PrintJsonText(absl::StrCat("[", absl::StrJoin(json, ",\n "), "]\n"));
  if (!all_valid) return kExitError;
  // --controller given: each file also against that controller's limits and
  // fleet (a dry-run apply: retention, link speeds, message size; the hosts it
  // selects and what a change could show there). Nothing is stored.
  if (!ctx.args().Has("controller")) return kExitOk;
  int rc = kExitOk;
  for (const std::string& path : files) {
    std::string text;
    if (absl::Status s = ReadFile(path, &text); !s.ok()) return ctx.Error(std::string(s.message()));
    v1::ApplyPolicyRequest req;
    req.set_text(text);
    req.set_file_name(path);
    req.set_dry_run(true);
    v1::ApplyPolicyResponse r;
    const int call = ctx.Call("ApplyPolicy", [&](grpc::ClientContext* c) {
      return ctx.client()->stub().ApplyPolicy(c, req, &r);
    });
    if (call != kExitOk) {
      rc = call;
      continue;
    }
    ctx.out() << path << ": ok against the controller";
    if (!r.created()) ctx.out() << " (identical to version " << r.version().sequence() << ")";
    ctx.out() << "\n";
    for (const std::string& note : r.notes()) ctx.out() << "  " << note << "\n";
  }
  return rc;
}

int Apply(Context& ctx, const std::vector<std::string>& args) {
  const std::string& path = args[0];
  std::string text;
  if (absl::Status s = ReadFile(path, &text); !s.ok()) return ctx.Error(std::string(s.message()));
  // Refuse locally what the controller would refuse, with positions.
  absl::StatusOr<PolicyFile> file = PolicyFile::Parse(text, path);
  if (!file.ok()) return ctx.Error(std::string(file.status().message()));
  std::vector<PolicyError> errors = file->Validate();
  if (!errors.empty()) {
    for (const PolicyError& e : errors) ctx.err() << e.ToString() << "\n";
    return ctx.Error(absl::StrCat(path, ": invalid policy, not applied"));
  }
  v1::ApplyPolicyRequest req;
  req.set_text(text);
  req.set_file_name(path);
  req.set_reason(ctx.args().Get("reason"));
  req.set_dry_run(ctx.dry_run());
  v1::ApplyPolicyResponse r;
  int rc = ctx.Call("ApplyPolicy", [&](grpc::ClientContext* c) {
    return ctx.client()->stub().ApplyPolicy(c, req, &r);
  });
  if (rc != kExitOk) return rc;
  if (ctx.json()) {
    ctx.PrintJson(r);
    return kExitOk;
  }
  const v1::PolicyVersion& v = r.version();
  std::string prefix = ctx.dry_run() ? "dry run: " : "";
  if (r.created()) {
    ctx.out() << prefix << "policy " << v.name() << ": "
              << (ctx.dry_run() ? "would create" : "created") << " version " << v.sequence() << " ("
              << v.version_hash() << ")\n";
  } else {
    ctx.out() << prefix << "policy " << v.name() << ": unchanged: identical to version "
              << v.sequence() << " (" << v.version_hash() << ")\n";
  }
  for (const std::string& note : r.notes()) ctx.out() << "  " << note << "\n";
  return kExitOk;
}

int GetPolicy(Context& ctx, const std::string& ref, v1::PolicyVersion* out) {
  v1::GetPolicyRequest req = PolicyRef(ref);
  if (req.name().empty()) return ctx.UsageError(absl::StrCat("\"", ref, "\": want NAME[@VERSION]"));
  return ctx.Call("GetPolicy", [&](grpc::ClientContext* c) {
    return ctx.client()->stub().GetPolicy(c, req, out);
  });
}

std::string VersionLine(const v1::PolicyVersion& v) {
  return absl::StrCat(v.name(), "@", v.sequence(), " (", ShortHash(v.version_hash()), ", ",
                      FormatTimestamp(v.created_unix_nanos()), ", by ", OrDash(v.created_by()),
                      ")");
}

int Show(Context& ctx, const std::vector<std::string>& args) {
  v1::PolicyVersion v;
  int rc = GetPolicy(ctx, args[0], &v);
  if (rc != kExitOk) return rc;
  if (ctx.json()) {
    ctx.PrintJson(v);
    return kExitOk;
  }
  ctx.out() << "# " << VersionLine(v) << "\n# hash " << v.version_hash() << "\n";
  std::string text = v.source_text();
  if (text.empty()) google::protobuf::TextFormat::PrintToString(v.policy(), &text);
  ctx.out() << text;
  if (!text.empty() && text.back() != '\n') ctx.out() << "\n";
  return kExitOk;
}

int Diff(Context& ctx, const std::vector<std::string>& args) {
  v1::PolicyVersion a, b;
  int rc = GetPolicy(ctx, args[0], &a);
  if (rc == kExitOk) rc = GetPolicy(ctx, args[1], &b);
  if (rc != kExitOk) return rc;
  std::vector<std::string> diff = controller::DiffPolicies(a.policy(), b.policy());
  if (ctx.json()) {
    std::vector<std::string> quoted;
    for (const std::string& d : diff) quoted.push_back(JsonQuote(d));
    ctx.PrintJsonText(absl::StrCat("{\"a\": ", MessageToJson(a, false),
                                   ",\n \"b\": ", MessageToJson(b, false), ",\n \"differences\": [",
                                   absl::StrJoin(quoted, ", "), "]}\n"));
    return kExitOk;
  }
  ctx.out() << "--- " << VersionLine(a) << "\n+++ " << VersionLine(b) << "\n";
  if (diff.empty()) ctx.out() << "no differences\n";
  for (const std::string& d : diff) ctx.out() << "  " << d << "\n";
  return kExitOk;
}

// diff -f FILE: the file against the latest stored version of the policy it
// names, what `apply -f FILE` would change. Exit 0 whether or not they
// differ (the output says which); 1 when the file is invalid or the call fails.
int DiffFile(Context& ctx, const std::vector<std::string>&) {
  if (!ctx.args().Has("filename")) return ctx.UsageError("-f FILE is required");
  const std::string path = ctx.args().Get("filename");
  std::string text;
  if (absl::Status s = ReadFile(path, &text); !s.ok()) return ctx.Error(std::string(s.message()));
  absl::StatusOr<PolicyFile> file = PolicyFile::Parse(text, path);
  if (!file.ok()) return ctx.Error(std::string(file.status().message()));
  if (std::vector<PolicyError> errors = file->Validate(); !errors.empty()) {
    for (const PolicyError& e : errors) ctx.err() << e.ToString() << "\n";
    return ctx.Error(absl::StrCat(path, ": invalid policy (apply would refuse it)"));
  }
  const std::string& name = file->policy().name();
  Client* client = ctx.client();
  if (client == nullptr) return kExitUsage;
  v1::GetPolicyRequest req;
  req.set_name(name);
  v1::PolicyVersion stored;
  std::unique_ptr<grpc::ClientContext> call = client->NewContext();
  grpc::Status st = client->stub().GetPolicy(call.get(), req, &stored);
  const bool is_new = st.error_code() == grpc::StatusCode::NOT_FOUND;
  if (!st.ok() && !is_new) {
    return ctx.Error(absl::StrCat("GetPolicy (controller ", ctx.options().controller, "): ",
                                  StatusCodeName(st.error_code()), ": ", st.error_message()));
  }
  std::vector<std::string> diff;
  if (!is_new) diff = controller::DiffPolicies(stored.policy(), file->policy());
  if (ctx.json()) {
    std::vector<std::string> quoted;
    for (const std::string& d : diff) quoted.push_back(JsonQuote(d));
    ctx.PrintJsonText(absl::StrCat("{\"file\": ", JsonQuote(path),
                                   ", \"policy\": ", JsonQuote(name),
                                   ", \"stored\": ", is_new ? "null" : MessageToJson(stored, false),
                                   ",\n \"differences\": [", absl::StrJoin(quoted, ", "), "]}\n"));
    return kExitOk;
  }
  if (is_new) {
    ctx.out() << "policy " << name << " is not stored: apply -f " << path
              << " would create version 1\n";
    return kExitOk;
  }
  ctx.out() << "--- " << VersionLine(stored) << "\n+++ " << path << "\n";
  if (diff.empty()) ctx.out() << "no differences\n";
  for (const std::string& d : diff) ctx.out() << "  " << d << "\n";
  return kExitOk;
}

int ApplyFile(Context& ctx, const std::vector<std::string>&) {
  if (!ctx.args().Has("filename")) return ctx.UsageError("-f FILE is required");
  return Apply(ctx, {ctx.args().Get("filename")});
}

int ListVersions(Context& ctx, const std::string& name) {
  v1::ListPoliciesRequest req;
  req.set_name(name);
  v1::ListPoliciesResponse r;
  int rc = ctx.Call("ListPolicies", [&](grpc::ClientContext* c) {
    return ctx.client()->stub().ListPolicies(c, req, &r);
  });
  if (rc != kExitOk) return rc;
  if (ctx.json()) {
    ctx.PrintJson(r);
    return kExitOk;
  }
  if (r.policies_size() == 0) {
    ctx.out() << (name.empty() ? "no policies\n" : absl::StrCat("no versions of ", name, "\n"));
    return kExitOk;
  }
  Table t({"NAME", "VERSION", "HASH", "CREATED", "BY", "DESCRIPTION"});
  for (const auto& v : r.policies()) {
    t.AddRow({v.name(), absl::StrCat(v.sequence()), ShortHash(v.version_hash()),
              FormatTimestamp(v.created_unix_nanos()), OrDash(v.created_by()),
              v.policy().description()});
  }
  ctx.out() << t.Render();
  return kExitOk;
}

int History(Context& ctx, const std::vector<std::string>& args) {
  return ListVersions(ctx, args[0]);
}
int List(Context& ctx, const std::vector<std::string>&) { return ListVersions(ctx, ""); }

}  // namespace

std::vector<CommandSpec> PolicyCommands() {
  return {
      {{"policy", "validate"},
       "FILE...",
       "check policy files offline: file:line:column: message [rule]; exit 1 when invalid; with "
       "--controller also against that controller (dry-run apply: its limits, the hosts "
       "selected, what a change could show)",
       {},
       false,
       1,
       -1,
       false,
       Validate},
      {{"policy", "apply"},
       "FILE",
       "store a new policy version (identical content: unchanged)",
       {"reason"},
       true,
       1,
       1,
       false,
       Apply},
      {{"policy", "show"},
       "NAME[@VERSION]",
       "one policy version (latest by default)",
       {},
       false,
       1,
       1,
       false,
       Show},
      {{"policy", "diff"},
       "NAME@A NAME@B",
       "field-by-field differences of two versions",
       {},
       false,
       2,
       2,
       false,
       Diff},
      {{"policy", "history"}, "NAME", "every version of a policy", {}, false, 1, 1, false, History},
      {{"policy", "list"}, "", "every policy's latest version", {}, false, 0, 0, false, List},
      {{"policies"}, "", "same as policy list", {}, false, 0, 0, true, List},
      {{"apply"},
       "-f FILE",
       "same as policy apply FILE",
       {"filename", "reason"},
       true,
       0,
       0,
       false,
       ApplyFile},
      {{"diff"},
       "-f FILE",
       "a policy file against its latest stored version: what apply -f would change",
       {"filename"},
       false,
       0,
       0,
       false,
       DiffFile},
  };
}

}  // namespace rocetune::cli
