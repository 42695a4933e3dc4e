#include "cli/event_printer.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"
#include "cli/histogram.h"
#include "cli/output.h"

namespace rocetune::cli {
namespace {

std::string EventTime(const v1::Event& e) {
  return absl::FormatTime("%H:%M:%E3S", absl::FromUnixNanos(e.unix_nanos()), absl::UTCTimeZone());
}

// "CANARY", "STAGE 2".
std::string StateText(const v1::Event& e) {
  std::string s = v1::ChangeState_Name(e.state());
  if (e.state() == v1::STAGE) absl::StrAppend(&s, " ", e.stage());
  return s;
}

}  // namespace

void EventPrinter::Print(const v1::Event& e) {
  if (format_ == Format::kJson) {
    out_ << MessageToJson(e, /*multiline=*/false) << "\n" << std::flush;
    return;
  }
  if (format_ == Format::kYaml) {
    absl::StatusOr<std::string> yaml = JsonToYaml(MessageToJson(e, /*multiline=*/false));
    out_ << "---\n" << (yaml.ok() ? *yaml : MessageToJson(e, true)) << std::flush;
    return;
  }
  if (e.kind() == "change" && tty_) {
    out_ << "\r" << ProgressLine(e) << "\x1b[K" << std::flush;
    progress_shown_ = true;
    return;
  }
  EndProgress();
  out_ << EventTime(e) << "  " << e.kind() << "  " << OrDash(e.subject());
  if (!e.change_id().empty()) out_ << "  " << e.change_id() << " " << StateText(e);
  if (!e.detail().empty()) out_ << "  " << e.detail();
  out_ << "\n" << std::flush;
}

void EventPrinter::EndProgress() {
  if (progress_shown_) out_ << "\n" << std::flush;
  progress_shown_ = false;
}

std::string EventPrinter::ProgressLine(const v1::Event& e) {
  double p = std::isfinite(e.progress()) ? std::clamp(e.progress(), 0.0, 1.0) : 0.0;
  std::string line = absl::StrCat(EventTime(e), "  ", OrDash(e.change_id()), "  ", StateText(e));
  if (!e.detail().empty()) absl::StrAppend(&line, "  ", e.detail());
  absl::StrAppend(&line, "  bake ▕", Bar(p, 20), "▏", absl::StrFormat("%3.0f%%", 100 * p));
  return line;
}

}  // namespace rocetune::cli
