// What the control loop's write batching buys: N host rows, each with its
// audit row (what an ACK, a NACK or a guard event persists), written one
// transaction each (the baseline: how they were written before) and through
// ControlLoop::Write while the loop is busy, so that they commit in batches
// of ControlLoop::kMaxWriteBatch. Both on a fresh SQLite file in WAL mode
// (synchronous=NORMAL), in the same run. Prints
// "BENCH store_write_bench writes=N single_us_per_write=... batched_us_per_write=... speedup=...".
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "controller/control_loop.h"
#include "controller/store/store.h"

namespace rocetune::controller {
namespace {

StoredHost Host(int i) {
  StoredHost h;
  h.info.set_host_id(absl::StrCat("host-", i % 2000));
  h.info.set_current_version(absl::StrCat(i));
  h.desired_seq = static_cast<uint64_t>(i + 1);
  (*h.desired.add_devices()->mutable_dcqcn())["rpg_ai_rate"] = i;
  return h;
}

v1::AuditEntry Ack(int i) {
  v1::AuditEntry e;
  e.set_actor(absl::StrCat("host-", i % 2000));
  e.set_action("ack");
  e.set_detail(absl::StrCat("version=", i));
  return e;
}

double Seconds(std::chrono::steady_clock::time_point from) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - from).count();
}

int Main(int writes) {
  char tmpl[] = "/tmp/rocetune-store-bench-XXXXXX";
  if (mkdtemp(tmpl) == nullptr) return 1;
  const std::string dir = tmpl;
  int rc = 0;
  {
    auto single = Store::Open(dir + "/single");
    auto batched = Store::Open(dir + "/batched");
    if (!single.ok() || !batched.ok()) {
      std::fprintf(stderr, "store_write_bench: cannot open the stores\n");
      rc = 1;
    } else {
      auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < writes; ++i) {
        if (!(*single)->SaveHostWithAudit(Host(i), Ack(i)).ok()) rc = 1;
      }
      const double single_s = Seconds(t0);
      ControlLoop loop(batched->get());
      Store* store = batched->get();
      // The loop busy while the burst arrives, as behind a tick.
      absl::Notification release;
      absl::Notification running;
      loop.Post([&] {
        running.Notify();
        release.WaitForNotification();
      });
      running.WaitForNotification();
      t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < writes; ++i) {
        loop.Write([store, i, &rc] {
          if (!store->SaveHostWithAudit(Host(i), Ack(i)).ok()) rc = 1;
        });
      }
      release.Notify();
      loop.Stop();  // runs everything queued
      const double batched_s = Seconds(t0);
      std::printf(
          "BENCH store_write_bench writes=%d single_us_per_write=%.1f batched_us_per_write=%.1f "
          "speedup=%.1f commits_single=%llu commits_batched=%llu\n",
          writes, 1e6 * single_s / writes, 1e6 * batched_s / writes, single_s / batched_s,
          static_cast<unsigned long long>((*single)->commits()),
          static_cast<unsigned long long>(store->commits()));
    }
  }
  std::filesystem::remove_all(dir);
  return rc;
}

}  // namespace
}  // namespace rocetune::controller

int main() { return rocetune::controller::Main(10000); }
