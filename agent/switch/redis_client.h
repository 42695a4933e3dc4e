#ifndef ROCETUNE_AGENT_SWITCH_REDIS_CLIENT_H_
#define ROCETUNE_AGENT_SWITCH_REDIS_CLIENT_H_

#include <chrono>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

struct redisContext;
struct redisReply;

namespace rocetune {

// Where a Redis server listens: "unix:/var/run/redis/redis.sock" or "HOST:PORT".
struct RedisEndpoint {
  std::string unix_path;  // set for a unix socket
  std::string host;       // else host and port
  int port = 0;

  // kInvalidArgument naming the text when it is neither form.
  static absl::StatusOr<RedisEndpoint> Parse(absl::string_view text);
  std::string Text() const;
};

// One reply, owned (strings copied out of hiredis). Reused across rounds:
// assigning into a kept reply reuses its strings' and elements' storage.
struct RedisReply {
  enum class Type { kNil, kString, kInteger, kArray, kStatus, kError };
  Type type = Type::kNil;
  std::string str;  // kString, kStatus, kError
  int64_t integer = 0;
  std::vector<RedisReply> elements;  // kArray

  bool is_nil() const { return type == Type::kNil; }
  bool is_error() const { return type == Type::kError; }
};

// Commands encoded in the Redis protocol, sent in one write and answered in one
// read pass: one round trip for the whole batch.
class RedisBatch {
 public:
  void Add(std::initializer_list<absl::string_view> argv);
  void Add(const std::vector<std::string>& argv);
  // Appends another batch's commands.
  void Append(const RedisBatch& other);
  void Clear();
  size_t size() const { return count_; }
  const std::string& wire() const { return wire_; }

 private:
  void Begin(size_t argc);
  void Arg(absl::string_view arg);
  std::string wire_;
  size_t count_ = 0;
};

struct RedisClientOptions {
  // Connect and per-reply timeout.
  absl::Duration timeout = absl::Seconds(2);
  // After a failure the next connect attempt waits backoff_min, doubling up to
  // backoff_max; calls in between fail at once without touching the network.
  absl::Duration backoff_min = absl::Milliseconds(100);
  absl::Duration backoff_max = absl::Seconds(5);
};

// A connection to one Redis database (SELECT is per connection, so one client
// per SONiC database). Connects lazily, reconnects after any I/O error with
// exponential backoff. Errors are kUnavailable and name the endpoint, the
// database and hiredis' reason. Thread-safe (calls are serialised). The first
// client constructed sets SIGPIPE to ignored when it has the default action.
class RedisClient {
 public:
  RedisClient(RedisEndpoint endpoint, int db, RedisClientOptions options = {});
  ~RedisClient();
  RedisClient(const RedisClient&) = delete;
  RedisClient& operator=(const RedisClient&) = delete;

  // One command, one round trip. A Redis error reply is returned as a reply of
  // type kError, not as a failed status.
  absl::StatusOr<RedisReply> Command(std::initializer_list<absl::string_view> argv);
  // Every command of `batch` in one round trip; `replies` is resized to
  // batch.size() and refilled in place. On an I/O error the connection is
  // dropped (commands may or may not have run) and the error returned.
  absl::Status Pipeline(const RedisBatch& batch, std::vector<RedisReply>* replies);

  // Connects now if not connected (honouring the backoff).
  absl::Status EnsureConnected();
  // Drops the connection (a WATCH held on it is lost).
  void Disconnect();

  // Round trips so far (a Command or a Pipeline is one; connecting counts one
  // for its SELECT).
  uint64_t round_trips() const;
  // Incremented by every successful connect: a WATCH taken under one
  // generation is void under another.
  uint64_t generation() const;
  std::string Describe() const;  // "redis unix:/path db 4"

 private:
  absl::Status ConnectLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status FailLocked(const std::string& what) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status RoundTripLocked(const std::string& wire, size_t n, std::vector<RedisReply>* out)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const RedisEndpoint endpoint_;
  const int db_;
  const RedisClientOptions options_;
  mutable absl::Mutex mu_;
  redisContext* ctx_ ABSL_GUARDED_BY(mu_) = nullptr;
  uint64_t round_trips_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t generation_ ABSL_GUARDED_BY(mu_) = 0;
  std::string last_error_ ABSL_GUARDED_BY(mu_);
  absl::Duration backoff_ ABSL_GUARDED_BY(mu_) = absl::ZeroDuration();
  std::chrono::steady_clock::time_point next_attempt_ ABSL_GUARDED_BY(mu_);
  RedisBatch scratch_ ABSL_GUARDED_BY(mu_);
};

// Every key matching `pattern` (SCAN with MATCH and COUNT 1000, never KEYS),
// appended to `keys` in no particular order.
absl::Status ScanKeys(RedisClient* client, absl::string_view pattern,
                      std::vector<std::string>* keys);

// Fields of an HGETALL reply as pairs; empty for nil or a non-array.
std::vector<std::pair<std::string, std::string>> HashPairs(const RedisReply& reply);

}  // namespace rocetune

#endif  // ROCETUNE_AGENT_SWITCH_REDIS_CLIENT_H_
