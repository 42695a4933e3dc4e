#ifndef ROCETUNE_CONTROLLER_AUDIT_AUDIT_VALUES_H_
#define ROCETUNE_CONTROLLER_AUDIT_AUDIT_VALUES_H_

#include <map>
#include <string>
#include <vector>

#include "rocetune/v1/admin.pb.h"
#include "rocetune/v1/params.pb.h"

namespace rocetune::controller {

// Every value that differs between `before` and `after` for one host, per
// device: DCQCN parameters, enable masks and PFC fields ("" = not set).
// Ordered by device, then parameter name.
std::vector<v1::ValueChange> DiffParameterSets(const std::string& host_id,
                                               const v1::ParameterSet& before,
                                               const v1::ParameterSet& after);

// The parameters of `set` as flat "device/name" -> value text (the same names
// DiffParameterSets uses).
std::map<std::string, std::string> FlattenParameters(const v1::ParameterSet& set);

}  // namespace rocetune::controller

#endif  // ROCETUNE_CONTROLLER_AUDIT_AUDIT_VALUES_H_
