#ifndef ROCETUNE_AGENT_HOST_COUNTER_SOURCE_GROUP_H_
#define ROCETUNE_AGENT_HOST_COUNTER_SOURCE_GROUP_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "agent/host/counter_source.h"

namespace rocetune {

// Several CounterSources read as one (e.g. netlink hw counters + sysfs PMA
// counters + ethtool). Collect asks every member; it succeeds when at least one
// member did, and otherwise returns the first member's error. Failing members
// are logged once each.
class CounterSourceGroup : public CounterSource {
 public:
  // `name` is what name() reports (the inventory's counter_source field).
  CounterSourceGroup(std::string name, std::vector<std::unique_ptr<CounterSource>> members);

  std::string name() const override { return name_; }
  absl::Status Collect(std::vector<CounterValue>* out) override;
  // Asks each member's CollectInto, so members that fill the buffer in place
  // still do inside a group.
  absl::Status CollectInto(CounterBuffer* out) override;

 private:
  // Collect or CollectInto on every member; the same error handling for both.
  template <typename Out>
  absl::Status CollectAll(Out* out);

  std::string name_;
  std::vector<std::unique_ptr<CounterSource>> members_;
  // Per member: its failure was passed to LogOnce already (no log key or
  // error text is built for a member that fails every round).
  std::vector<bool> warned_;
};

}  // namespace rocetune

#endif  // ROCETUNE_AGENT_HOST_COUNTER_SOURCE_GROUP_H_
