#include "cli/event_printer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sstream>

namespace rocetune::cli {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

v1::Event ChangeEvent(double progress) {
  v1::Event e;
  e.set_kind("change");
  e.set_change_id("c-7");
  e.set_state(v1::CANARY);
  e.set_detail("stage 0");
  e.set_progress(progress);
  return e;
}

v1::Event HostEvent() {
  v1::Event e;
  e.set_kind("nack");
  e.set_subject("h2");
  e.set_detail("dce_tcp_g out of range");
  return e;
}

TEST(EventPrinterTest, ProgressLineRewritesInPlaceOnATerminal) {
  std::ostringstream out;
  EventPrinter p(out, EventPrinter::Format::kText, /*tty=*/true);
  p.Print(ChangeEvent(0.25));
  p.Print(ChangeEvent(0.5));
  std::string s = out.str();
  EXPECT_EQ(s.find('\n'), std::string::npos) << s;  // still one line
  EXPECT_EQ(std::count(s.begin(), s.end(), '\r'), 2);
  EXPECT_THAT(s, HasSubstr("\x1b[K"));
  EXPECT_THAT(s, HasSubstr(" 50%"));
  // Another event starts on a new line after the progress line.
  p.Print(HostEvent());
  s = out.str();
  size_t nack = s.find("nack");
  ASSERT_NE(nack, std::string::npos);
  EXPECT_EQ(s[s.rfind('\n', nack)], '\n');
  EXPECT_GT(s.rfind('\n', nack), s.rfind('\r'));
}

TEST(EventPrinterTest, ProgressLineShowsChangeStateStageAndBar) {
  std::string line = EventPrinter::ProgressLine(ChangeEvent(0.5));
  EXPECT_THAT(line, HasSubstr("c-7"));
  EXPECT_THAT(line, HasSubstr("CANARY"));
  EXPECT_THAT(line, HasSubstr("stage 0"));
  EXPECT_THAT(line, HasSubstr("██████████          ▏ 50%"));
  EXPECT_THAT(EventPrinter::ProgressLine(ChangeEvent(7)), HasSubstr("100%"));
  EXPECT_THAT(EventPrinter::ProgressLine(ChangeEvent(std::nan(""))), HasSubstr("  0%"));
}

TEST(EventPrinterTest, NotATerminalPrintsPlainLines) {
  std::ostringstream out;
  EventPrinter p(out, EventPrinter::Format::kText, /*tty=*/false);
  p.Print(ChangeEvent(0.5));
  p.Print(HostEvent());
  std::string s = out.str();
  EXPECT_THAT(s, Not(HasSubstr("\r")));
  EXPECT_EQ(std::count(s.begin(), s.end(), '\n'), 2);
  EXPECT_THAT(s, HasSubstr("c-7 CANARY"));
}

TEST(EventPrinterTest, JsonIsOneEventPerLine) {
  std::ostringstream out;
  EventPrinter p(out, EventPrinter::Format::kJson, /*tty=*/true);
  p.Print(ChangeEvent(0.5));
  p.Print(HostEvent());
  std::string s = out.str();
  EXPECT_EQ(std::count(s.begin(), s.end(), '\n'), 2);
  EXPECT_THAT(s, StartsWith("{\"kind\":\"change\""));
  EXPECT_THAT(s, HasSubstr("}\n{\"kind\":\"nack\""));
}

TEST(EventPrinterTest, AChangeEventNamesItsStage) {
  std::ostringstream out;
  EventPrinter p(out, EventPrinter::Format::kText, /*tty=*/false);
  v1::Event e = ChangeEvent(0.5);
  e.set_state(v1::STAGE);
  e.set_stage(2);
  p.Print(e);
  EXPECT_THAT(out.str(), HasSubstr("c-7 STAGE 2"));
  EXPECT_THAT(EventPrinter::ProgressLine(e), HasSubstr("c-7  STAGE 2"));
}

TEST(EventPrinterTest, YamlIsOneDocumentPerEvent) {
  std::ostringstream out;
  EventPrinter p(out, EventPrinter::Format::kYaml, /*tty=*/true);
  p.Print(ChangeEvent(0.5));
  p.Print(HostEvent());
  std::string s = out.str();
  EXPECT_THAT(s, StartsWith("---\n"));
  EXPECT_THAT(s, HasSubstr("\n---\n"));
  EXPECT_THAT(s, HasSubstr("kind: change\n"));
  EXPECT_THAT(s, HasSubstr("kind: nack\n"));
}

}  // namespace
}  // namespace rocetune::cli
