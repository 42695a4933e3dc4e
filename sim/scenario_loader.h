#ifndef ROCETUNE_SIM_SCENARIO_LOADER_H_
#define ROCETUNE_SIM_SCENARIO_LOADER_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "google/protobuf/message.h"
#include "rocetune/v1/scenario.pb.h"

namespace rocetune::sim {

// Applies one "path=value" override to `msg` through protobuf reflection. The
// path is dot-separated field names; a repeated message field takes an index
// ("workload.incast[0].bytes_per_sender=65536"), and the index may equal the
// current size to append an element. The target must be a scalar, enum (by
// name or number) or bool ("true"/"false"/"1"/"0") field. kInvalidArgument
// names the path and the reason; `msg` is unchanged on error.
absl::Status ApplyOverride(const std::string& spec, google::protobuf::Message* msg);

// Reads a text-format scenario (errors carry file, line and column), then
// applies `overrides` in order.
absl::StatusOr<v1::Scenario> LoadScenario(const std::string& path,
                                          const std::vector<std::string>& overrides);

}  // namespace rocetune::sim

#endif  // ROCETUNE_SIM_SCENARIO_LOADER_H_
