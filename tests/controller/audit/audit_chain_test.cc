#include "controller/audit/audit_chain.h"

#include <map>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace rocetune::controller {
namespace {

using ::testing::HasSubstr;

v1::AuditEntry Row(int64_t id, const std::string& actor) {
  v1::AuditEntry e;
  e.set_id(id);
  e.set_unix_nanos(1000 + id);
  e.set_actor(actor);
  e.set_action("approve");
  e.set_subject("c-1");
  e.set_detail("detail");
  e.set_reason("because");
  e.set_authenticated(true);
  e.set_change_id("c-1");
  e.add_host_ids("h1");
  e.add_host_ids("h2");
  v1::ValueChange* v = e.add_values();
  v->set_host_id("h1");
  v->set_device("mlx5_0");
  v->set_parameter("rpg_ai_rate");
  v->set_old_value("5");
  v->set_new_value("8");
  return e;
}

// Rows 1..n chained the way the store writes them.
std::vector<v1::AuditEntry> Chain(int n) {
  std::vector<v1::AuditEntry> rows;
  std::string prev;
  for (int i = 1; i <= n; ++i) {
    v1::AuditEntry e = Row(i, "actor" + std::to_string(i));
    e.set_prev_hash(prev);
    e.set_hash(AuditRowHash(e));
    prev = e.hash();
    rows.push_back(e);
  }
  return rows;
}

v1::VerifyAuditResponse Verify(const std::vector<v1::AuditEntry>& rows, int64_t highest_id = 0) {
  std::map<std::string, int64_t> by_hash;
  for (const v1::AuditEntry& e : rows) by_hash.emplace(e.hash(), e.id());
  AuditChainVerifier v([&](const std::string& h) -> int64_t {
    auto it = by_hash.find(h);
    return it == by_hash.end() ? 0 : it->second;
  });
  for (const v1::AuditEntry& e : rows) v.Add(e);
  v.Finish(highest_id);
  return v.result();
}

TEST(AuditRowHashTest, IsLowercaseHexSha256AndDeterministic) {
  v1::AuditEntry e = Row(1, "alice");
  std::string h = AuditRowHash(e);
  ASSERT_EQ(h.size(), 64u);
  EXPECT_EQ(h.find_first_not_of("0123456789abcdef"), std::string::npos) << h;
  EXPECT_EQ(AuditRowHash(e), h);
  // The stored hash itself is not part of the digest.
  e.set_hash("anything");
  EXPECT_EQ(AuditRowHash(e), h);
}

TEST(AuditRowHashTest, KnownDigestOfTheEmptyRow) {
  // An all-default row: the tag, 11 zero-valued fields and an empty prev_hash.
  // Pinned so that an accidental change of the canonical encoding (which
  // would invalidate every stored chain) fails here. Computed with sha256sum
  // over the documented layout: 8-byte length 17, the tag, then 96 zero bytes.
  v1::AuditEntry e;
  std::string bytes = AuditRowCanonicalBytes(e);
  std::string tag = "rocetune.audit.v1";
  ASSERT_EQ(bytes.size(), 8 + tag.size() + 12 * 8);
  EXPECT_EQ(bytes.substr(8, tag.size()), tag);
  EXPECT_EQ(AuditRowHash(e), "bbf23f2b7b391ad90e60785e7c395ae43f99db2a0ac5fa12c00b0a183ddeadf8");
}

TEST(AuditRowHashTest, EveryFieldChangesTheHash) {
  const v1::AuditEntry base = Row(7, "alice");
  const std::string h = AuditRowHash(base);
  std::vector<std::pair<std::string, v1::AuditEntry>> variants;
  auto add = [&](const std::string& name, auto mutate) {
    v1::AuditEntry e = base;
    mutate(e);
    variants.emplace_back(name, e);
  };
  add("id", [](v1::AuditEntry& e) { e.set_id(8); });
  add("unix_nanos", [](v1::AuditEntry& e) { e.set_unix_nanos(1); });
  add("actor", [](v1::AuditEntry& e) { e.set_actor("mallory"); });
  add("action", [](v1::AuditEntry& e) { e.set_action("reject"); });
  add("subject", [](v1::AuditEntry& e) { e.set_subject("c-2"); });
  add("detail", [](v1::AuditEntry& e) { e.set_detail("other"); });
  add("reason", [](v1::AuditEntry& e) { e.set_reason(""); });
  add("authenticated", [](v1::AuditEntry& e) { e.set_authenticated(false); });
  add("change_id", [](v1::AuditEntry& e) { e.set_change_id("c-2"); });
  add("host_ids", [](v1::AuditEntry& e) { e.set_host_ids(1, "h3"); });
  add("host_ids order", [](v1::AuditEntry& e) { e.mutable_host_ids()->SwapElements(0, 1); });
  add("host_ids count", [](v1::AuditEntry& e) { e.mutable_host_ids()->RemoveLast(); });
  add("value.host_id", [](v1::AuditEntry& e) { e.mutable_values(0)->set_host_id("h2"); });
  add("value.device", [](v1::AuditEntry& e) { e.mutable_values(0)->set_device("mlx5_1"); });
  add("value.parameter", [](v1::AuditEntry& e) { e.mutable_values(0)->set_parameter("x"); });
  add("value.old", [](v1::AuditEntry& e) { e.mutable_values(0)->set_old_value("6"); });
  add("value.new", [](v1::AuditEntry& e) { e.mutable_values(0)->set_new_value("9"); });
  add("values count", [](v1::AuditEntry& e) { e.add_values(); });
  add("prev_hash", [](v1::AuditEntry& e) { e.set_prev_hash("00"); });
  for (const auto& [name, e] : variants) EXPECT_NE(AuditRowHash(e), h) << name;
}

TEST(AuditRowHashTest, FieldBoundariesCannotShift) {
  v1::AuditEntry a = Row(1, "ab");
  a.set_action("c");
  v1::AuditEntry b = Row(1, "a");
  b.set_action("bc");
  EXPECT_NE(AuditRowHash(a), AuditRowHash(b));

  // Moving a host id between list elements, or a list element into a scalar.
  v1::AuditEntry c = Row(1, "x");
  c.clear_host_ids();
  c.add_host_ids("h1h2");
  v1::AuditEntry d = Row(1, "x");
  d.clear_host_ids();
  d.add_host_ids("h1");
  d.add_host_ids("h2");
  EXPECT_NE(AuditRowHash(c), AuditRowHash(d));

  v1::AuditEntry e = Row(1, "x");
  e.clear_host_ids();
  e.set_change_id("c-1h1");
  v1::AuditEntry f = Row(1, "x");
  f.clear_host_ids();
  f.add_host_ids("h1");
  EXPECT_NE(AuditRowHash(e), AuditRowHash(f));
}

TEST(AuditChainVerifierTest, IntactChainIsOk) {
  v1::VerifyAuditResponse r = Verify(Chain(5), 5);
  EXPECT_TRUE(r.ok()) << r.problem();
  EXPECT_EQ(r.rows(), 5);
  EXPECT_EQ(r.first_bad_id(), 0);
  EXPECT_EQ(r.problem(), "");
}

TEST(AuditChainVerifierTest, EmptyLogIsOk) {
  v1::VerifyAuditResponse r = Verify({}, 0);
  EXPECT_TRUE(r.ok());
  EXPECT_EQ(r.rows(), 0);
}

TEST(AuditChainVerifierTest, EmptiedLogIsFound) {
  v1::VerifyAuditResponse r = Verify({}, 3);
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.first_bad_id(), 1);
  EXPECT_EQ(r.problem(), "rows 1..3 are missing (deleted): the log is empty");
}

