#ifndef ROCETUNE_CONTROLLER_TRANSPORT_CQ_TAG_H_
#define ROCETUNE_CONTROLLER_TRANSPORT_CQ_TAG_H_

namespace rocetune::controller {

// A tag on the controller's completion queues (AgentService owns them; the
// agent streams and the admin calls put their operations there). The queue's
// thread calls OnComplete with the operation's result.
class CqTag {
 public:
  virtual void OnComplete(bool ok) = 0;

 protected:
  ~CqTag() = default;
};

// Counts the calls that may still start operations on the queues: the queues
// are shut down only once every call has ended (gRPC aborts on an operation
// started on a queue that is shut down).
class CallTracker {
 public:
  // A call object is being created; false once stopping (then do not create it).
  virtual bool Enter() = 0;
  // That call object has ended: it starts no further operation.
  virtual void Leave() = 0;

 protected:
  ~CallTracker() = default;
};

}  // namespace rocetune::controller

#endif  // ROCETUNE_CONTROLLER_TRANSPORT_CQ_TAG_H_
