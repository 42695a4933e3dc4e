#include "controller/transport/agent_service.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "daemon/logging.h"

namespace rocetune::controller {
namespace {

// Connect calls requested ahead on each queue, so that a burst of connecting
// agents finds a request waiting.
constexpr int kRequestsAheadPerQueue = 4;

}  // namespace

AgentService::AgentService(const AgentStreamDeps& deps, int queues)
    : deps_(deps), queue_count_(std::max(queues, 1)) {}

AgentService::~AgentService() { Stop(); }

void AgentService::AddTo(grpc::ServerBuilder* builder) {
  builder->RegisterService(this);
  for (int i = 0; i < queue_count_; ++i) cqs_.push_back(builder->AddCompletionQueue());
}

void AgentService::Start() {
  for (auto& cq : cqs_) {
    for (int i = 0; i < kRequestsAheadPerQueue; ++i) RequestOne(cq.get());
  }
  for (auto& cq : cqs_) {
    grpc::ServerCompletionQueue* q = cq.get();
    threads_.emplace_back([this, q]() { Serve(q); });
  }
}

bool AgentService::Enter() {
  absl::MutexLock lock(&mu_);
  if (stopping_) return false;
  ++live_;
  return true;
}

void AgentService::Leave() {
  absl::MutexLock lock(&mu_);
  --live_;
}

void AgentService::RequestOne(grpc::ServerCompletionQueue* cq) {
  if (!Enter()) return;
  std::shared_ptr<AgentStream> stream = AgentStream::Create(
      deps_, &next_stream_id_,
      // A request taken: put the next one up first.
      [this, cq]() { RequestOne(cq); }, [this]() { Leave(); });
  RequestConnect(stream->context(), stream->io(), cq, cq, stream->accept_tag());
}

void AgentService::Serve(grpc::ServerCompletionQueue* cq) {
  void* tag = nullptr;
  bool ok = false;
  while (cq->Next(&tag, &ok)) static_cast<CqTag*>(tag)->OnComplete(ok);
}

void AgentService::Stop() {
  {
    absl::MutexLock lock(&mu_);
    if (stopped_) return;
    stopped_ = true;
    stopping_ = true;
    // After the server's Shutdown every call is cancelled, so every
    // outstanding operation completes soon; a queue must not be shut down
    // while a stream may still start one.
    auto drained = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return live_ == 0; };
    if (!threads_.empty() && !mu_.AwaitWithTimeout(absl::Condition(&drained), absl::Seconds(10))) {
      LogWarning("agent streams or admin calls still open after 10 s at shutdown",
                 {{"calls", absl::StrCat(live_)}});
    }
  }
  for (auto& cq : cqs_) cq->Shutdown();
  if (threads_.empty()) {
    // Never started: drain the queues here.
    void* tag = nullptr;
    bool ok = false;
    for (auto& cq : cqs_) {
      while (cq->Next(&tag, &ok)) {
      }
    }
  }
  for (std::thread& t : threads_) t.join();
  threads_.clear();
}

}  // namespace rocetune::controller
