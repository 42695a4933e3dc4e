#include "agent/switch/switch_seams.h"

#include "absl/strings/str_cat.h"
#include "daemon/clock.h"

namespace rocetune {

HostSeams SwitchSeams(absl::string_view platform, SwitchDiscovery* discovery,
                      CounterSource* counters, SwitchApplier* applier) {
  HostSeams s;
  s.discovery = discovery;
  s.counters = counters;
  s.applier = applier;
  s.clock = Clock::Real();
  s.capabilities = {absl::StrCat("switch.", platform), "wred_ecn", "pfc_enable"};
  return s;
}

}  // namespace rocetune
