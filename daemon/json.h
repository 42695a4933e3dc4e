#ifndef ROCETUNE_DAEMON_JSON_H_
#define ROCETUNE_DAEMON_JSON_H_

#include <string>

#include "absl/strings/string_view.h"

namespace rocetune {

// `s` as a JSON string literal, quotes included: ", \ and control characters
// escaped. Bytes >= 0x80 pass through (UTF-8 stays UTF-8).
std::string JsonQuote(absl::string_view s);

}  // namespace rocetune

#endif  // ROCETUNE_DAEMON_JSON_H_
