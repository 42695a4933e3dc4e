#!/bin/bash
# The Debian packages, built from this build directory's binaries by CPack (no
# rebuild), then:
#  - lintian passes at warning level and above (overrides carry their reasons);
#  - each package is extracted into one scratch root and every expected path is
#    there with its mode; every file under /etc is a conffile; the example
#    policies and everything in deploy/grafana and deploy/prometheus ship
#    under /usr/share/rocetune/;
#  - the units verify clean in that root and sysusers/tmpfiles create the users
#    and state directories there;
#  - the packaged binaries run with the packaged configuration files: the
#    controller (mutual TLS, roles file) becomes ready, an agent connects to it
#    over TLS and the packaged rocetunectl lists it;
#  - the job signal's packages: a C program built against the packaged header
#    and link symlink reports steps through the packaged library to that
#    agent's job socket, and the agent counts them; the packaged MPI wrapper
#    defines the calls it times.
# usage: package_test.sh SOURCE_DIR BINARY_DIR
set -euo pipefail
src=$1
bin=$2
for tool in cpack dpkg-deb dpkg-architecture systemd-analyze systemd-sysusers systemd-tmpfiles openssl \
  cc curl nm; do
  command -v "$tool" >/dev/null || { echo "SKIP: $tool not installed"; exit 77; }
done
[ -f "$bin/CPackConfig.cmake" ] || { echo "FAIL: $bin/CPackConfig.cmake missing (configure first)"; exit 1; }

work=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

# 1. Build the packages.
(cd "$bin" && cpack --config CPackConfig.cmake -B "$work/pk" >"$work/cpack.log" 2>&1) ||
  { echo "FAIL: cpack"; cat "$work/cpack.log"; exit 1; }
mapfile -t debs < <(ls "$work"/pk/*.deb)
names=$(for d in "${debs[@]}"; do dpkg-deb -f "$d" Package; done | sort | tr '\n' ' ')
want="librocetune-job-dev librocetune-job1 "
# The MPI wrapper is built (and packaged) where Open MPI's C bindings were found.
[ -e "$bin/jobsignal/librocetune-pmpi.so.1.0.0" ] && want="${want}librocetune-pmpi1 "
want="${want}rocetune-agent rocetune-controller rocetunectl "
[ "$names" = "$want" ] || { echo "FAIL: packages built: [$names], want [$want]"; exit 1; }
echo "ok: built ${debs[*]##*/}"

# 2. lintian.
if command -v lintian >/dev/null; then
  # lintian leaves its ELF caches (mldbm-elf-*) in TMPDIR: keep them in $work, removed below.
  mkdir -p "$work/tmp"
  if out=$(TMPDIR="$work/tmp" lintian --fail-on error,warning "${debs[@]}" 2>&1); then
    echo "ok: lintian clean at warning level ($(grep -c '^[EW]:' <<<"$out" || true) tags)"
  else
    fail "lintian: $out"
  fi
else
  fail "lintian not installed (scripts/install-deps installs it)"
fi

# 3. Contents.
root=$work/root
mkdir -p "$root"
for d in "${debs[@]}"; do dpkg-deb -x "$d" "$root"; done
expect() {  # expect MODE PATH...
  local mode=$1
  shift
  for p in "$@"; do
    if [ ! -e "$root/$p" ]; then
      fail "missing /$p"
    elif [ "$(stat -c %a "$root/$p")" != "$mode" ]; then
      fail "/$p has mode $(stat -c %a "$root/$p"), want $mode"
    fi
  done
}
expect 755 usr/bin/rocetune-agent usr/bin/rocetune-controller usr/bin/rocetunectl \
  usr/share/rocetune/pki/make-dev-pki.sh
for p in rocetune-agent rocetune-controller; do
  expect 644 "lib/systemd/system/$p.service" "usr/lib/sysusers.d/$p.conf" \
    "usr/lib/tmpfiles.d/$p.conf" "etc/default/$p" "usr/share/man/man8/$p.8.gz" \
    "usr/share/doc/$p/operations.md"