TEST(AuditChainVerifierTest, ModifiedRowIsNamed) {
  std::vector<v1::AuditEntry> rows = Chain(5);
  rows[2].set_reason("edited");
  v1::VerifyAuditResponse r = Verify(rows, 5);
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.first_bad_id(), 3);
  EXPECT_EQ(r.rows(), 5);
  EXPECT_THAT(r.problem(), HasSubstr("row 3 was modified"));
}

TEST(AuditChainVerifierTest, ModifiedRowWithRecomputedHashBreaksTheNextLink) {
  std::vector<v1::AuditEntry> rows = Chain(5);
  rows[2].set_reason("edited");
  rows[2].set_hash(AuditRowHash(rows[2]));
  v1::VerifyAuditResponse r = Verify(rows, 5);
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.first_bad_id(), 4);
  EXPECT_THAT(r.problem(), HasSubstr("row 4's prev_hash"));
  EXPECT_THAT(r.problem(), HasSubstr("does not match row 3's hash"));
}

TEST(AuditChainVerifierTest, DeletedMiddleRowIsNamed) {
  std::vector<v1::AuditEntry> rows = Chain(5);
  rows.erase(rows.begin() + 2);  // id 3
  v1::VerifyAuditResponse r = Verify(rows, 5);
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.first_bad_id(), 3);
  EXPECT_THAT(r.problem(), HasSubstr("row 3 is missing (deleted)"));
}

