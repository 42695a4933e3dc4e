#ifndef ROCETUNE_TESTS_CONTROLLER_POLICY_POLICY_TEST_UTIL_H_
#define ROCETUNE_TESTS_CONTROLLER_POLICY_POLICY_TEST_UTIL_H_

#include <string>
#include <utility>

#include "absl/strings/string_view.h"

namespace rocetune::controller::testing {

// 1-based (line, column) of the `occurrence`-th (1 = first) occurrence of
// `snippet` in `text`; (0, 0) when absent. Tests use it to say where an error
// must point without counting lines by hand.
inline std::pair<int, int> Pos(absl::string_view text, absl::string_view snippet,
                               int occurrence = 1) {
  size_t at = absl::string_view::npos;
  for (size_t from = 0; occurrence > 0; --occurrence, from = at + 1) {
    at = text.find(snippet, from);
    if (at == absl::string_view::npos) return {0, 0};
  }
  int line = 1;
  size_t line_start = 0;
  for (size_t i = 0; i < at; ++i) {
    if (text[i] == '\n') {
      ++line;
      line_start = i + 1;
    }
  }
  return {line, static_cast<int>(at - line_start) + 1};
}

// A policy that passes validation; tests edit it to break one rule at a time.
inline constexpr char kValidPolicy[] = R"policy(# a minimal valid policy
name: "base"
objective { metric: PROBE_RTT_P99 }
knobs { parameter: "rpg_ai_rate" min: 1 max: 100 step: 5 }
knobs { parameter: "rpg_time_reset" min: 50 max: 1000 step: 25 }
tuner { kind: COORDINATE_DESCENT }
rollout { canary_fraction: 0.25 bake_seconds: 300 stages: [0.5, 1.0] }
guard { max_p99_regression: 0.05 }
)policy";

}  // namespace rocetune::controller::testing

#endif  // ROCETUNE_TESTS_CONTROLLER_POLICY_POLICY_TEST_UTIL_H_