done
multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
expect 644 "usr/lib/$multiarch/librocetune-job.so.1.0.0" usr/include/rocetune_job.h \
  usr/share/doc/librocetune-job-dev/job-signal.md \
  usr/share/doc/librocetune-job-dev/examples/report_steps.py
[ "$(readlink "$root/usr/lib/$multiarch/librocetune-job.so.1")" = librocetune-job.so.1.0.0 ] ||
  fail "librocetune-job.so.1 is not a link to librocetune-job.so.1.0.0"
[ "$(readlink "$root/usr/lib/$multiarch/librocetune-job.so")" = librocetune-job.so.1 ] ||
  fail "librocetune-job.so (librocetune-job-dev) is not a link to librocetune-job.so.1"
[[ "$want" == *librocetune-pmpi1* ]] && expect 644 "usr/lib/$multiarch/librocetune-pmpi.so.1.0.0"
expect 644 etc/rocetune/agent.textproto etc/rocetune/controller.textproto \
  etc/rocetune/roles.textproto usr/share/man/man1/rocetunectl.1.gz
for p in rocetune-agent rocetune-controller rocetunectl; do
  expect 644 "usr/share/doc/$p/copyright" "usr/share/doc/$p/changelog.Debian.gz" \
    "usr/share/lintian/overrides/$p"
done
for p in $want; do
  [[ "$p" == rocetune* ]] ||
    expect 644 "usr/share/doc/$p/copyright" "usr/share/doc/$p/changelog.Debian.gz"
done
# A shared library's package says which package provides its soname, and
# refreshes the linker cache.
for d in "${debs[@]}"; do
  pkg=$(dpkg-deb -f "$d" Package)
  case $pkg in
    librocetune-job1 | librocetune-pmpi1)
      dpkg-deb -e "$d" "$work/shlibs-$pkg"
      soname=${pkg%1}
      grep -q "^$soname 1 $pkg (>= " "$work/shlibs-$pkg/shlibs" 2>/dev/null ||
        fail "$pkg: no shlibs line for $soname.so.1 asking for this version or later"
      grep -q 'ldconfig' "$work/shlibs-$pkg/triggers" 2>/dev/null ||
        fail "$pkg: no ldconfig trigger"
      ;;
  esac
done
# The man pages are the binaries' own flags.
zcat "$root/usr/share/man/man8/rocetune-agent.8.gz" | grep -q 'drift_interval' ||
  fail "rocetune-agent(8) does not list --drift_interval"
# Every /etc file is a conffile of the package that ships it.
for d in "${debs[@]}"; do
  pkg=$(dpkg-deb -f "$d" Package)
  dpkg-deb -e "$d" "$work/ctl-$pkg"
  etc=$(dpkg-deb -c "$d" | awk '$1 !~ /^d/ { print substr($6, 2) }' | grep '^/etc/' | sort || true)
  conf=$(sort "$work/ctl-$pkg/conffiles" 2>/dev/null || true)
  [ "$etc" = "$conf" ] || fail "$pkg: /etc files [$etc] but conffiles [$conf]"
done
# Shipped trees: policies, examples, dashboards, rules (whatever the source has).
shipped() {  # shipped SOURCE_DIR DEST_DIR [find args]
  local from=$1 to=$2 n=0
  shift 2
  [ -d "$from" ] || return 0
  while IFS= read -r f; do
    n=$((n + 1))
    cmp -s "$from/$f" "$root/$to/$f" || fail "$from/$f is not shipped as /$to/$f"
  done < <(cd "$from" && find . -type f "$@" | sed 's|^\./||')
  echo "ok: $n file(s) of ${from#"$src"/} ship under /$to"
}
shipped "$src/policies" usr/share/rocetune/policies -name '*.textproto'
shipped "$src/deploy/examples" usr/share/rocetune/examples
shipped "$src/deploy/grafana" usr/share/rocetune/grafana
shipped "$src/deploy/prometheus" usr/share/rocetune/prometheus
echo "package contents:"
for d in "${debs[@]}"; do
  echo "  $(dpkg-deb -f "$d" Package) ($(stat -c %s "$d") bytes):"
  dpkg-deb -c "$d" | awk '$1 !~ /^d/ { print "    " substr($6, 2) }'
