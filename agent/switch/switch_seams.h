#ifndef ROCETUNE_AGENT_SWITCH_SWITCH_SEAMS_H_
#define ROCETUNE_AGENT_SWITCH_SWITCH_SEAMS_H_

#include "absl/strings/string_view.h"
#include "agent/agent.h"
#include "agent/host/counter_source.h"
#include "agent/switch/switch_applier.h"
#include "agent/switch/switch_discovery.h"

namespace rocetune {

// The agent seams of a switch (a SONiC one, a simulated ToR): its discovery,
// counters and applier (none owned), the real clock, and the Hello
// capabilities "switch.<platform>", "wred_ecn" and "pfc_enable".
HostSeams SwitchSeams(absl::string_view platform, SwitchDiscovery* discovery,
                      CounterSource* counters, SwitchApplier* applier);

}  // namespace rocetune

#endif  // ROCETUNE_AGENT_SWITCH_SWITCH_SEAMS_H_
