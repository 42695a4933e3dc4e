#include "agent/switch/redis_client.h"

#include <hiredis/hiredis.h>
#include <signal.h>
#include <sys/time.h>

#include <algorithm>
#include <mutex>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace rocetune {
namespace {

void CopyReply(const redisReply* r, RedisReply* out) {
  switch (r->type) {
    case REDIS_REPLY_STRING:
      out->type = RedisReply::Type::kString;
      out->str.assign(r->str, r->len);
      break;
    case REDIS_REPLY_STATUS:
      out->type = RedisReply::Type::kStatus;
      out->str.assign(r->str, r->len);
      break;
    case REDIS_REPLY_ERROR:
      out->type = RedisReply::Type::kError;
      out->str.assign(r->str, r->len);
      break;
    case REDIS_REPLY_INTEGER:
      out->type = RedisReply::Type::kInteger;
      out->integer = r->integer;
      break;
    case REDIS_REPLY_ARRAY:
      out->type = RedisReply::Type::kArray;
      out->elements.resize(r->elements);
      for (size_t i = 0; i < r->elements; ++i) CopyReply(r->element[i], &out->elements[i]);
      break;
    default:
      out->type = RedisReply::Type::kNil;
      break;
  }
}

}  // namespace

absl::StatusOr<RedisEndpoint> RedisEndpoint::Parse(absl::string_view text) {
  RedisEndpoint ep;
  if (absl::ConsumePrefix(&text, "unix:")) {
    if (text.empty() || text[0] != '/') {
      return absl::InvalidArgumentError(
          absl::StrCat("redis endpoint unix:", text, ": want unix:/absolute/path"));
    }
    ep.unix_path = std::string(text);
    return ep;
  }
  size_t colon = text.rfind(':');
  int port = 0;
  if (colon == absl::string_view::npos || colon == 0 ||
      !absl::SimpleAtoi(text.substr(colon + 1), &port) || port <= 0 || port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("redis endpoint \"", text, "\": want unix:PATH or HOST:PORT"));
  }
  ep.host = std::string(text.substr(0, colon));
  ep.port = port;
  return ep;
}

std::string RedisEndpoint::Text() const {
  return unix_path.empty() ? absl::StrCat(host, ":", port) : absl::StrCat("unix:", unix_path);
}

void RedisBatch::Begin(size_t argc) {
  absl::StrAppend(&wire_, "*", argc, "\r\n");
  ++count_;
}

void RedisBatch::Arg(absl::string_view arg) {
  absl::StrAppend(&wire_, "$", arg.size(), "\r\n", arg, "\r\n");
}

void RedisBatch::Add(std::initializer_list<absl::string_view> argv) {
  Begin(argv.size());
  for (absl::string_view a : argv) Arg(a);
}

void RedisBatch::Add(const std::vector<std::string>& argv) {
  Begin(argv.size());
  for (const std::string& a : argv) Arg(a);
}

void RedisBatch::Append(const RedisBatch& other) {
  wire_ += other.wire_;
  count_ += other.count_;
}

void RedisBatch::Clear() {
  wire_.clear();
  count_ = 0;
}

RedisClient::RedisClient(RedisEndpoint endpoint, int db, RedisClientOptions options)
    : endpoint_(std::move(endpoint)), db_(db), options_(options) {
  // hiredis writes with write(2): a server that died would raise SIGPIPE and
  // kill the process instead of failing the call. Ignore it unless the process
  // installed its own handler.
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction old {};
    if (sigaction(SIGPIPE, nullptr, &old) == 0 && old.sa_handler == SIG_DFL) {
      signal(SIGPIPE, SIG_IGN);
    }
  });
}

RedisClient::~RedisClient() {
  absl::MutexLock lock(&mu_);
  if (ctx_ != nullptr) redisFree(ctx_);
}

std::string RedisClient::Describe() const {
  return absl::StrCat("redis ", endpoint_.Text(), " db ", db_);
}

uint64_t RedisClient::round_trips() const {
  absl::MutexLock lock(&mu_);
  return round_trips_;
}

uint64_t RedisClient::generation() const {
  absl::MutexLock lock(&mu_);
  return generation_;
}

void RedisClient::Disconnect() {
  absl::MutexLock lock(&mu_);
  if (ctx_ != nullptr) redisFree(ctx_);
  ctx_ = nullptr;
}

absl::Status RedisClient::FailLocked(const std::string& what) {
  if (ctx_ != nullptr) redisFree(ctx_);
  ctx_ = nullptr;
  last_error_ = what;
  backoff_ = backoff_ == absl::ZeroDuration() ? options_.backoff_min
                                              : std::min(backoff_ * 2, options_.backoff_max);
  next_attempt_ = std::chrono::steady_clock::now() +
                  std::chrono::microseconds(absl::ToInt64Microseconds(backoff_));
  return absl::UnavailableError(absl::StrCat(Describe(), ": ", what, "; next connect attempt in ",
                                             absl::FormatDuration(backoff_)));
}