TEST(AuditChainVerifierTest, DeletedMiddleRowsWithRenumberedIdsFailTheLink) {
  // Rows 4 and 5 renumbered to 3 and 4 to hide the gap: the link breaks.
  std::vector<v1::AuditEntry> rows = Chain(5);
  rows.erase(rows.begin() + 2);
  rows[2].set_id(3);
  rows[3].set_id(4);
  v1::VerifyAuditResponse r = Verify(rows, 4);
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.first_bad_id(), 3);
  EXPECT_THAT(r.problem(), HasSubstr("modified"));
}

TEST(AuditChainVerifierTest, DeletedLastRowsAreNamed) {
  std::vector<v1::AuditEntry> rows = Chain(5);
  rows.resize(3);
  v1::VerifyAuditResponse r = Verify(rows, 5);
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.first_bad_id(), 4);
  EXPECT_THAT(r.problem(), HasSubstr("rows 4..5 are missing (deleted) after the last row 3"));
}

TEST(AuditChainVerifierTest, DeletedFirstRowIsNamed) {
  std::vector<v1::AuditEntry> rows = Chain(3);
  rows.erase(rows.begin());
  v1::VerifyAuditResponse r = Verify(rows, 3);
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.first_bad_id(), 2);
  EXPECT_THAT(r.problem(), HasSubstr("row 2 is the first row but its prev_hash"));
  EXPECT_THAT(r.problem(), HasSubstr("deleted"));
}

TEST(AuditChainVerifierTest, SwappedRowContentsAreReportedAsReordered) {
  std::vector<v1::AuditEntry> rows = Chain(5);
  // Swap everything but the id between rows 2 and 4.
  v1::AuditEntry two = rows[1];
  v1::AuditEntry four = rows[3];
  rows[1] = four;
  rows[1].set_id(2);
  rows[3] = two;
  rows[3].set_id(4);
  v1::VerifyAuditResponse r = Verify(rows, 5);
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.first_bad_id(), 2);
  EXPECT_THAT(r.problem(), HasSubstr("chained after row 3"));
  EXPECT_THAT(r.problem(), HasSubstr("reordered"));
}

TEST(AuditChainVerifierTest, UnreadableRowIsNamedAndLaterRowsStillCounted) {
  std::vector<v1::AuditEntry> rows = Chain(3);
  AuditChainVerifier v;
  v.Add(rows[0]);
  v.AddUnreadable(2, "blob");
  v.Add(rows[2]);
  v.Finish(3);
  EXPECT_FALSE(v.result().ok());
  EXPECT_EQ(v.result().first_bad_id(), 2);
  EXPECT_EQ(v.result().rows(), 3);
  EXPECT_THAT(v.result().problem(), HasSubstr("row 2 cannot be decoded (blob)"));
}

}  // namespace
}  // namespace rocetune::controller
