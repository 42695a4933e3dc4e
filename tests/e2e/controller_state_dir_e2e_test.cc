// Fault injection: the controller's state dir full, then read-only. The
// state dir is a small tmpfs the test mounts (skipped, saying why, where that
// is not allowed). Mutating calls (policy apply, change propose, push) must
// fail with a clear status and leave nothing half-written; reads (hosts,
// policies, changes, the audit log and its verification) keep being served;
// once space is back everything works again. A controller restarted on a
// read-only state dir refuses to start with a message naming the path.
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/e2e/e2e_env.h"
#include "tests/e2e/fault_checks.h"

namespace rocetune::e2e {
namespace {

using ::testing::AnyOf;
using ::testing::HasSubstr;

// A tmpfs mounted on `dir` for the test's lifetime (detached at the end, as
// the controller may still hold files open).
class TmpfsMount {
 public:
  explicit TmpfsMount(std::string dir) : dir_(std::move(dir)) {
    mkdir(dir_.c_str(), 0700);
    if (mount("rocetune-faults", dir_.c_str(), "tmpfs", 0, "size=4m,mode=0700") != 0) {
      error_ = absl::StrCat("mount -t tmpfs on ", dir_, ": ", strerror(errno));
    }
  }
  ~TmpfsMount() {
    if (error_.empty()) umount2(dir_.c_str(), MNT_DETACH);
  }
  const std::string& error() const { return error_; }
  bool Remount(bool read_only) {
    unsigned long flags = MS_REMOUNT | (read_only ? MS_RDONLY : 0);
    return mount("rocetune-faults", dir_.c_str(), "tmpfs", flags, "size=4m,mode=0700") == 0;
  }

