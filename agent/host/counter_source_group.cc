#include "agent/host/counter_source_group.h"

#include <type_traits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "daemon/logging.h"

namespace rocetune {

CounterSourceGroup::CounterSourceGroup(std::string name,
                                       std::vector<std::unique_ptr<CounterSource>> members)
    : name_(std::move(name)), members_(std::move(members)), warned_(members_.size(), false) {}

absl::Status CounterSourceGroup::Collect(std::vector<CounterValue>* out) { return CollectAll(out); }

absl::Status CounterSourceGroup::CollectInto(CounterBuffer* out) { return CollectAll(out); }

template <typename Out>
absl::Status CounterSourceGroup::CollectAll(Out* out) {
  absl::Status first_error;
  bool any_ok = members_.empty();
  for (size_t i = 0; i < members_.size(); ++i) {
    CounterSource* m = members_[i].get();
    absl::Status s;
    if constexpr (std::is_same_v<Out, CounterBuffer>) {
      s = m->CollectInto(out);
    } else {
      s = m->Collect(out);
    }
    if (s.ok()) {
      any_ok = true;
      continue;
    }
    if (first_error.ok()) first_error = s;
    if (warned_[i]) continue;
    warned_[i] = true;
    LogOnce(absl::StrCat("counter_member_failed:", name_, ":", m->name()), LogLevel::kWarning,
            "counter source member failed", {{"source", m->name()}, {"error", s.ToString()}});
  }
  return any_ok ? absl::OkStatus() : first_error;
}

}  // namespace rocetune
