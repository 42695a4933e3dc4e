#ifndef ROCETUNE_CLI_OUTPUT_H_
#define ROCETUNE_CLI_OUTPUT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "google/protobuf/map.h"
#include "google/protobuf/message.h"

namespace rocetune::cli {

// An aligned text table: every column as wide as its widest cell (counted in
// UTF-8 code points), columns separated by two spaces, no trailing blanks.
class Table {
 public:
  explicit Table(std::vector<std::string> header);
  // Short rows are padded with empty cells; REQUIRES: cells.size() <= columns.
  void AddRow(std::vector<std::string> cells);
  // A free line printed after the last added row, outside the columns (it
  // does not widen them).
  void AddNote(std::string line);
  size_t rows() const { return rows_.size(); }
  // Header line, then one line per row, each ending in '\n'.
  std::string Render() const;

 private:
  std::vector<std::string> header_;
  std::vector<std::vector<std::string>> rows_;
  std::vector<std::pair<size_t, std::string>> notes_;  // (rows before it, text)
};

// Display width of UTF-8 text: code points, not bytes.
size_t DisplayWidth(absl::string_view text);

// A message as JSON with the .proto field names. `multiline` pretty-prints;
// otherwise the result is one line (for streams of events).
std::string MessageToJson(const google::protobuf::Message& message, bool multiline = true);

// A JSON document (as MessageToJson prints) as YAML: mappings with keys in
// sorted order, strings double-quoted where plain YAML would read them as
// something else, numbers as the shortest text that reads back the same.
// kInvalidArgument when `json` is not JSON.
absl::StatusOr<std::string> JsonToYaml(const std::string& json);

// "2024-05-01 12:00:03Z" (UTC); "-" for 0.
std::string FormatTimestamp(int64_t unix_nanos);
// "3.2s ago", "just now", "-" for 0.
std::string FormatAgo(int64_t unix_nanos, absl::Time now);
// A latency in seconds with three significant digits and a unit: "850ns",
// "12.3us", "4.56ms", "1.20s"; "-" for 0 and for non-finite values.
std::string FormatSeconds(double seconds);
// %.3g; "-" for non-finite values.
std::string FormatNumber(double value);
// "" -> "-".
std::string OrDash(const std::string& s);
// "k1=v1,k2=v2" sorted by key; "-" when empty.
std::string FormatLabels(const google::protobuf::Map<std::string, std::string>& labels);
// "k1=v1 k2=v2" sorted by key; "-" when empty.
std::string FormatKnobs(const google::protobuf::Map<std::string, int64_t>& knobs);

}  // namespace rocetune::cli

#endif  // ROCETUNE_CLI_OUTPUT_H_
