#ifndef ROCETUNE_TESTS_E2E_FAULT_CHECKS_H_
#define ROCETUNE_TESTS_E2E_FAULT_CHECKS_H_

#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "rocetune/v1/admin.pb.h"
#include "tests/e2e/e2e_env.h"

namespace rocetune::e2e {

// Invariant checks shared by the fault-injection tests. Each returns the
// problems it found, one line each ("" = none).

// A parameter set as a canonical string: devices by name, DCQCN values sorted,
// enable masks and PFC when present. Two sets are equal when their keys are.
std::string ParamKey(const v1::ParameterSet& set);

// Every change the controller lists (all pages).
std::vector<v1::Change> ListAllChanges(Env& env);

// The parameter sets the store records for each host: every change's target
// and previous set for it, plus `initial` (what each host held before the
// first change).
std::map<std::string, std::set<std::string>> RecordedSets(
    const std::vector<v1::Change>& changes, const std::map<std::string, std::string>& initial);

// Hosts whose applied parameters (as the controller lists them) are not one
// of the recorded sets.
std::vector<std::string> HostsOffRecord(
    const std::vector<v1::HostInfo>& hosts,
    const std::map<std::string, std::set<std::string>>& recorded);

// A change is consistent when its transitions chain (each `from` is the
// previous `to`), its state is the last transition's `to`, and it is not
// in CANARY or STAGE unless a transition after `restarted` put it there: a
// change found mid-bake is either resumed from its persisted step baseline
// (a transition to the same state, actor controller) or rolled back.
std::vector<std::string> InconsistentChanges(const std::vector<v1::Change>& changes,
                                             absl::Time restarted);

// The fault tests' small fleet: the 8-host all-reduce scenario in 4 ToRs of
// 2, 4 probe peers, the agents' local guard off (the judge decides).
EnvOptions SmallFleetOptions();

// A policy for the fault tests' small fleet (8 hosts in 4 ToRs, label "tor"):
// rpg_time_reset, half the hosts (at least 2) as canary, a 1 s baseline, one
// look per `bake_seconds` bake, one stage, a lenient p99 guard; `guard_extra`
// is added inside guard { } (e.g. "max_hold_seconds: 4").
std::string SmallFleetPolicy(const std::string& name, int bake_seconds,
                             const std::string& guard_extra = "");

// The change's state at `t`, from its transitions (PROPOSED before the first).
v1::ChangeState StateAt(const v1::Change& c, absl::Time t);

// What an agent logs when it gives a provisional set up because the change's
// lease ran out without the controller (agent/apply/nic_owner.cc).
inline constexpr char kLeaseExpiredLog[] = "provisional lease expired without the controller";

// Occurrences of `what` in `text`.
int CountOf(const std::string& text, const std::string& what);

// The time stamp (ts=...) of the `n`-th line (1-based) of a daemon log that
// contains `what`; nullopt when there is none or it has no readable stamp.
std::optional<absl::Time> NthLogTime(const std::string& log, const std::string& what, int n);

// ---- Network faults with nftables, in a network namespace of the caller's own.

// The path of the tool `name` in the usual system directories ("" if none).
std::string SystemTool(const std::string& name);

// The network namespace of process `pid` ("thread-self" for the calling thread).
std::string NetnsOf(const std::string& pid);

// Moves the calling thread into a new network namespace with its loopback up,
// so the processes it starts share a private loopback that nftables rules can
// cut without touching the machine's own. Fails (naming what) without root,
// nft or ip.
absl::Status EnterPrivateNetns();

// An nftables table (family inet) installed from a ruleset text and deleted on
// Delete() or destruction; gone with the namespace anyway.
class NftTable {
 public:
  NftTable(std::string nft, std::string name) : nft_(std::move(nft)), name_(std::move(name)) {}
  ~NftTable() { Delete().IgnoreError(); }
  NftTable(const NftTable&) = delete;
  NftTable& operator=(const NftTable&) = delete;
  const std::string& name() const { return name_; }
  bool installed() const { return installed_; }
  // Loads "table inet <name> { `body` }" (its file written into `dir`).
  absl::Status Install(const std::string& dir, const std::string& body);
  absl::Status Delete();

 private:
  std::string nft_;
  std::string name_;
  bool installed_ = false;
};

}  // namespace rocetune::e2e

#endif  // ROCETUNE_TESTS_E2E_FAULT_CHECKS_H_
