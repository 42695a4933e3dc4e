// The policy parser and validator on arbitrary text.
#include <cstddef>
#include <cstdint>
#include <string>

#include "controller/policy/policy_loader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<rocetune::controller::PolicyFile> f =
      rocetune::controller::PolicyFile::Parse(text, "fuzz.textproto");
  if (f.ok()) (void)f->Validate();
  return 0;
}
