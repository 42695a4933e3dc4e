#!/bin/bash
# The agent unit's least privilege, proven: the real rocetune-agent runs under
# setpriv with the unit's exact user, groups, capabilities (ambient,
# inheritable and bounding set) and no_new_privs, against root-owned copies of
# the mlx5 fixture trees with the kernel's modes (OFED sysfs parameter files
# 0644, counters 0444, debugfs mount 0700 and cc_params files 0600). A
# controller on loopback pushes a set with `rocetunectl push --wait`:
#  - with the unit's capabilities the set is written, read back and acked, on
#    both the OFED sysfs and the upstream debugfs layout;
#  - with no capabilities (same user) the push is NACKed with
#    PERMISSION_DENIED naming the file, and the file keeps its value;
#  - the CAP_NET_ADMIN requests (dcbnl RTM_SETDCB, ethtool ETHTOOL_STUNABLE)
#    pass the kernel's capability check with the unit's set and get EPERM
#    without it (net_admin_probe.py, on lo, changes nothing).
# usage: agent_privileges_test.sh SOURCE_DIR BINARY_DIR
set -euo pipefail
src=$1
bin=$2
unit=$src/systemd/rocetune-agent.service
agent=$bin/agent/rocetune-agent
controller=$bin/controller/rocetune-controller
ctl=$bin/cli/rocetunectl

[ "$(id -u)" -eq 0 ] || { echo "SKIP: needs root (root-owned trees, switching user)"; exit 77; }
command -v setpriv >/dev/null || { echo "SKIP: setpriv not installed (package util-linux)"; exit 77; }
for b in "$agent" "$controller" "$ctl"; do
  [ -x "$b" ] || { echo "FAIL: $b not built"; exit 1; }
done

work=$(mktemp -d)
chmod 0755 "$work"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

