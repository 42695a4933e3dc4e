// The daemons' config files (text-format AgentConfig / ControllerConfig) and
// the controller's roles file, on arbitrary text.
#include <cstddef>
#include <cstdint>
#include <string>

#include "daemon/init.h"
#include "rocetune/v1/config.pb.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  rocetune::v1::AgentConfig agent;
  (void)rocetune::ParseTextProto(text, "agent.textproto", &agent);
  rocetune::v1::ControllerConfig controller;
  (void)rocetune::ParseTextProto(text, "controller.textproto", &controller);
  rocetune::v1::RolesConfig roles;
  (void)rocetune::ParseTextProto(text, "roles.textproto", &roles);
  std::vector<std::pair<std::string, std::string>> labels;
  (void)rocetune::ParseLabels(text, &labels);
  return 0;
}
