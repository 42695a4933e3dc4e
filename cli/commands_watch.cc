// watch: the controller's event stream, reconnecting across controller restarts.
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "cli/commands.h"
#include "cli/histogram.h"
#include "cli/output.h"

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

std::string EventTime(const v1::Event& e) {
  return absl::FormatTime("%H:%M:%E3S", absl::FromUnixNanos(e.unix_nanos()), absl::UTCTimeZone());
}

// Writes events; change events on a terminal update one progress line in place.
class EventPrinter {
 public:
  EventPrinter(std::ostream& out, bool json, bool tty) : out_(out), json_(json), tty_(tty) {}

  void Print(const v1::Event& e) {
    if (json_) {
      out_ << MessageToJson(e, /*multiline=*/false) << "\n" << std::flush;
      return;
    }
    if (e.kind() == "change" && tty_) {
      out_ << "\r" << ProgressLine(e) << "\x1b[K" << std::flush;
      progress_shown_ = true;
      return;
    }
    EndProgress();
    out_ << EventTime(e) << "  " << e.kind() << "  " << OrDash(e.subject()) << "  " << e.detail();
    if (!e.change_id().empty()) out_ << "  [" << e.change_id() << "]";
    out_ << "\n" << std::flush;
  }

  // Ends an in-place progress line so the next output starts on a fresh line.
  void EndProgress() {
    if (progress_shown_) out_ << "\n";
    progress_shown_ = false;
  }

  static std::string ProgressLine(const v1::Event& e) {
    double p = std::isfinite(e.progress()) ? std::clamp(e.progress(), 0.0, 1.0) : 0.0;
    return absl::StrCat(EventTime(e), "  ", OrDash(e.change_id()), "  ",
                        v1::ChangeState_Name(e.state()), "  ", e.detail(), "  bake ▕", Bar(p, 20),
                        "▏", absl::StrFormat("%3.0f%%", 100 * p));
  }

 private:
  std::ostream& out_;
  bool json_;
  bool tty_;
  bool progress_shown_ = false;
};

int Watch(Context& ctx, const std::vector<std::string>&) {
  Client* client = ctx.client();
  if (client == nullptr) return kExitUsage;
  EventPrinter printer(ctx.out(), ctx.json(), ctx.stdout_tty());
  const absl::Duration kMaxBackoff = absl::Seconds(10);
  absl::Duration backoff = absl::Milliseconds(250);
  while (true) {
    std::unique_ptr<grpc::ClientContext> call = client->NewContext(absl::InfiniteDuration());
    std::unique_ptr<grpc::ClientReader<v1::Event>> reader =
        client->stub().Watch(call.get(), v1::WatchRequest());
    v1::Event e;
    while (reader->Read(&e)) {
      backoff = absl::Milliseconds(250);
      printer.Print(e);
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
