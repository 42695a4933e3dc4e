#!/usr/bin/env bash
# Issue 3's VM test: inside a Soft-RoCE guest, `rocetune-agent --once --output=json
# --sysfs_root=/sys` lists rxe0 with its port, netdev eth0, driver rxe and its
# hw_counters (sent_pkts, rcvd_pkts), reported under their canonical names
# (tx_packets, rx_packets; model/counter_names.cc). Both guests run it.
# Exit 77 (SKIP) only when qemu or the kernel
# package cannot be had.
# Usage: agent_discovery_vm_test.sh BUILD_DIR
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
BUILD="$(cd "${1:?usage: $0 BUILD_DIR}" && pwd)"
AGENT="$BUILD/agent/rocetune-agent"
if [ ! -x "$AGENT" ]; then
  echo "FAIL: $AGENT not built: build target rocetune-agent (ninja -C $BUILD rocetune-agent)" >&2
  exit 1
fi

"$HERE/vm_harness.sh" prepare || exit $?

OUT="$(mktemp -d /tmp/rocetune-vm-agent.XXXXXX)"
trap 'rc=$?; if [ $rc -eq 0 ]; then rm -rf "$OUT"; else echo "guest files kept in $OUT" >&2; fi; exit $rc' EXIT

cat >"$OUT/guest.sh" <<GUEST
set -u
"$AGENT" --once --output=json --sysfs_root=/sys --state_dir=/tmp/agent-state \
  >"\$VM_OUT/agent_\$VM_ID.json" 2>"\$VM_OUT/agent_\$VM_ID.err"
GUEST

"$HERE/vm_harness.sh" run "$OUT" "$OUT/guest.sh" "$OUT/guest.sh" || {
  echo "FAIL: guests did not complete" >&2
  for f in a.log b.log agent_a.json agent_a.err; do echo "--- $f" >&2; cat "$OUT/$f" >&2 2>/dev/null || true; done
  exit 1
}

python3 - "$OUT" <<'PY'
import json, sys
out = sys.argv[1]
fails = []
def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond: fails.append(what)
for vm in ("a", "b"):
    text = open(f"{out}/agent_{vm}.json").read()
    try:
        doc = json.loads(text)
    except ValueError as e:
        check(False, f"guest {vm}: agent output is JSON ({e}): {text[:400]}")
        continue
    devices = doc.get("inventory", {}).get("devices", [])
    rxe = [d for d in devices if d.get("name") == "rxe0"]
    check(len(rxe) == 1, f"guest {vm}: inventory lists rxe0 (devices: {[d.get('name') for d in devices]})")
    if not rxe: continue
    d = rxe[0]
    check(d.get("driver") == "rxe", f"guest {vm}: rxe0 driver is rxe ({d.get('driver')!r})")
    ports = d.get("ports", [])
    p1 = [p for p in ports if int(p.get("port", 0)) == 1]
    check(len(p1) == 1, f"guest {vm}: rxe0 has port 1 ({ports})")
    if p1:
        check(p1[0].get("netdev") == "eth0", f"guest {vm}: port 1 netdev is eth0 ({p1[0].get('netdev')!r})")
        check(p1[0].get("link_layer") == "Ethernet", f"guest {vm}: port 1 link layer Ethernet ({p1[0].get('link_layer')!r})")
    names = {c["name"] for c in doc.get("counters", []) if c.get("device") == "rxe0" and int(c.get("port", 0)) == 1}
    for raw, c in (("sent_pkts", "tx_packets"), ("rcvd_pkts", "rx_packets")):
        check(c in names, f"guest {vm}: hw_counter {raw} of rxe0 port 1 reported as {c}")
if fails:
    print(open(f"{out}/agent_a.json").read()[:3000])
sys.exit(1 if fails else 0)
PY