done

# 4. The units in the scratch root.
host_units=/usr/lib/systemd/system
[ -e "$host_units/sysinit.target" ] || host_units=/lib/systemd/system
mkdir -p "$root/usr/lib/systemd/system"
cp "$host_units"/*.target "$host_units"/*.slice "$root/usr/lib/systemd/system/"
for p in rocetune-agent rocetune-controller; do
  out=$(systemd-analyze verify --man=no --root="$root" "$p.service" 2>&1 || true)
  [ -z "$out" ] && echo "ok: systemd-analyze verify $p.service in the scratch root: clean" ||
    fail "systemd-analyze verify $p.service: $out"
done
systemd-sysusers --root="$root" >/dev/null 2>&1 || fail "systemd-sysusers in the scratch root"
systemd-tmpfiles --root="$root" --create >/dev/null 2>&1 || fail "systemd-tmpfiles in the scratch root"
for p in rocetune-agent rocetune-controller; do
  grep -q "^$p:" "$root/etc/passwd" || fail "no user $p after sysusers"
  owner=$(stat -c %U:%a "$root/var/lib/$p" 2>/dev/null || echo missing)
  uid=$(awk -F: -v u="$p" '$1 == u { print $3 }' "$root/etc/passwd")
  [ "$(stat -c %u:%a "$root/var/lib/$p" 2>/dev/null)" = "$uid:750" ] ||
    fail "/var/lib/$p is $owner, want $p (uid $uid) mode 750"
done
echo "ok: sysusers/tmpfiles made the users and state directories"

# 5. The packaged binaries with the packaged configuration files. Development
# certificates from the packaged script stand in for the fleet's.
pki=$work/pki
bash "$root/usr/share/rocetune/pki/make-dev-pki.sh" -o "$pki" -a node-01 -u alice:operator \
  >"$work/pki.log" 2>&1 || { fail "make-dev-pki.sh"; cat "$work/pki.log"; }
"$root/usr/bin/rocetune-controller" --config="$root/etc/rocetune/controller.textproto" \
  --listen=127.0.0.1:0 --metrics_address=127.0.0.1:0 --state_dir="$work/controller" \
  --tls_cert="$pki/controller.pem" --tls_key="$pki/controller.key" --tls_ca="$pki/ca.pem" \
  --roles_file="$root/etc/rocetune/roles.textproto" --ready_file="$work/ready" \
  >"$work/controller.log" 2>&1 &
pids+=($!)
for _ in $(seq 100); do [ -s "$work/ready" ] && break; sleep 0.1; done
port=$(sed -n 's/.*"grpc_port":\([0-9]*\).*/\1/p' "$work/ready" 2>/dev/null || true)
if [ -z "$port" ]; then
  fail "the packaged controller with /etc/rocetune/controller.textproto did not start"
  cat "$work/controller.log"
else
  echo "ok: packaged controller ready with the packaged configuration (mutual TLS, roles)"
  fixture=$work/host
  cp -a "$src/tests/fixtures/hosts/mlx5_ofed" "$fixture"
  "$root/usr/bin/rocetune-agent" --config="$root/etc/rocetune/agent.textproto" \
    --controller="localhost:$port" --metrics_address=127.0.0.1:0 --state_dir="$work/agent" \
    --tls_cert="$pki/agent-node-01.pem" --tls_key="$pki/agent-node-01.key" \
    --tls_ca="$pki/ca.pem" --sysfs_root="$fixture/sys" --debugfs_root="$fixture/debug" \
    --counter_source=sysfs --probe=none --job_socket="$work/job.sock" \
    --ready_file="$work/agent.ready" >"$work/agent.log" 2>&1 &
  pids+=($!)
  listed=""
  for _ in $(seq 100); do
    listed=$("$root/usr/bin/rocetunectl" --controller="localhost:$port" \
      --tls_cert="$pki/user-alice.pem" --tls_key="$pki/user-alice.key" --tls_ca="$pki/ca.pem" \
      hosts 2>&1 || true)
    grep -q '^node-01' <<<"$listed" && break
    sleep 0.2
  done
  if grep -q '^node-01' <<<"$listed"; then
    echo "ok: packaged agent (packaged agent.textproto) connected over mutual TLS; rocetunectl hosts:"
    sed 's/^/    /' <<<"$listed"
  else
    fail "the packaged agent did not show up in rocetunectl hosts: $listed"
    cat "$work/agent.log"
  fi

  # 6. A job built against the packaged header and library (-lrocetune-job
  # through the -dev package's link) reports five steps to the agent.
  cat >"$work/steps.c" <<'C'
