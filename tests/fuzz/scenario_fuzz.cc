// The simulator's scenario loader: text-format Scenario plus one --set
// override (the input's last line).
#include <cstddef>
#include <cstdint>
#include <string>

#include "sim/scenario_loader.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  std::string override_spec;
  if (size_t nl = text.rfind('\n'); nl != std::string::npos) {
    override_spec = text.substr(nl + 1);
  }
  rocetune::fuzz::MemFile f(data, size);
  absl::StatusOr<rocetune::v1::Scenario> s = rocetune::sim::LoadScenario(f.path(), {});
  if (s.ok() && !override_spec.empty()) {
    (void)rocetune::sim::ApplyOverride(override_spec, &*s);
  }
  return 0;
}
