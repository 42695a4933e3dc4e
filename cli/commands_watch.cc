// watch: the controller's event stream, reconnecting across controller restarts.
#include "absl/strings/str_cat.h"
#include "cli/commands.h"
#include "cli/event_printer.h"

namespace rocetune::cli {
namespace {

// Codes after which another attempt can succeed (the controller restarting,
// the connection dropping); any other code ends the watch.
bool Retryable(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::OK:
    case grpc::StatusCode::UNAVAILABLE:
    case grpc::StatusCode::CANCELLED:
    case grpc::StatusCode::UNKNOWN:
    case grpc::StatusCode::INTERNAL:
    case grpc::StatusCode::ABORTED:
    case grpc::StatusCode::DEADLINE_EXCEEDED:
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
      return true;
    default:
      return false;
  }
}

int Watch(Context& ctx, const std::vector<std::string>&) {
  Client* client = ctx.client();
  if (client == nullptr) return kExitUsage;
  EventPrinter printer(ctx.out(),
                       ctx.yaml()   ? EventPrinter::Format::kYaml
                       : ctx.json() ? EventPrinter::Format::kJson
                                    : EventPrinter::Format::kText,
                       ctx.stdout_tty());
  const absl::Duration kMaxBackoff = absl::Seconds(10);
  absl::Duration backoff = absl::Milliseconds(250);
  // The last event seen: a reconnect resumes after it, so the controller
  // replays what happened meanwhile (or says what it no longer holds).
  v1::WatchRequest resume;
  while (true) {
    std::unique_ptr<grpc::ClientContext> call = client->NewContext(absl::InfiniteDuration());
    std::unique_ptr<grpc::ClientReader<v1::Event>> reader =
        client->stub().Watch(call.get(), resume);
    v1::Event e;
    while (reader->Read(&e)) {
      backoff = absl::Milliseconds(250);
      printer.Print(e);
      if (e.seq() > 0) {
        resume.set_after_boot_unix_nanos(e.boot_unix_nanos());
        resume.set_after_seq(e.seq());
      }
    }
    grpc::Status s = reader->Finish();
    printer.EndProgress();
    if (!Retryable(s.error_code())) {
      return ctx.Error(absl::StrCat("Watch (controller ", ctx.options().controller, "): ",
                                    StatusCodeName(s.error_code()), ": ", s.error_message()));
    }
    ctx.err() << "rocetunectl: watch: "
              << (s.ok() ? std::string("stream ended")
                         : absl::StrCat(StatusCodeName(s.error_code()), ": ", s.error_message()))
              << "; reconnecting in " << absl::FormatDuration(backoff) << "\n"
              << std::flush;
    absl::SleepFor(backoff);
    backoff = std::min(backoff * 2, kMaxBackoff);
  }
}

}  // namespace

std::vector<CommandSpec> WatchCommands() {
  return {
      {{"watch"},
       "",
       "stream controller events (reconnects; Ctrl-C ends)",
       {},
       false,
       0,
       0,
       false,
       Watch},
  };
}

}  // namespace rocetune::cli
