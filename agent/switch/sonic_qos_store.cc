#include "agent/switch/sonic_qos_store.h"

#include <map>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "model/switch_params.h"

namespace rocetune {
namespace {

constexpr absl::string_view kProfilePrefix = "WRED_PROFILE|";
constexpr absl::string_view kQosMapPrefix = "PORT_QOS_MAP|";
constexpr absl::string_view kPoolPrefix = "BUFFER_POOL|";

}  // namespace

SonicQosStore::SonicQosStore(RedisClient* config_db) : db_(config_db) {}

absl::StatusOr<SwitchQosState> SonicQosStore::ReadKeys(const SwitchQosKeys& keys, bool watch) {
  std::vector<std::string> names;
  if (keys.all()) {
    if (absl::Status s = ScanKeys(db_, "WRED_PROFILE|*", &names); !s.ok()) return s;
    if (absl::Status s = ScanKeys(db_, "PORT_QOS_MAP|*", &names); !s.ok()) return s;
  } else {
    for (const std::string& p : keys.profiles) names.push_back(absl::StrCat(kProfilePrefix, p));
    for (const std::string& p : keys.ports) names.push_back(absl::StrCat(kQosMapPrefix, p));
  }
  if (absl::Status s = ScanKeys(db_, "BUFFER_POOL|*", &names); !s.ok()) return s;
  RedisBatch batch;
  if (watch) {
    std::vector<std::string> argv = {"WATCH"};
    argv.insert(argv.end(), names.begin(), names.end());
    batch.Add(argv);
  }
  for (const std::string& k : names) batch.Add({"HGETALL", k});
  std::vector<RedisReply> replies;
  if (absl::Status s = db_->Pipeline(batch, &replies); !s.ok()) return s;
  const size_t first = watch ? 1 : 0;
  if (watch && replies[0].is_error()) {
    return absl::InternalError(absl::StrCat(db_->Describe(), ": WATCH: ", replies[0].str));
  }
  SwitchQosState state;
  std::map<std::string, std::map<std::string, std::string>> pools;
  for (size_t i = 0; i < names.size(); ++i) {
    const RedisReply& r = replies[first + i];
    if (r.is_error()) {
      return absl::InternalError(
          absl::StrCat(db_->Describe(), ": HGETALL ", names[i], ": ", r.str));
    }
    if (r.type != RedisReply::Type::kArray || r.elements.empty()) continue;  // key absent
    std::map<std::string, std::string> fields;
    for (auto& [f, v] : HashPairs(r)) fields[f] = v;
    absl::string_view key = names[i];
    if (absl::ConsumePrefix(&key, kProfilePrefix)) {
      state.profiles[std::string(key)] = std::move(fields);
    } else if (absl::ConsumePrefix(&key, kQosMapPrefix)) {
      auto it = fields.find("pfc_enable");
      state.pfc_enable[std::string(key)] = it == fields.end() ? "" : it->second;
    } else if (absl::ConsumePrefix(&key, kPoolPrefix)) {
      pools[std::string(key)] = std::move(fields);
    }
  }
  state.buffer_limit_bytes = BufferLimitFromPools(pools);
  if (watch) {
    watch_generation_ = db_->generation();
    watched_ = std::move(names);
  }
  return state;
}

absl::StatusOr<SwitchQosState> SonicQosStore::Read(const SwitchQosKeys& keys) {
  return ReadKeys(keys, /*watch=*/false);
}

absl::StatusOr<SwitchQosState> SonicQosStore::Snapshot(const SwitchQosKeys& keys) {
  return ReadKeys(keys, /*watch=*/true);
}

void SonicQosStore::Release() {
  watched_.clear();
  if (db_->generation() == watch_generation_) (void)db_->Command({"UNWATCH"});
}

absl::Status SonicQosStore::Commit(const SwitchQosWrite& write) {
  const std::string watched = absl::StrJoin(watched_, ", ");
  watched_.clear();
  if (db_->generation() != watch_generation_) {
    return absl::AbortedError(
        absl::StrCat(db_->Describe(),
                     ": the connection was re-established since the snapshot, so the "
                     "watch on ",
                     watched, " is void"));
  }
  RedisBatch batch;
  batch.Add({"MULTI"});
  for (const auto& [profile, fields] : write.profile_fields) {
    std::vector<std::string> argv = {"HSET", absl::StrCat(kProfilePrefix, profile)};
    for (const auto& [f, v] : fields) {
      argv.push_back(f);
      argv.push_back(v);
    }
    batch.Add(argv);
  }
  for (const auto& [port, text] : write.pfc_enable) {
    batch.Add({"HSET", absl::StrCat(kQosMapPrefix, port), "pfc_enable", text});
  }
  batch.Add({"EXEC"});
  std::vector<RedisReply> replies;
  if (absl::Status s = db_->Pipeline(batch, &replies); !s.ok()) {
    return absl::UnavailableError(absl::StrCat("commit (MULTI/EXEC): ", s.message()));
  }
  for (size_t i = 0; i + 1 < replies.size(); ++i) {
    if (replies[i].is_error()) {
      return absl::InternalError(absl::StrCat(db_->Describe(), ": command ", i,
                                              " of the "
                                              "transaction refused: ",
                                              replies[i].str, "; nothing written"));
    }
  }
  const RedisReply& exec = replies.back();
  if (exec.is_nil()) {
    return absl::AbortedError(
        absl::StrCat(db_->Describe(), ": a watched key (", watched, ") changed since it was read"));
  }
  if (exec.is_error()) {
    return absl::InternalError(
        absl::StrCat(db_->Describe(), ": EXEC: ", exec.str, "; nothing written"));
  }
  return absl::OkStatus();
}

}  // namespace rocetune