 private:
  std::string dir_;
  std::string error_;
};

// Fills the filesystem of `path` with one file; returns the bytes written.
int64_t Fill(const std::string& path) {
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  if (fd < 0) return -1;
  std::string block(64 * 1024, 'x');
  int64_t total = 0;
  while (true) {
    ssize_t n = write(fd, block.data(), block.size());
    if (n <= 0) break;
    total += n;
  }
  // Small writes until not even a byte fits.
  while (write(fd, "x", 1) == 1) ++total;
  close(fd);
  return total;
}

int AuditRows(Env& env) {
  grpc::ClientContext ctx;
  ctx.AddMetadata("rocetune-actor", "e2e-test");
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  v1::VerifyAuditResponse resp;
  if (!env.admin().VerifyAudit(&ctx, v1::VerifyAuditRequest(), &resp).ok()) return -1;
  return static_cast<int>(resp.rows());
}

std::string Policy(const std::string& description) {
  return absl::StrCat(R"(name: "full"
description: ")",
                      description, R"("
selector { match_labels { key: "role" value: "trainer" } }
objective { metric: PROBE_RTT_P99 }
knobs { parameter: "rpg_time_reset" min: 100 max: 3000 step: 10 }
tuner { kind: FIXED fixed { key: "rpg_time_reset" value: 300 } }
rollout { canary_fraction: 0.25 min_canary_hosts: 2 bake_seconds: 30 baseline_seconds: 1
          looks: 1 stages: [1.0] rack_label: "tor" }
guard { max_p99_regression: 0.5 confidence: 0.995 min_samples: 50 min_rack_pairs: 2
        pass_max_ucb_regression: 0.5 max_hold_seconds: 60 }
approval { approvers: 1 }
)");
}

struct Snapshot {
  int audit_rows = 0;
  size_t changes = 0;
  std::string policies;
  std::string h0_desired;
};

Snapshot Take(Env& env) {
  Snapshot s;
  s.audit_rows = AuditRows(env);
  s.changes = ListAllChanges(env).size();
  env.Ctl({"policy", "history", "full"}, "carol", &s.policies);
  for (const v1::HostInfo& h : env.Hosts()) {
    if (h.host_id() == "h0") s.h0_desired = h.desired_version();
  }
  return s;
}

// Every mutating call fails with a clear status; nothing changes; reads work.
void ExpectRefusedAndReadable(Env& env, const std::string& why, int* refused, int* half_written) {
  SCOPED_TRACE(why);
  const Snapshot before = Take(env);
  std::string out;
  const std::vector<std::vector<std::string>> mutating = {
      {"policy", "apply", env.WriteFile(absl::StrCat("p-", why, ".textproto"), Policy(why))},
      {"change", "propose", "full", "rpg_time_reset=700", "--reason=full"},
      {"push", "h0", "mlx5_0", "rpg_time_reset=800", "--reason=full"},
  };
  for (const auto& args : mutating) {
    const int rc = env.Ctl(args, "alice", &out);
    EXPECT_EQ(rc, 1) << args[0] << " " << args[1] << ": " << out;
    EXPECT_THAT(out, AnyOf(HasSubstr("RESOURCE_EXHAUSTED"), HasSubstr("UNAVAILABLE"),
                           HasSubstr("FAILED_PRECONDITION"), HasSubstr("INTERNAL")))
        << out;
    EXPECT_THAT(out, AnyOf(HasSubstr("full"), HasSubstr("read-only"), HasSubstr("readonly")))
        << "the status names the cause: " << out;
    *refused += rc == 1;
  }
  const Snapshot after = Take(env);
  *half_written += after.audit_rows != before.audit_rows;
  *half_written += after.changes != before.changes;
  *half_written += after.policies != before.policies;
  *half_written += after.h0_desired != before.h0_desired;
  EXPECT_EQ(after.audit_rows, before.audit_rows);
  EXPECT_EQ(after.changes, before.changes);
  EXPECT_EQ(after.policies, before.policies);
  EXPECT_EQ(after.h0_desired, before.h0_desired);
  for (const std::vector<std::string>& read : std::vector<std::vector<std::string>>{
           {"hosts"}, {"policy", "list"}, {"change", "list"}, {"audit"}, {"audit", "verify"}}) {
    EXPECT_EQ(env.Ctl(read, "carol", &out), 0) << read[0] << ": " << out;
  }
}

TEST(ControllerStateDirE2E, FullThenReadOnlyRefusesWritesKeepsReads) {
  EnvOptions opt;
  opt.scenario = "sim/scenarios/allreduce_8_hosts_large_messages.textproto";
  opt.sets = {"topology.hosts_per_tor=2"};
  opt.expect_hosts = 8;
  opt.probe_peers = 4;
  Env env(opt);
  TmpfsMount tmpfs(absl::StrCat(env.dir(), "/controller"));
  if (!tmpfs.error().empty()) GTEST_SKIP() << "no tmpfs for the state dir: " << tmpfs.error();
  ASSERT_TRUE(env.Start()) << env.ControllerLog() << env.FabricLog();
  std::string out;
  ASSERT_EQ(
      env.Ctl({"policy", "apply", env.WriteFile("p0.textproto", Policy("v1"))}, "alice", &out), 0)
      << out;
  int refused = 0, half_written = 0;

  // 1. Full.
  const std::string filler = absl::StrCat(env.dir(), "/controller/filler");
  ASSERT_GT(Fill(filler), 0);
  ExpectRefusedAndReadable(env, "full", &refused, &half_written);
  unlink(filler.c_str());
  ASSERT_EQ(
      env.Ctl({"policy", "apply", env.WriteFile("p1.textproto", Policy("v2"))}, "alice", &out), 0)
      << "space is back: " << out;

  // 2. Read-only. A filesystem with files open for writing cannot be
  // remounted read-only, so this is the restart case: the controller, killed,
  // comes back on a read-only state dir. It refuses to start, naming the
  // path and the cause, and changes nothing.
  env.KillController();
  ASSERT_TRUE(tmpfs.Remount(true)) << strerror(errno);
  const int port = env.port();
  const int rc = testing::RunCommand(
      testing::BuiltBinary("controller/rocetune-controller"),
      {absl::StrCat("--listen=127.0.0.1:", port), "--metrics_address=127.0.0.1:0",
       "--insecure_loopback", absl::StrCat("--state_dir=", env.dir(), "/controller")},
      &out, absl::Seconds(20));
  EXPECT_NE(rc, 0) << out;
  EXPECT_THAT(out, HasSubstr("Read-only file system")) << out;
  EXPECT_THAT(out, HasSubstr(absl::StrCat(env.dir(), "/controller"))) << out;
  refused += rc != 0;
  ASSERT_TRUE(tmpfs.Remount(false)) << strerror(errno);
  ASSERT_TRUE(env.StartController()) << env.ControllerLog();
  ASSERT_EQ(env.Ctl({"policy", "show", "full"}, "carol", &out), 0) << out;
  EXPECT_THAT(out, HasSubstr("v2")) << "what was stored before survives: " << out;
  ASSERT_EQ(
      env.Ctl({"policy", "apply", env.WriteFile("p2.textproto", Policy("v3"))}, "alice", &out), 0)
      << "writable again: " << out;
  EXPECT_EQ(env.Ctl({"audit", "verify"}, "carol", &out), 0) << out;
  std::printf("FAULT state_dir full+readonly mutating_calls_refused=%d half_written=%d\n", refused,
              half_written);
}

// An ext4 filesystem in a file, on a loop device, mounted on `dir` with
// errors=remount-ro for the test's lifetime. A mount with files open for
// writing cannot be remounted read-only, but an ext4 error can make it so
// underneath them (as a failing disk would): TriggerError() asks the kernel
// to act as if it found one (/sys/fs/ext4/<dev>/trigger_fs_error).
class Ext4LoopMount {
 public:
  Ext4LoopMount(std::string image, std::string dir)
      : image_(std::move(image)), dir_(std::move(dir)) {
    mkdir(dir_.c_str(), 0700);
    std::string out;
    if (testing::RunCommand("/usr/bin/truncate", {"-s", "64M", image_}, &out, absl::Seconds(10)) !=
            0 ||
        testing::RunCommand("/usr/sbin/mkfs.ext4", {"-q", "-F", image_}, &out, absl::Seconds(30)) !=
            0) {
      error_ = absl::StrCat("mkfs.ext4 ", image_, ": ", out);
      return;
    }
    if (testing::RunCommand("/usr/sbin/losetup", {"-f", "--show", image_}, &out,
                            absl::Seconds(10)) != 0) {
      error_ = absl::StrCat("losetup: ", out);
      return;
    }
    loop_ = std::string(absl::StripAsciiWhitespace(out));
    if (!Mount()) error_ = absl::StrCat("mount ", loop_, " on ", dir_, ": ", strerror(errno));
  }
  ~Ext4LoopMount() {
    if (mounted_) umount2(dir_.c_str(), MNT_DETACH);
    std::string out;
    if (!loop_.empty())
      testing::RunCommand("/usr/sbin/losetup", {"-d", loop_}, &out, absl::Seconds(10));
    unlink(image_.c_str());
  }
  const std::string& error() const { return error_; }
  bool TriggerError() {
    const std::string dev = loop_.substr(loop_.rfind('/') + 1);
    std::ofstream f(absl::StrCat("/sys/fs/ext4/", dev, "/trigger_fs_error"));
    f << "1\n";
    f.flush();
    return static_cast<bool>(f);
  }
  // Whether creating a file there fails with EROFS (the mount flags may
  // still say "rw" after an ext4 error).
  bool ReadOnly() const {
    const std::string probe = absl::StrCat(dir_, "/.test-probe");
    const int fd = open(probe.c_str(), O_WRONLY | O_CREAT, 0600);
    if (fd >= 0) {
      close(fd);
      unlink(probe.c_str());
      return false;
    }
    return errno == EROFS;
  }
  // Unmounts (nothing may hold files there), checks the filesystem and mounts
  // it again read-write. Returns what e2fsck said.
  bool Repair(std::string* out) {
    if (umount2(dir_.c_str(), 0) != 0) {
      *out = absl::StrCat("umount ", dir_, ": ", strerror(errno));
      return false;
    }
    mounted_ = false;
    // 0: clean, 1: errors corrected.
    const int rc =
        testing::RunCommand("/usr/sbin/e2fsck", {"-f", "-y", loop_}, out, absl::Seconds(60));
    if (rc != 0 && rc != 1) return false;
    return Mount();
  }

