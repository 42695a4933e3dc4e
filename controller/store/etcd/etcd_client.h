#ifndef ROCETUNE_CONTROLLER_STORE_ETCD_ETCD_CLIENT_H_
#define ROCETUNE_CONTROLLER_STORE_ETCD_ETCD_CLIENT_H_

// A small etcd v3 client over gRPC: keys, leader-fenced transactions, leases
// and leader election, the pieces a replicated controller store needs
// (docs/etcd.md). Its stubs are generated from the .proto files Debian ships
// with etcd (controller/store/etcd/CMakeLists.txt).

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace rocetune::controller::etcd {

struct EtcdOptions {
  // Client endpoints, HOST:PORT each; with several, IPV4:PORT each. Several
  // form one channel that uses the first member it can connect to and moves
  // on when that member goes away (not when it is up but cut off from its
  // cluster's majority: its calls then fail with its error).
  std::vector<std::string> endpoints;
  // Deadline of each call (a campaign's wait is its own).
  absl::Duration timeout = absl::Seconds(5);
};

// A key as etcd holds it.
struct KeyValue {
  std::string key;
  std::string value;
  int64_t create_revision = 0;
  int64_t mod_revision = 0;
  int64_t version = 0;
  int64_t lease = 0;
};

// What a leader's writes are guarded by: its election key, as created (a
// leader deposed since, by its lease ending or by resigning, no longer has it).
struct Leadership {
  std::string name;  // the election
  std::string key;   // the leader's key under it
  int64_t create_revision = 0;
  int64_t lease = 0;
};

class EtcdClient {
 public:
  // kInvalidArgument when no endpoint is given or one is empty. Connects
  // lazily: an unreachable etcd shows in the first call.
  static absl::StatusOr<std::unique_ptr<EtcdClient>> Connect(const EtcdOptions& options);
  ~EtcdClient();
  EtcdClient(const EtcdClient&) = delete;
  EtcdClient& operator=(const EtcdClient&) = delete;

  // Every call returns gRPC's error (etcd's included) as an absl::Status of the
  // same code, its message naming the operation, its key or lease, and the
  // endpoints; refusals decided here say which code they use.

  // Writes `value` at `key` (attached to `lease` unless 0); the store's
  // revision after the write.
  absl::StatusOr<int64_t> Put(const std::string& key, const std::string& value, int64_t lease = 0);
  // The key, or nullopt when it does not exist.
  absl::StatusOr<std::optional<KeyValue>> Get(const std::string& key);
  // Every key starting with `prefix`, in key order.
  absl::StatusOr<std::vector<KeyValue>> GetPrefix(const std::string& prefix);
  // Writes every (key, value) of `puts` in one transaction, only while
  // `leader`'s election key still exists as it was created: the revision
  // after the write, or kFailedPrecondition (nothing written) when the key is
  // gone or was created again (a deposed leader).
  absl::StatusOr<int64_t> FencedPut(const Leadership& leader,
                                    const std::vector<std::pair<std::string, std::string>>& puts);

  // A lease of `ttl` (whole seconds, at least 1; etcd may grant more): its id.
  // An error etcd returns in the answer is kFailedPrecondition.
  absl::StatusOr<int64_t> GrantLease(absl::Duration ttl);
  // Renews `lease` once: the time it has left; kNotFound when it has expired.
  absl::StatusOr<absl::Duration> KeepAliveOnce(int64_t lease);
  // Ends `lease` now; the keys attached to it are deleted.
  absl::Status RevokeLease(int64_t lease);

  // Campaigns in election `name` with `lease` and `value`: returns once this
  // caller leads, or kDeadlineExceeded after `wait` while another does
  // (absl::InfiniteDuration(): until it leads). kInvalidArgument for a wait
  // that is not positive.
  absl::StatusOr<Leadership> Campaign(const std::string& name, int64_t lease,
                                      const std::string& value, absl::Duration wait);
  // The leader's key of election `name`, or nullopt when nobody leads.
  absl::StatusOr<std::optional<KeyValue>> Leader(const std::string& name);
  // Gives up `leader`'s leadership (its key is deleted; the next candidate leads).
  absl::Status Resign(const Leadership& leader);

 private:
  struct Stubs;
  EtcdClient(EtcdOptions options, std::unique_ptr<Stubs> stubs);

  EtcdOptions options_;
  std::string where_;  // the endpoints, for messages
  std::unique_ptr<Stubs> stubs_;
};

}  // namespace rocetune::controller::etcd

#endif  // ROCETUNE_CONTROLLER_STORE_ETCD_ETCD_CLIENT_H_
