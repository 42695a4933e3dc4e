#!/usr/bin/env bash
# Issue 4's VM test: two Soft-RoCE guests probe each other with rocetune-probe over
# real rxe UD verbs. Asserts: samples arrive and are positive, the responder's delay
# is reported separately, loss is counted once the responder is stopped, and the rxe
# hw_counters sent_pkts / rcvd_pkts rise. Exit 77 (SKIP) only when qemu or the kernel
# package cannot be had (decided by vm_harness.sh).
# Usage: verbs_probe_vm_test.sh BUILD_DIR
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
BUILD="$(cd "${1:?usage: $0 BUILD_DIR}" && pwd)"
PROBE="$BUILD/agent/probe/rocetune-probe"
[ -x "$PROBE" ] || { echo "FAIL: $PROBE not built (target rocetune-probe)" >&2; exit 1; }

"$HERE/vm_harness.sh" prepare || exit $?

OUT="$(mktemp -d /tmp/rocetune-vm-probe.XXXXXX)"
trap 'rc=$?; if [ $rc -eq 0 ]; then rm -rf "$OUT"; else echo "guest files kept in $OUT" >&2; fi; exit $rc' EXIT
COUNTERS=/sys/class/infiniband/rxe0/ports/1/hw_counters

cat >"$OUT/responder.sh" <<GUEST
set -u
snap() { for c in sent_pkts rcvd_pkts; do echo "\$c=\$(cat $COUNTERS/\$c)"; done >"\$VM_OUT/\$1"; }
snap a_counters_before
"$PROBE" --mode=responder --transport=verbs --device=rxe0 --duration=0 \
  --info_file="\$VM_OUT/responder.json" --stop_file="\$VM_OUT/stop_responder" \
  >"\$VM_OUT/responder_out.json"
rc=\$?
snap a_counters_after
touch "\$VM_OUT/responder_stopped"
exit \$rc
GUEST

