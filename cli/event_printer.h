#ifndef ROCETUNE_CLI_EVENT_PRINTER_H_
#define ROCETUNE_CLI_EVENT_PRINTER_H_

#include <ostream>
#include <string>

#include "rocetune/v1/admin.pb.h"

namespace rocetune::cli {

// Writes watch events. JSON: one event per line. YAML: one document per
// event, each starting with "---". Text: one line per event,
// except that on a terminal "change" events rewrite a single progress line in
// place (\r ... erase to end of line) until another event or EndProgress().
class EventPrinter {
 public:
  enum class Format { kText, kJson, kYaml };
  EventPrinter(std::ostream& out, Format format, bool tty)
      : out_(out), format_(format), tty_(tty) {}

  void Print(const v1::Event& event);
  // Ends an in-place progress line so that later output starts on a new line.
  void EndProgress();

  // "12:00:03.250  c-7  CANARY  stage 0  bake ▕██████      ▏ 52%"
  static std::string ProgressLine(const v1::Event& event);

 private:
  std::ostream& out_;
  Format format_;
  bool tty_;
  bool progress_shown_ = false;
};

}  // namespace rocetune::cli

#endif  // ROCETUNE_CLI_EVENT_PRINTER_H_
