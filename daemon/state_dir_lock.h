#ifndef ROCETUNE_DAEMON_STATE_DIR_LOCK_H_
#define ROCETUNE_DAEMON_STATE_DIR_LOCK_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace rocetune {

// An exclusive flock(2) on <state_dir>/lock, held while the object lives (the
// kernel drops it when the process dies, so a crash never leaves a stale
// lock). The holder's PID is written into the file so that a second instance
// can name it.
class StateDirLock {
 public:
  // Creates `state_dir` if needed and locks it for `program`. kFailedPrecondition
  // when another process holds it: "state dir D is in use by rocetune-agent
  // (pid N); ...". Other errors name the path and the errno text.
  static absl::StatusOr<std::unique_ptr<StateDirLock>> Acquire(const std::string& state_dir,
                                                               const std::string& program);
  ~StateDirLock();
  StateDirLock(const StateDirLock&) = delete;
  StateDirLock& operator=(const StateDirLock&) = delete;

  const std::string& path() const { return path_; }

 private:
  StateDirLock(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  int fd_;
  std::string path_;
};

}  // namespace rocetune

#endif  // ROCETUNE_DAEMON_STATE_DIR_LOCK_H_
