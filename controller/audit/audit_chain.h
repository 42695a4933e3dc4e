#ifndef ROCETUNE_CONTROLLER_AUDIT_AUDIT_CHAIN_H_
#define ROCETUNE_CONTROLLER_AUDIT_AUDIT_CHAIN_H_

#include <string>

#include "rocetune/v1/admin.pb.h"

namespace rocetune::controller {

// The audit log's hash chain. Each row's hash is hex SHA-256 over
// prev_hash and the row's canonical bytes (every field but `hash`, in a fixed
// order), so editing, deleting or reordering a row breaks the chain.
std::string AuditRowHash(const v1::AuditEntry& entry);

}  // namespace rocetune::controller

#endif  // ROCETUNE_CONTROLLER_AUDIT_AUDIT_CHAIN_H_
