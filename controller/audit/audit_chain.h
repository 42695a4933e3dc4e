#ifndef ROCETUNE_CONTROLLER_AUDIT_AUDIT_CHAIN_H_
#define ROCETUNE_CONTROLLER_AUDIT_AUDIT_CHAIN_H_

#include <cstdint>
#include <functional>
#include <string>

#include "rocetune/v1/admin.pb.h"

namespace rocetune::controller {

// The audit log's hash chain. Each row's hash is hex SHA-256 (64 lowercase
// digits) over the row's canonical bytes: every field but `hash`, id and
// prev_hash included, in a fixed order, each length-prefixed so that no
// content can move across a field boundary. Editing, deleting or reordering a
// row therefore breaks the chain.
std::string AuditRowHash(const v1::AuditEntry& entry);

// The canonical bytes AuditRowHash digests (exposed for tests and tools):
// a format tag, then the fields id, unix_nanos, actor, action, subject,
// detail, reason, authenticated, change_id, host_ids, values, prev_hash.
// Integers are 8 bytes big-endian; strings are an 8-byte big-endian length
// then the bytes; lists are a count then their elements; a ValueChange is its
// five strings in field order.
std::string AuditRowCanonicalBytes(const v1::AuditEntry& entry);

// Checks rows fed in ascending id order and reports the first problem:
//  - a row whose stored hash differs from AuditRowHash (modified);
//  - ids missing between two rows or after the last row (deleted);
//  - a prev_hash other than the previous row's hash ("" for the first row):
//    a deleted, modified or reordered row.
// first_bad_id is the first row that fails a check, or the first missing id
// when rows were deleted.
class AuditChainVerifier {
 public:
  // Returns the id of the row whose stored hash is `hash`, 0 when none; only
  // used to explain a broken link (reordered vs deleted). May be empty.
  using HashLookup = std::function<int64_t(const std::string& hash)>;

  explicit AuditChainVerifier(HashLookup lookup = nullptr);

  // Feeds the next row. Rows after the first problem are counted, not checked.
  void Add(const v1::AuditEntry& row);
  // A row whose stored fields cannot be decoded (`why` says which).
  void AddUnreadable(int64_t id, const std::string& why);
  // Ends the walk. `highest_assigned_id` is the largest id the log ever handed
  // out (0 = unknown); above the last row it means trailing rows were deleted.
  void Finish(int64_t highest_assigned_id);

  // ok, rows, first_bad_id and problem (ok is meaningful after Finish).
  const v1::VerifyAuditResponse& result() const { return result_; }

 private:
  void Fail(int64_t id, std::string problem);

  HashLookup lookup_;
  v1::VerifyAuditResponse result_;
  bool failed_ = false;
  int64_t last_id_ = 0;
  std::string last_hash_;
};

}  // namespace rocetune::controller

#endif  // ROCETUNE_CONTROLLER_AUDIT_AUDIT_CHAIN_H_
