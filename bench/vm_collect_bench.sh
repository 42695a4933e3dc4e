#!/usr/bin/env bash
# agent_collect_bench on a real kernel: boots the Soft-RoCE guests of tests/vm/vm_harness.sh
# and, in guest a, runs agent_collect_bench --sysfs=/sys: the agent's round on rxe0 read
# through sysfs and through RDMA netlink statistics (both with the real ethtool ioctl on
# eth0), beside node_exporter's infiniband collector in the same run. Guest b only boots
# and powers off (the harness always starts two).
#
# node_exporter is the host's binary (the guest runs chrooted in the host's root). Two of
# them run in the same run:
#   - "mirror": --path.sysfs on a tmpfs tree whose files are bind mounts of the kernel's
#     rxe0 sysfs attributes, with a counters/ directory whose 21 PMA names are bind mounts
#     of rxe0's hw_counters files, and board_id / hca_type as plain files. node_exporter
#     1.5 stops at the first device without board_id or counters/ (rxe has neither) and
#     serves nothing; the mirror lets it do its whole job on kernel attributes, as on an
#     mlx5 host. The headline ratios (ratio_sysfs, ratio_netlink) are against it.
#   - "sys": --path.sysfs=/sys as is: the collector gives up early and serves no
#     infiniband series (node_exporter_sys_series=0); its cost is what it spends to
#     find that out (ratio_*_vs_sys).
#
# Usage: vm_collect_bench.sh [BUILD_DIR] [agent_collect_bench args...]
# Prints one "BENCH vm_collect_bench key=value ..." line. When the guests cannot boot
# (no qemu, no kernel package) or node_exporter is missing it prints
# "BENCH vm_collect_bench status=SKIPPED reason=..." and exits 77.
set -uo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/.." && pwd)"
BUILD="$(cd "${1:-$ROOT/build}" && pwd)" || exit 1
shift || true
BIN="$BUILD/bench/agent_collect_bench"
EXPORTER="${ROCETUNE_NODE_EXPORTER:-/usr/bin/prometheus-node-exporter}"

skip() {
  echo "vm_collect_bench: SKIP: $*" >&2
  echo "BENCH vm_collect_bench status=SKIPPED reason=\"$*\""
  exit 77
}

if [ ! -x "$BIN" ]; then
  echo "vm_collect_bench: $BIN not built: build target agent_collect_bench" >&2
  exit 1
fi
[ -x "$EXPORTER" ] || skip "node_exporter not found at $EXPORTER (Debian package prometheus-node-exporter; scripts/install-deps)"

prep_err="$(mktemp)"
"$ROOT/tests/vm/vm_harness.sh" prepare 2>"$prep_err"
rc=$?
if [ $rc -ne 0 ]; then
  reason="$(grep -m1 '^SKIP:' "$prep_err" | sed 's/^SKIP: //')"
  cat "$prep_err" >&2
  rm -f "$prep_err"
  [ $rc -eq 77 ] && skip "Soft-RoCE VM cannot boot: ${reason:-vm_harness.sh prepare skipped}"
  echo "vm_collect_bench: vm_harness.sh prepare failed (exit $rc)" >&2
  exit 1
fi
rm -f "$prep_err"

OUT="$(mktemp -d /tmp/rocetune-vm-bench.XXXXXX)"
trap 'rc=$?; if [ $rc -eq 0 ]; then rm -rf "$OUT"; else echo "guest files kept in $OUT" >&2; fi; exit $rc' EXIT

# Arguments for the binary, quoted for the guest script.
ARGS=""
for a in "$@"; do ARGS+=" $(printf '%q' "$a")"; done

cat >"$OUT/guest_a.sh" <<GUEST
set -u
M=/tmp/ne-sys
# PMA counter names node_exporter reads from ports/<p>/counters/.
PMA="port_xmit_data port_rcv_data port_xmit_packets port_rcv_packets unicast_xmit_packets
unicast_rcv_packets multicast_xmit_packets multicast_rcv_packets symbol_error
link_error_recovery link_downed port_rcv_errors port_rcv_remote_physical_errors
port_rcv_switch_relay_errors port_xmit_discards port_xmit_constraint_errors
port_rcv_constraint_errors local_link_integrity_errors excessive_buffer_overrun_errors
VL15_dropped port_xmit_wait"
bind() {  # bind SRC DST: DST shows the kernel attribute SRC (a symlink if mount fails)
  : >"\$2"
  mount --bind "\$1" "\$2" 2>/dev/null || { rm -f "\$2"; ln -s "\$1" "\$2"; echo "symlink \$2" >>"\$VM_OUT/mirror.log"; }
}
for dev in /sys/class/infiniband/*; do
  [ -e "\$dev" ] || continue
  d="\$(basename "\$dev")"
  real="\$(readlink -f "\$dev")"
  md="\$M/class/infiniband/\$d"
  mkdir -p "\$md"
  for f in "\$real"/*; do [ -f "\$f" ] && [ ! -L "\$f" ] && bind "\$f" "\$md/\$(basename "\$f")"; done
  [ -e "\$md/board_id" ] || echo "\$d" >"\$md/board_id"
  [ -e "\$md/hca_type" ] || echo "\$d" >"\$md/hca_type"
  for port in "\$real"/ports/*; do
    mp="\$md/ports/\$(basename "\$port")"
    mkdir -p "\$mp/counters"
    for f in "\$port"/*; do [ -f "\$f" ] && [ ! -L "\$f" ] && bind "\$f" "\$mp/\$(basename "\$f")"; done
    if [ -d "\$port/counters" ]; then
      for f in "\$port"/counters/*; do bind "\$f" "\$mp/counters/\$(basename "\$f")"; done
    else
      hw=(\$(ls "\$port/hw_counters" 2>/dev/null | grep -v '^lifespan\$'))
      [ \${#hw[@]} -gt 0 ] || continue
      i=0
      for n in \$PMA; do
        bind "\$port/hw_counters/\${hw[\$((i % \${#hw[@]}))]}" "\$mp/counters/\$n"
        i=\$((i + 1))
      done
    fi
  done
done
find "\$M" >"\$VM_OUT/mirror.txt" 2>&1
"$BIN" --sysfs=/sys --name=vm_collect_bench --node_exporter=$(printf '%q' "$EXPORTER") \
  --node_exporter_sysfs=mirror:\$M --node_exporter_sysfs=sys:/sys $ARGS \
  >"\$VM_OUT/bench.out" 2>"\$VM_OUT/bench.err"
GUEST
echo 'exit 0' >"$OUT/guest_b.sh"

start=$(date +%s)
# Boot, the mirror and the bench under TCG; the harness's default 240 s is for the tests.
export ROCETUNE_VM_TIMEOUT="${ROCETUNE_VM_TIMEOUT:-600}"
if ! "$ROOT/tests/vm/vm_harness.sh" run "$OUT" "$OUT/guest_a.sh" "$OUT/guest_b.sh"; then
  echo "vm_collect_bench: the guest run failed" >&2
  for f in a.log bench.err mirror.log; do
    [ -s "$OUT/$f" ] && { echo "--- $f" >&2; tail -n 40 "$OUT/$f" >&2; }
  done
  exit 1
fi
line="$(grep -m1 '^BENCH vm_collect_bench ' "$OUT/bench.out")" || {
  echo "vm_collect_bench: no BENCH line from the guest" >&2
  cat "$OUT/bench.err" >&2
  exit 1
}
echo "$line vm_seconds=$(($(date +%s) - start))"
