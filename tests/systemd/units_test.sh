#!/bin/bash
# The shipped systemd units, checked without a running systemd:
#  - `systemd-analyze verify` passes with no diagnostic at all, against a
#    scratch root that holds the real binaries at their ExecStart paths (a
#    mutated copy with a misspelt key must produce a diagnostic, so the check
#    can fail);
#  - `systemd-analyze security --offline=true` exposure is at most the given
#    threshold for each unit;
#  - each daemon's default --state_dir is /var/lib/<its unit's StateDirectory>;
#  - the sysusers.d entry declares each unit's User= and Group=, and the
#    tmpfiles.d entry creates the state directory owned by that user with the
#    unit's StateDirectoryMode.
# usage: units_test.sh SOURCE_DIR BINARY_DIR CONTROLLER_MAX_EXPOSURE AGENT_MAX_EXPOSURE
set -euo pipefail
src=$1
bin=$2
declare -A max_exposure=([rocetune-controller]=$3 [rocetune-agent]=$4)
declare -A binary=([rocetune-controller]=controller/rocetune-controller
                   [rocetune-agent]=agent/rocetune-agent)

for tool in systemd-analyze systemd-sysusers systemd-tmpfiles; do
  command -v "$tool" >/dev/null || { echo "SKIP: $tool not installed (package systemd)"; exit 77; }
done
host_units=/usr/lib/systemd/system
[ -e "$host_units/sysinit.target" ] || host_units=/lib/systemd/system

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

# unit_value UNIT_FILE KEY: the last value of KEY= in UNIT_FILE.
unit_value() { sed -n "s/^$2=//p" "$1" | tail -n 1; }

# A scratch root: the host's targets and slices (what the units' dependencies
# resolve to), the units, sysusers/tmpfiles entries and the built binaries.
root=$work/root
mkdir -p "$root/usr/bin" "$root/usr/lib/systemd/system" "$root/usr/lib/sysusers.d" \
  "$root/usr/lib/tmpfiles.d" "$root/etc"
cp "$host_units"/*.target "$host_units"/*.slice "$root/usr/lib/systemd/system/"
for d in rocetune-controller rocetune-agent; do
  [ -x "$bin/${binary[$d]}" ] || { echo "FAIL: $bin/${binary[$d]} not built"; exit 1; }
  cp "$bin/${binary[$d]}" "$root/usr/bin/$d"
  cp "$src/systemd/$d.service" "$root/usr/lib/systemd/system/"
  cp "$src/systemd/$d.sysusers.conf" "$root/usr/lib/sysusers.d/$d.conf"
  cp "$src/systemd/$d.tmpfiles.conf" "$root/usr/lib/tmpfiles.d/$d.conf"
done

# 1. verify: no diagnostic at all (verify exits 0 on unknown keys, so its
# output is what counts).
for d in rocetune-controller rocetune-agent; do
  out=$(systemd-analyze verify --man=no --root="$root" "$d.service" 2>&1) ||
    fail "systemd-analyze verify $d.service exited $?: $out"
  [ -z "$out" ] && echo "ok: systemd-analyze verify $d.service: clean" ||
    fail "systemd-analyze verify $d.service: $out"
done
sed 's/^ProtectClock=/ProtectClok=/' "$root/usr/lib/systemd/system/rocetune-agent.service" \
  >"$root/usr/lib/systemd/system/rocetune-mutant.service"
out=$(systemd-analyze verify --man=no --root="$root" rocetune-mutant.service 2>&1 || true)
if [[ "$out" == *ProtectClok* ]]; then
  echo "ok: verify reports a misspelt key in a mutated unit"
else
  fail "verify said nothing about a misspelt key (got: $out)"
fi
rm "$root/usr/lib/systemd/system/rocetune-mutant.service"

# 2. security: the overall exposure against each unit's threshold.
for d in rocetune-controller rocetune-agent; do
  out=$(systemd-analyze security --offline=true --root="$root" "$d.service" 2>&1) || true
  figure=$(sed -n 's/.*Overall exposure level for [^:]*: \([0-9.]*\).*/\1/p' <<<"$out")
  if [ -z "$figure" ]; then
    fail "no exposure figure for $d.service: $out"
  elif awk -v f="$figure" -v m="${max_exposure[$d]}" 'BEGIN { exit !(f <= m) }'; then
    echo "ok: $d.service exposure $figure (at most ${max_exposure[$d]})"
  else
    fail "$d.service exposure $figure, over ${max_exposure[$d]}:"
    grep '✗' <<<"$out" || true
  fi
done

# 3. --state_dir default == /var/lib/<StateDirectory>, and ExecStart does not
# override it (the unit relies on the default).
for d in rocetune-controller rocetune-agent; do
  unit=$src/systemd/$d.service
  state=/var/lib/$(unit_value "$unit" StateDirectory)
  default=$( ("$bin/${binary[$d]}" --help 2>&1 || true) | tr '\n' ' ' |
    grep -o -- '--state_dir ([^"]*default: "[^"]*"' | sed 's/.*default: "//; s/"$//' || true)
  if [ "$default" = "$state" ]; then
    echo "ok: $d --state_dir default $default is the unit's StateDirectory"
  else
    fail "$d --state_dir default \"$default\" but the unit's StateDirectory is $state"
  fi
  if grep -q -- '--state_dir' <<<"$(unit_value "$unit" ExecStart)"; then
    fail "$d.service ExecStart overrides --state_dir"
  fi
done

# 4. sysusers and tmpfiles in the scratch root.
systemd-sysusers --root="$root" >/dev/null 2>&1 || fail "systemd-sysusers failed"
systemd-tmpfiles --root="$root" --create >/dev/null 2>&1 || fail "systemd-tmpfiles --create failed"
for d in rocetune-controller rocetune-agent; do
  unit=$src/systemd/$d.service
  user=$(unit_value "$unit" User)
  group=$(unit_value "$unit" Group)
  uid=$(awk -F: -v u="$user" '$1 == u { print $3 }' "$root/etc/passwd")
  gid=$(awk -F: -v g="$group" '$1 == g { print $3 }' "$root/etc/group")
  if [ -z "$uid" ] || [ -z "$gid" ]; then
    fail "sysusers.d does not declare $d.service's User=$user / Group=$group"
    continue
  fi
  [ "$uid" -ne 0 ] || fail "$d runs as uid 0"
  dir=$root/var/lib/$(unit_value "$unit" StateDirectory)
  want_mode=$(unit_value "$unit" StateDirectoryMode)
  got=$(stat -c '%u:%g %a' "$dir" 2>/dev/null || echo missing)
  if [ "$got" = "$uid:$gid ${want_mode#0}" ]; then
    echo "ok: $d: user $user ($uid), state dir ${dir#"$root"} $got"
  else
    fail "$d: tmpfiles made ${dir#"$root"} $got, want $uid:$gid ${want_mode#0}"
  fi
done

if [ "$failures" -ne 0 ]; then
  echo "$failures check(s) failed"
  exit 1
fi
echo "all unit checks passed"