unit_value() { sed -n "s/^$1=//p" "$unit" | tail -n 1; }
# "CAP_DAC_OVERRIDE CAP_NET_ADMIN" -> "+dac_override,+net_admin"
setpriv_caps() {
  local out=""
  for c in $1; do
    c=${c#CAP_}
    out+=",+${c,,}"
  done
  echo "${out#,}"
}

# The unit's identity. The user exists once the package's sysusers.d entry has
# run; otherwise a free system uid/gid stands in (what matters to the kernel is
# a uid that is neither 0 nor the owner of any file in the trees).
user=$(unit_value User)
supplementary=$(unit_value SupplementaryGroups)
if uid=$(id -u "$user" 2>/dev/null); then
  gid=$(id -g "$user")
  groups_opt=--init-groups
  echo "identity: $user ($uid:$gid) and its groups"
else
  uid=64123
  while getent passwd "$uid" >/dev/null || getent group "$uid" >/dev/null; do uid=$((uid + 1)); done
  gid=$uid
  groups_opt=--clear-groups
  echo "identity: $user is not on this system; uid/gid $uid stands in"
fi
[ -z "$supplementary" ] || { echo "FAIL: the test does not model SupplementaryGroups=$supplementary"; exit 1; }
ambient=$(unit_value AmbientCapabilities)
bounding=$(unit_value CapabilityBoundingSet)
[ "$(unit_value NoNewPrivileges)" = yes ] || fail "the unit should set NoNewPrivileges=yes"
echo "unit capabilities: ambient [$ambient] bounding [$bounding]"
unit_caps=(--inh-caps="-all,$(setpriv_caps "$ambient")" --ambient-caps="-all,$(setpriv_caps "$ambient")"
           --bounding-set="-all,$(setpriv_caps "$bounding")")
no_caps=(--inh-caps=-all --bounding-set=-all)
as_unit() { setpriv --reuid="$uid" --regid="$gid" $groups_opt --no-new-privs "$@"; }

# A root-owned copy of fixture NAME with the kernel's modes.
make_tree() {
  local tree=$work/$2
  cp -a "$src/tests/fixtures/hosts/$1" "$tree"
  chown -R -h root:root "$tree"
  chmod 0755 "$tree"
  find "$tree/sys" -type d -exec chmod 0755 {} +
  find "$tree/sys" -type f -exec chmod 0444 {} +
  # OFED en_sysfs.c: S_IWUSR | S_IRUGO on a PF.
  find "$tree/sys" -type f -path '*/ecn/roce_[rn]p/*' -exec chmod 0644 {} +
  if [ -d "$tree/debug" ]; then
    find "$tree/debug" -type d -exec chmod 0755 {} +
    find "$tree/debug" -type f -exec chmod 0600 {} +
    chmod 0700 "$tree/debug"  # the debugfs mount point
  fi
  echo "$tree"
}

# The controller, as root on loopback (its own privileges are not under test).
"$controller" --listen=127.0.0.1:0 --metrics_address=127.0.0.1:0 --insecure_loopback \
  --state_dir="$work/controller" --ready_file="$work/ready" >"$work/controller.log" 2>&1 &
pids+=($!)
for _ in $(seq 100); do [ -s "$work/ready" ] && break; sleep 0.1; done
port=$(sed -n 's/.*"grpc_port":\([0-9]*\).*/\1/p' "$work/ready" 2>/dev/null || true)
[ -n "$port" ] || { echo "FAIL: controller did not start"; cat "$work/controller.log"; exit 1; }
ctl_run() { "$ctl" --controller="127.0.0.1:$port" --insecure_loopback --actor=alice --timeout=20s "$@"; }

# run_agent HOST TREE CAPS...: the agent as the unit's user; waits until the
# controller lists HOST as connected.
run_agent() {
  local host=$1 tree=$2
  shift 2
  local state=$work/state-$host
  mkdir -m 0750 "$state"
  chown "$uid:$gid" "$state"
  # setpriv itself, not the as_unit function: a function run with & is a
  # subshell, whose PID ($!) is not the agent's, and killing it orphaned the
  # agent (left running after the test).
  setpriv --reuid="$uid" --regid="$gid" $groups_opt --no-new-privs "$@" \
    "$agent" --host_id="$host" --controller="127.0.0.1:$port" --insecure_loopback \
    --metrics_address=127.0.0.1:0 --sysfs_root="$tree/sys" --debugfs_root="$tree/debug" \
    --state_dir="$state" --counter_source=sysfs --kernel_netdevs=off --probe=none \
    --sample_interval=200ms >"$work/agent-$host.log" 2>&1 &
  agent_pid=$!
  pids+=($agent_pid)
  for _ in $(seq 150); do
    if ctl_run hosts 2>/dev/null | grep -E "^$host[[:space:]]" | grep -q -i connected; then return 0; fi
    sleep 0.2
  done
  echo "FAIL: agent $host did not connect"
  cat "$work/agent-$host.log"
  return 1
}
stop_agent() {
  kill "$agent_pid" 2>/dev/null || true
  wait "$agent_pid" 2>/dev/null || true
  # Nothing of this agent may outlive the test.
  if pgrep -f -- "--state_dir=$work/state-$1( |\$)" >/dev/null; then
    fail "agent $1 still running after SIGTERM"
  fi
}

# check_push HOST FILE VALUE WANT(ack|nack): push rpg_ai_rate=VALUE to mlx5_0.
check_push() {
  local host=$1 file=$2 value=$3 want=$4 before out rc=0
  before=$(cat "$file")
  out=$(ctl_run push "$host" mlx5_0 "rpg_ai_rate=$value" --wait --reason=privileges 2>&1) || rc=$?
  local now
  now=$(tr -d '[:space:]' <"$file")
  if [ "$want" = ack ]; then
    if [ "$rc" -eq 0 ] && [ "$now" = "$value" ]; then
      echo "ok: $host: rpg_ai_rate=$value acked and in ${file#"$work"/}"
    else
      fail "$host: push rc=$rc, file holds $now (want $value): $out"
      cat "$work/agent-$host.log"
    fi
  else
    local denied=0
    [[ "$out" == *PERMISSION_DENIED* || "$out" == *"Permission denied"* ]] && denied=1
    # debugfs the agent may not look into: the agent reports layout none and
    # logs why; the controller then refuses the set before queueing it.
    if [[ "$out" == *"layout none"* ]] &&
       grep -q "Permission denied (debugfs is root-only; the agent needs CAP_DAC_OVERRIDE)" \
         "$work/agent-$host.log"; then
      denied=1
    fi
    if [ "$rc" -ne 0 ] && [ "$denied" -eq 1 ] &&
       [ "$now" = "$(tr -d '[:space:]' <<<"$before")" ]; then
      echo "ok: $host: refused without capabilities, file unchanged; rocetunectl said:"
      sed 's/^/    /' <<<"$out"
    else
      fail "$host: want a PERMISSION_DENIED refusal with the file unchanged; rc=$rc, file $now: $out"
      cat "$work/agent-$host.log"
    fi
  fi
}

# 1. OFED sysfs layout (root-owned 0644 parameter files).
ofed=$(make_tree mlx5_ofed ofed)
ofed_file=$ofed/sys/class/net/ens1f0np0/ecn/roce_rp/rpg_ai_rate
run_agent priv-ofed "$ofed" "${unit_caps[@]}" && {
  check_push priv-ofed "$ofed_file" 21 ack
  stop_agent priv-ofed
}
ofed2=$(make_tree mlx5_ofed ofed-nocaps)
run_agent priv-ofed-nocaps "$ofed2" "${no_caps[@]}" && {
  check_push priv-ofed-nocaps "$ofed2/sys/class/net/ens1f0np0/ecn/roce_rp/rpg_ai_rate" 22 nack
  stop_agent priv-ofed-nocaps
}

# 2. Upstream debugfs layout (0700 mount, 0600 cc_params files).
up=$(make_tree mlx5_upstream upstream)
run_agent priv-debugfs "$up" "${unit_caps[@]}" && {
  check_push priv-debugfs "$up/debug/mlx5/0000:3b:00.0/cc_params/rp_ai_rate" 23 ack
  stop_agent priv-debugfs
}
up2=$(make_tree mlx5_upstream upstream-nocaps)
run_agent priv-debugfs-nocaps "$up2" "${no_caps[@]}" && {
  check_push priv-debugfs-nocaps "$up2/debug/mlx5/0000:3b:00.0/cc_params/rp_ai_rate" 24 nack
  stop_agent priv-debugfs-nocaps
}

# 3. CAP_NET_ADMIN: dcbnl SET and ethtool STUNABLE pass the capability check.
# The system interpreter: a per-user one (pyenv shims) is not readable by the unit's user.
python=/usr/bin/python3
[ -x "$python" ] || python=$(command -v python3)
# A copy in the scratch dir: the checkout may sit below a directory the unit's user cannot enter.
install -m 0644 "$src/tests/systemd/net_admin_probe.py" "$work/net_admin_probe.py"
with=$(as_unit "${unit_caps[@]}" "$python" "$work/net_admin_probe.py")
without=$(as_unit "${no_caps[@]}" "$python" "$work/net_admin_probe.py")
if [ "$with" = "dcbnl_set=-95 ethtool_stunable=-95" ] && [ "$without" = "dcbnl_set=-1 ethtool_stunable=-1" ]; then
  echo "ok: dcbnl/ethtool SET with the unit's capabilities: $with (EOPNOTSUPP on lo); without: $without (EPERM)"
else
  fail "CAP_NET_ADMIN probe: with the unit's capabilities [$with], without [$without]"
fi

if [ "$failures" -ne 0 ]; then
  echo "$failures check(s) failed"
  exit 1
fi
echo "all privilege checks passed"
