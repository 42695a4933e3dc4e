#ifndef ROCETUNE_TESTS_CONTROLLER_STORE_ETCD_CLUSTER_H_
#define ROCETUNE_TESTS_CONTROLLER_STORE_ETCD_CLUSTER_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "tests/integration/subprocess.h"

namespace rocetune::testing {

// A real etcd cluster for a test (Debian's etcd-server, /usr/bin/etcd):
// `members` processes on loopback ports picked here, their data and logs under
// `dir`, stopped (by their PIDs) on destruction.
class EtcdCluster {
 public:
  EtcdCluster(std::string dir, int members);
  ~EtcdCluster();

  // Starts every member and waits (up to `timeout`) until each answers
  // /health; tries again on other ports when a member exits (a port taken
  // between picking and binding). The error names the member and its log.
  absl::Status Start(absl::Duration timeout = absl::Seconds(30));
  // "127.0.0.1:PORT" of each member's client URL.
  std::vector<std::string> endpoints() const;
  // SIGKILLs member `i` (its endpoint then refuses connections).
  void Kill(int i);
  // SIGKILLs `members` (those still running) and starts them again on their
  // data directories and ports; waits (up to `timeout`) until each is healthy.
  absl::Status Restart(const std::vector<int>& members, absl::Duration timeout = absl::Seconds(60));
  // Member `i`'s log (its current process's).
  std::string Log(int i) const;

 private:
  std::string LogTail(int i) const;  // its last 2000 characters
  absl::Status StartOnce(absl::Duration timeout);
  // Starts `members` with their arguments and waits until each is healthy; a
  // member that exits is kAborted when `retry_on_exit` (Start tries other ports).
  absl::Status Launch(const std::vector<int>& members, absl::Duration timeout, bool retry_on_exit);
  void StopAll();

  std::string dir_;
  int members_;
  std::vector<int> client_ports_;
  std::vector<int> peer_ports_;
  std::vector<std::vector<std::string>> args_;  // each member's etcd arguments
  std::vector<std::unique_ptr<Subprocess>> procs_;
  int launches_ = 0;  // numbers the logs
};

}  // namespace rocetune::testing

#endif  // ROCETUNE_TESTS_CONTROLLER_STORE_ETCD_CLUSTER_H_