absl::Status RedisClient::ConnectLocked() {
  if (ctx_ != nullptr) return absl::OkStatus();
  auto now = std::chrono::steady_clock::now();
  if (backoff_ > absl::ZeroDuration() && now < next_attempt_) {
    auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(next_attempt_ - now);
    return absl::UnavailableError(absl::StrCat(Describe(), " is down (", last_error_,
                                               "); next connect attempt in ", wait.count(), "ms"));
  }
  const timeval tv = absl::ToTimeval(options_.timeout);
  redisContext* c = endpoint_.unix_path.empty()
                        ? redisConnectWithTimeout(endpoint_.host.c_str(), endpoint_.port, tv)
                        : redisConnectUnixWithTimeout(endpoint_.unix_path.c_str(), tv);
  if (c == nullptr) return FailLocked("cannot allocate a hiredis context");
  ctx_ = c;
  if (c->err != 0) return FailLocked(absl::StrCat("connect: ", c->errstr));
  if (redisSetTimeout(c, tv) != REDIS_OK) return FailLocked("cannot set the socket timeout");
  std::vector<RedisReply> replies;
  scratch_.Clear();
  std::string db = absl::StrCat(db_);
  scratch_.Add({"SELECT", db});
  ++generation_;  // RoundTripLocked may fail and reset the context
  if (absl::Status s = RoundTripLocked(scratch_.wire(), 1, &replies); !s.ok()) return s;
  if (replies[0].is_error()) return FailLocked(absl::StrCat("SELECT ", db, ": ", replies[0].str));
  backoff_ = absl::ZeroDuration();
  last_error_.clear();
  return absl::OkStatus();
}

absl::Status RedisClient::EnsureConnected() {
  absl::MutexLock lock(&mu_);
  return ConnectLocked();
}

absl::Status RedisClient::RoundTripLocked(const std::string& wire, size_t n,
                                          std::vector<RedisReply>* out) {
  ++round_trips_;
  if (redisAppendFormattedCommand(ctx_, wire.data(), wire.size()) != REDIS_OK) {
    return FailLocked(absl::StrCat("write: ", ctx_->errstr));
  }
  out->resize(n);
  for (size_t i = 0; i < n; ++i) {
    void* raw = nullptr;
    if (redisGetReply(ctx_, &raw) != REDIS_OK || raw == nullptr) {
      std::string why = ctx_->err != 0 ? std::string(ctx_->errstr) : "no reply";
      return FailLocked(absl::StrCat("reply ", i + 1, " of ", n, ": ", why));
    }
    CopyReply(static_cast<redisReply*>(raw), &(*out)[i]);
    freeReplyObject(raw);
  }
  return absl::OkStatus();
}

absl::StatusOr<RedisReply> RedisClient::Command(std::initializer_list<absl::string_view> argv) {
  absl::MutexLock lock(&mu_);
  if (absl::Status s = ConnectLocked(); !s.ok()) return s;
  scratch_.Clear();
  scratch_.Add(argv);
  std::vector<RedisReply> replies;
  if (absl::Status s = RoundTripLocked(scratch_.wire(), 1, &replies); !s.ok()) return s;
  return std::move(replies[0]);
}

absl::Status RedisClient::Pipeline(const RedisBatch& batch, std::vector<RedisReply>* replies) {
  absl::MutexLock lock(&mu_);
  if (absl::Status s = ConnectLocked(); !s.ok()) return s;
  if (batch.size() == 0) {
    replies->clear();
    return absl::OkStatus();
  }
  return RoundTripLocked(batch.wire(), batch.size(), replies);
}

absl::Status ScanKeys(RedisClient* client, absl::string_view pattern,
                      std::vector<std::string>* keys) {
  std::string cursor = "0";
  do {
    absl::StatusOr<RedisReply> r =
        client->Command({"SCAN", cursor, "MATCH", pattern, "COUNT", "1000"});
    if (!r.ok()) return r.status();
    if (r->type != RedisReply::Type::kArray || r->elements.size() != 2 ||
        r->elements[1].type != RedisReply::Type::kArray) {
      return absl::InternalError(absl::StrCat(client->Describe(), ": SCAN ", pattern, ": ",
                                              r->is_error() ? r->str : "unexpected reply"));
    }
    cursor = r->elements[0].str;
    for (RedisReply& k : r->elements[1].elements) keys->push_back(std::move(k.str));
  } while (cursor != "0");
  return absl::OkStatus();
}

std::vector<std::pair<std::string, std::string>> HashPairs(const RedisReply& reply) {
  std::vector<std::pair<std::string, std::string>> out;
  if (reply.type != RedisReply::Type::kArray) return out;
  for (size_t i = 0; i + 1 < reply.elements.size(); i += 2) {
    out.emplace_back(reply.elements[i].str, reply.elements[i + 1].str);
  }
  return out;
}

}  // namespace rocetune