cat >"$OUT/prober.sh" <<GUEST
set -u
snap() { for c in sent_pkts rcvd_pkts; do echo "\$c=\$(cat $COUNTERS/\$c)"; done >"\$VM_OUT/\$1"; }
wait_for() { for _ in \$(seq 1 600); do [ -e "\$1" ] && return 0; sleep 0.1; done; echo "timeout waiting for \$1"; return 1; }
# Runs a command with a deadline; a command still alive then has its threads'
# kernel stacks saved to \$VM_OUT/<name>.stuck and is killed (the test then fails).
bounded() {  # name seconds command...
  local name=\$1 secs=\$2; shift 2
  "\$@" &
  local pid=\$! i
  for i in \$(seq 1 \$((secs * 10))); do [ -d /proc/\$pid ] || break; sleep 0.1; done
  if [ -d /proc/\$pid ]; then
    for t in /proc/\$pid/task/*; do echo "\$t \$(cat \$t/wchan) \$(cat \$t/comm)"; cat \$t/stack; done >"\$VM_OUT/\$name.stuck" 2>&1
    kill -9 \$pid
  fi
  wait \$pid
}
wait_for "\$VM_OUT/responder.json" || exit 1
peer="\$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print("%s/%d" % (d["gid"], d["qpn"]))' "\$VM_OUT/responder.json")"
echo "responder at \$peer"
snap b_counters_before
echo "\$(date +%s.%N) phase 1"
# Phase 1: the live responder, plus a GID nobody has (its resolution must not stall
# the live peer; its probes count as lost).
bounded phase1 60 "$PROBE" --mode=prober --transport=verbs --device=rxe0 \
  --peers="intra_tor=\$peer,ghost=::ffff:10.77.0.99/17" \
  --rate=25 --duration=3s --timeout_ms=1000 --traffic_class=106 >"\$VM_OUT/phase1.json" || exit 1
snap b_counters_after
touch "\$VM_OUT/stop_responder"
wait_for "\$VM_OUT/responder_stopped" || exit 1
echo "\$(date +%s.%N) phase 2"
# Phase 2: responder stopped, and rxe0 removed while probing.
bounded phase2 60 "$PROBE" --mode=prober --transport=verbs --device=rxe0 --peers="intra_tor=\$peer" \
  --rate=25 --duration=3s --timeout_ms=500 --ready_file=/tmp/phase2.ready \
  >"\$VM_OUT/phase2.json" 2>"\$VM_OUT/phase2.err" &
ppid=\$!
wait_for /tmp/phase2.ready
sleep 0.5
timeout 30 rdma link delete rxe0 >"\$VM_OUT/rdma_delete.log" 2>&1; echo "\$?" >"\$VM_OUT/rdma_delete.rc"
echo "\$(date +%s.%N) rdma link delete returned"
wait \$ppid; echo "\$?" >"\$VM_OUT/phase2.rc"
echo "\$(date +%s.%N) done"
GUEST

start=$(date +%s)
"$HERE/vm_harness.sh" run "$OUT" "$OUT/responder.sh" "$OUT/prober.sh" || {
  echo "FAIL: guests did not complete" >&2
  for f in a.log b.log phase1.json phase2.json phase2.err phase1.stuck phase2.stuck; do echo "--- $f" >&2; cat "$OUT/$f" >&2 2>/dev/null || true; done
  exit 1
}
echo "guests ran in $(( $(date +%s) - start )) s; prober guest log:"
grep -v "level=" "$OUT/b.log" || true
echo "prober log while rxe0 was removed:"; cat "$OUT/phase2.err" 2>/dev/null || true

python3 - "$OUT" <<'PY'
import json, sys
out = sys.argv[1]
def load(name): return json.load(open(f"{out}/{name}"))
def counters(name):
    return {k: int(v) for k, v in (l.strip().split("=") for l in open(f"{out}/{name}") if "=" in l)}
fails = []
def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond: fails.append(what)

p1, p2, resp = load("phase1.json"), load("phase2.json"), load("responder_out.json")
print("phase1:", json.dumps(p1)); print("phase2:", json.dumps(p2)); print("responder:", json.dumps(resp))
w1 = {w["peer_class"]: w for w in p1["windows"]}.get("intra_tor")
check(w1 is not None, "phase 1 reports peer class intra_tor")
w1 = w1 or {"probes_sent": 0, "probes_lost": 0, "clock": "", "network_rtt_seconds": {"count": 0, "min": 0, "p50": 0},
            "host_delay_seconds": {"count": 0, "min": 0, "p50": 0}}
rtt, hd = w1["network_rtt_seconds"], w1["host_delay_seconds"]
check(w1["probes_sent"] >= 30, f"phase 1 sent probes over rxe ({w1['probes_sent']})")
check(rtt["count"] >= 0.8 * w1["probes_sent"], f"phase 1 samples arrived ({rtt['count']} of {w1['probes_sent']})")
check(rtt["count"] + w1["probes_lost"] <= w1["probes_sent"], "samples + lost <= sent")
check(rtt["min"] > 0, f"network RTT samples are positive (min {rtt['min']})")
check(hd["count"] == rtt["count"], "every sample carries the responder delay")
check(hd["min"] > 0 and hd["p50"] > 0, f"responder delay separated out and positive (p50 {hd['p50']})")
check(w1["clock"] in ("monotonic", "nic_completion"), f"sample clock named ({w1['clock']})")
check(resp["answered"] >= rtt["count"], f"responder answered ({resp['answered']})")
check(p1["anomalies"]["bogus"] == 0 and p1["anomalies"]["malformed"] == 0, "no bogus or malformed answers")
w2 = {w["peer_class"]: w for w in p2["windows"]}.get("intra_tor", {"probes_sent": 0, "probes_lost": 0, "network_rtt_seconds": {"count": -1}})
check(w2["probes_sent"] >= 30 and w2["probes_lost"] == w2["probes_sent"],
      f"responder stopped: all probes lost ({w2['probes_lost']} of {w2['probes_sent']})")
check(w2["network_rtt_seconds"]["count"] == 0, "no latency sample while the responder is stopped")
bb, ba = counters("b_counters_before"), counters("b_counters_after")
ab, aa = counters("a_counters_before"), counters("a_counters_after")
# A probe whose post failed counts as sent and lost, and is a send error: the
# ghost peer's are all of them; a real peer's are rare (rxe's send queue) but
# happen, so they are allowed for, not assumed away.
g = {w["peer_class"]: w for w in p1["windows"]}.get("ghost", {"probes_sent": 0, "probes_lost": -1, "network_rtt_seconds": {"count": -1}})
real_send_errors = p1["anomalies"]["send_errors"] - max(g["probes_lost"], 0)
check(ba["sent_pkts"] - bb["sent_pkts"] >= w1["probes_sent"] - real_send_errors,
      f"prober rxe sent_pkts rose by >= probes sent less failed posts ({ba['sent_pkts'] - bb['sent_pkts']} for {w1['probes_sent']}, {real_send_errors} failed)")
check(ba["rcvd_pkts"] - bb["rcvd_pkts"] >= 2 * rtt["count"], f"prober rxe rcvd_pkts rose by >= 2 x samples ({ba['rcvd_pkts'] - bb['rcvd_pkts']})")
check(aa["rcvd_pkts"] - ab["rcvd_pkts"] >= rtt["count"], f"responder rxe rcvd_pkts rose ({aa['rcvd_pkts'] - ab['rcvd_pkts']})")
check(aa["sent_pkts"] - ab["sent_pkts"] >= 2 * rtt["count"], f"responder rxe sent_pkts rose ({aa['sent_pkts'] - ab['sent_pkts']})")
check(g["probes_sent"] >= 20 and g["probes_lost"] == g["probes_sent"] and g["network_rtt_seconds"]["count"] == 0,
      f"unknown GID: probes counted as lost, no samples ({g['probes_lost']}/{g['probes_sent']})")
check(0 <= real_send_errors <= w1["probes_lost"],
      f"unknown GID losses are counted as send errors ({p1['anomalies']['send_errors']} send errors: "
      f"{g['probes_lost']} to the unknown GID, {real_send_errors} to the real peer, which lost {w1['probes_lost']})")
rc2 = open(f"{out}/phase2.rc").read().strip()
print("phase2 rc", rc2, "rdma link delete rc", open(f"{out}/rdma_delete.rc").read().strip())
check(rc2 == "0", "device removed while probing: prober exits cleanly with a report")
sys.exit(1 if fails else 0)
PY