#include <stdio.h>
#include <rocetune_job.h>
int main(int argc, char** argv) {
  rocetune_job* h = rocetune_job_open(argv[1], "pkg-test");
  if (h == NULL) return 2;
  int failed = 0;
  for (int i = 0; i < 5; ++i) failed += rocetune_job_report(h, "step", 0.01 * (i + 1), 0, 0) != 0;
  printf("sent %llu dropped %llu\n", (unsigned long long)rocetune_job_sent(h),
         (unsigned long long)rocetune_job_dropped(h));
  rocetune_job_close(h);
  return failed == 0 ? 0 : 1;
}
C
  libdir=$root/usr/lib/$multiarch
  if ! cc -Wall -Werror -I"$root/usr/include" "$work/steps.c" -L"$libdir" -lrocetune-job \
    -o "$work/steps" 2>"$work/cc.log"; then
    fail "a C program does not build against the packaged header and library: $(cat "$work/cc.log")"
  else
    for _ in $(seq 100); do [ -S "$work/job.sock" ] && break; sleep 0.1; done
    sent=$(LD_LIBRARY_PATH=$libdir "$work/steps" "$work/job.sock" 2>&1) ||
      fail "the job program against the packaged library: $sent"
    ldd_out=$(LD_LIBRARY_PATH=$libdir ldd "$work/steps")
    grep -q "librocetune-job.so.1 => $libdir/" <<<"$ldd_out" ||
      fail "the job program did not load the packaged library: $ldd_out"
    mport=$(sed -n 's/.*"metrics_port":\([0-9]*\).*/\1/p' "$work/agent.ready" 2>/dev/null || true)
    events=""
    for _ in $(seq 50); do
      events=$(curl -sf "http://127.0.0.1:$mport/metrics" 2>/dev/null |
        sed -n 's/^rocetune_agent_job_events_total{.*job="pkg-test".*op="step".*} \([0-9]*\)$/\1/p' ||
        true)
      [ "$events" = 5 ] && break
      sleep 0.2
    done
    if [ "$events" = 5 ]; then
      echo "ok: a job built against librocetune-job-dev reported 5 steps ($sent) and the agent counted 5"
    else
      fail "the agent counted [$events] step events from the packaged library, want 5 ($sent)"
    fi
  fi
fi
if [[ "$want" == *librocetune-pmpi1* ]]; then
  defined=$(nm -D --defined-only "$root/usr/lib/$multiarch/librocetune-pmpi.so.1.0.0" |
    awk '{ print $3 }' | grep -E '^MPI_(Allreduce|Alltoall|Barrier)$' | sort | tr '\n' ' ' || true)
  [ "$defined" = "MPI_Allreduce MPI_Alltoall MPI_Barrier " ] &&
    echo "ok: the packaged MPI wrapper defines $defined" ||
    fail "the packaged MPI wrapper defines [$defined], want MPI_Allreduce MPI_Alltoall MPI_Barrier"
  # The job client compiled into it stays local: preloaded beside librocetune-job, it must not
  # replace that library's functions.
  leaked=$(nm -D --defined-only "$root/usr/lib/$multiarch/librocetune-pmpi.so.1.0.0" |
    awk '{ print $3 }' | grep -v '^MPI_' | tr '\n' ' ' || true)
  [ -z "$leaked" ] || fail "the packaged MPI wrapper exports more than MPI calls: $leaked"
fi

if [ "$failures" -ne 0 ]; then
  echo "$failures check(s) failed"
  exit 1
fi
echo "all package checks passed"
