#include "controller/audit/audit_chain.h"

#include <openssl/evp.h>

#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace rocetune::controller {
namespace {

// Bumped if the canonical encoding ever changes (old rows keep verifying only
// if the verifier knows their tag; there is one format so far).
constexpr char kFormatTag[] = "rocetune.audit.v1";

void PutU64(std::string* out, uint64_t v) {
  for (int shift = 56; shift >= 0; shift -= 8)
    out->push_back(static_cast<char>((v >> shift) & 0xff));
}

void PutString(std::string* out, const std::string& s) {
  PutU64(out, s.size());
  out->append(s);
}

// Hashes in messages: enough digits to tell rows apart.
std::string Short(const std::string& hash) {
  if (hash.empty()) return "\"\"";
  return hash.size() > 16 ? absl::StrCat(hash.substr(0, 16), "...") : hash;
}

}  // namespace

std::string AuditRowCanonicalBytes(const v1::AuditEntry& e) {
  std::string out;
  PutString(&out, kFormatTag);
  PutU64(&out, static_cast<uint64_t>(e.id()));
  PutU64(&out, static_cast<uint64_t>(e.unix_nanos()));
  PutString(&out, e.actor());
  PutString(&out, e.action());
  PutString(&out, e.subject());
  PutString(&out, e.detail());
  PutString(&out, e.reason());
  PutU64(&out, e.authenticated() ? 1 : 0);
  PutString(&out, e.change_id());
  PutU64(&out, static_cast<uint64_t>(e.host_ids_size()));
  for (const std::string& h : e.host_ids()) PutString(&out, h);
  PutU64(&out, static_cast<uint64_t>(e.values_size()));
  for (const v1::ValueChange& v : e.values()) {
    PutString(&out, v.host_id());
    PutString(&out, v.device());
    PutString(&out, v.parameter());
    PutString(&out, v.old_value());
    PutString(&out, v.new_value());
  }
  PutString(&out, e.prev_hash());
  return out;
}

std::string AuditRowHash(const v1::AuditEntry& entry) {
  std::string bytes = AuditRowCanonicalBytes(entry);
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  // EVP_Digest with SHA-256 only fails on allocation failure inside OpenSSL;
  // an empty result then never matches a stored hash.
  if (EVP_Digest(bytes.data(), bytes.size(), digest, &len, EVP_sha256(), nullptr) != 1) return "";
  return absl::BytesToHexString(
      absl::string_view(reinterpret_cast<const char*>(digest), static_cast<size_t>(len)));
}

AuditChainVerifier::AuditChainVerifier(HashLookup lookup) : lookup_(std::move(lookup)) {}

void AuditChainVerifier::Fail(int64_t id, std::string problem) {
  failed_ = true;
  result_.set_ok(false);
  result_.set_first_bad_id(id);
  result_.set_problem(std::move(problem));
}

void AuditChainVerifier::AddUnreadable(int64_t id, const std::string& why) {
  result_.set_rows(result_.rows() + 1);
  if (failed_) return;
  Fail(id, absl::StrCat("row ", id, " cannot be decoded (", why, "): it was modified"));
}

void AuditChainVerifier::Add(const v1::AuditEntry& row) {
  result_.set_rows(result_.rows() + 1);
  if (failed_) return;
  const int64_t id = row.id();
  const bool first = result_.rows() == 1;
  if (!first && id <= last_id_) {
    Fail(id, absl::StrCat("row ", id, " comes after row ", last_id_, ": ids out of order"));
    return;
  }
  if (!first && id != last_id_ + 1) {
    std::string missing = id == last_id_ + 2
                              ? absl::StrCat("row ", last_id_ + 1, " is")
                              : absl::StrCat("rows ", last_id_ + 1, "..", id - 1, " are");
    Fail(last_id_ + 1,
         absl::StrCat(
             missing, " missing (deleted): row ", id, " follows row ", last_id_,
             row.prev_hash() == last_hash_ ? " and its prev_hash was rewritten to match" : ""));
    return;
  }
  const std::string& expected_prev = first ? std::string() : last_hash_;
  if (row.prev_hash() != expected_prev) {
    std::string where;
    if (first) {
      where = absl::StrCat("row ", id, " is the first row but its prev_hash is ",
                           Short(row.prev_hash()), ", not empty");
    } else {
      where = absl::StrCat("row ", id, "'s prev_hash ", Short(row.prev_hash()),
                           " does not match row ", last_id_, "'s hash ", Short(last_hash_));
    }
    int64_t linked = lookup_ && !row.prev_hash().empty() ? lookup_(row.prev_hash()) : 0;
    std::string cause;
    if (linked != 0) {
      cause = absl::StrCat(": its content was chained after row ", linked,
                           ", so rows were reordered or their contents swapped");
    } else if (first) {
      cause = ": the rows before it were deleted";
    } else {
      cause = ": the row it was chained after was deleted or modified, or this row was modified";
    }
    Fail(id, where + cause);
    return;
  }
  std::string computed = AuditRowHash(row);
  if (computed != row.hash()) {
    Fail(id, absl::StrCat("row ", id, " was modified: its stored hash is ", Short(row.hash()),
                          " but its fields hash to ", Short(computed)));
    return;
  }
  last_id_ = id;
  last_hash_ = row.hash();
}

void AuditChainVerifier::Finish(int64_t highest_assigned_id) {
  if (failed_) return;
  if (highest_assigned_id > last_id_) {
    std::string missing =
        highest_assigned_id == last_id_ + 1
            ? absl::StrCat("row ", highest_assigned_id, " is")
            : absl::StrCat("rows ", last_id_ + 1, "..", highest_assigned_id, " are");
    Fail(last_id_ + 1,
         result_.rows() == 0
             ? absl::StrCat(missing, " missing (deleted): the log is empty")
             : absl::StrCat(missing, " missing (deleted) after the last row ", last_id_));
    return;
  }
  result_.set_ok(true);
  result_.set_first_bad_id(0);
  result_.clear_problem();
}

}  // namespace rocetune::controller