 private:
  bool Mount() {
    mounted_ = mount(loop_.c_str(), dir_.c_str(), "ext4", 0, "errors=remount-ro") == 0;
    return mounted_;
  }
  std::string image_;
  std::string dir_;
  std::string loop_;
  std::string error_;
  bool mounted_ = false;
};

// The state dir turns read-only underneath a running controller (an ext4
// error remounts it so). Mutating calls fail with a status naming the
// database and the cause, nothing is half-written, reads are served. After
// the controller is stopped and the filesystem checked and mounted again,
// everything it had confirmed is there and the audit chain verifies.
TEST(ControllerStateDirE2E, ReadOnlyUnderARunningControllerRefusesWritesKeepsReads) {
  EnvOptions opt;
  opt.scenario = "sim/scenarios/allreduce_8_hosts_large_messages.textproto";
  opt.sets = {"topology.hosts_per_tor=2"};
  opt.expect_hosts = 8;
  opt.probe_peers = 4;
  Env env(opt);
  Ext4LoopMount disk(absl::StrCat(env.dir(), "/state.img"), absl::StrCat(env.dir(), "/controller"));
  if (!disk.error().empty())
    GTEST_SKIP() << "no loop-mounted ext4 for the state dir: " << disk.error();
  ASSERT_TRUE(env.Start()) << env.ControllerLog() << env.FabricLog();
  std::string out;
  ASSERT_EQ(
      env.Ctl({"policy", "apply", env.WriteFile("p0.textproto", Policy("v1"))}, "alice", &out), 0)
      << out;
  // The store commits with synchronous=NORMAL (WAL): durable across a
  // process crash, not across a disk failing before the next checkpoint. The
  // kernel's writeback is flushed first so that this test checks the running
  // controller's behaviour, not that.
  sync();
  const Snapshot confirmed = Take(env);
  ASSERT_GT(confirmed.audit_rows, 0);
  ASSERT_TRUE(disk.TriggerError());
  ASSERT_TRUE(disk.ReadOnly()) << "the ext4 error did not remount the state dir read-only";
  int refused = 0, half_written = 0;
  ExpectRefusedAndReadable(env, "readonly", &refused, &half_written);
  // The status names the database and the SQLite error.
  env.Ctl({"change", "propose", "full", "rpg_time_reset=710", "--reason=ro"}, "alice", &out);
  EXPECT_THAT(out, HasSubstr(absl::StrCat(env.dir(), "/controller"))) << out;
  EXPECT_THAT(out, HasSubstr("is read-only: Read-only file system")) << out;
  // Writable again: stop the controller, check the filesystem, remount.
  env.KillController();
  ASSERT_TRUE(disk.Repair(&out)) << out;
  ASSERT_TRUE(env.StartController()) << env.ControllerLog();
  const Snapshot after = Take(env);
  EXPECT_EQ(after.audit_rows, confirmed.audit_rows) << "audit rows lost or half-written";
  EXPECT_EQ(after.changes, confirmed.changes);
  EXPECT_EQ(after.policies, confirmed.policies);
  EXPECT_EQ(env.Ctl({"audit", "verify"}, "carol", &out), 0) << out;
  ASSERT_EQ(
      env.Ctl({"policy", "apply", env.WriteFile("p1.textproto", Policy("v2"))}, "alice", &out), 0)
      << "writable again: " << out;
  std::printf(
      "FAULT state_dir readonly_while_running mutating_calls_refused=%d half_written=%d "
      "audit_rows=%d\n",
      refused, half_written, after.audit_rows);
}

}  // namespace
}  // namespace rocetune::e2e
