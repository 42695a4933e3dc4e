#!/usr/bin/env bash
# UDP probes between two network namespaces joined by a veth pair (addresses exist
# only inside the namespaces this test creates; everything is removed on exit).
# Asserts samples over the veth, added wire delay (netem, when available) shows up in
# network RTT and not in responder delay, and loss once the responder stops.
# Usage: udp_probe_netns_test.sh BUILD_DIR. Exit 77 (SKIP) without root or netns.
set -euo pipefail
BUILD="$(cd "${1:?usage: $0 BUILD_DIR}" && pwd)"
PROBE="$BUILD/agent/probe/rocetune-probe"
[ -x "$PROBE" ] || { echo "FAIL: $PROBE not built" >&2; exit 1; }
[ "$(id -u)" = 0 ] || { echo "SKIP: needs root for ip netns" >&2; exit 77; }

NA="rtprobe-a-$$"; NB="rtprobe-b-$$"; VA="rtpa$$"; VB="rtpb$$"
NET="10.199.$(( $$ % 250 ))"
OUT="$(mktemp -d /tmp/rocetune-netns.XXXXXX)"
RPID=""
cleanup() {
  [ -n "$RPID" ] && kill "$RPID" 2>/dev/null && wait "$RPID" 2>/dev/null
  ip netns del "$NA" 2>/dev/null || true
  ip netns del "$NB" 2>/dev/null || true
  rm -rf "$OUT"
}
trap cleanup EXIT
ip netns add "$NA" || { echo "SKIP: ip netns add failed" >&2; exit 77; }
ip netns add "$NB"
ip link add "$VA" type veth peer name "$VB"
ip link set "$VA" netns "$NA"
ip link set "$VB" netns "$NB"
ip -n "$NA" addr add "$NET.1/24" dev "$VA"
ip -n "$NB" addr add "$NET.2/24" dev "$VB"
for ns in "$NA" "$NB"; do ip -n "$ns" link set lo up; done
ip -n "$NA" link set "$VA" up
ip -n "$NB" link set "$VB" up

ip netns exec "$NA" "$PROBE" --mode=responder --transport=udp --listen="$NET.1:0" --duration=0 \
  --info_file="$OUT/r.json" --stop_file="$OUT/stop" >"$OUT/responder.json" 2>"$OUT/responder.err" &
RPID=$!
for _ in $(seq 1 100); do [ -e "$OUT/r.json" ] && break; sleep 0.05; done
ADDR="$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["address"])' "$OUT/r.json")"

probe() {  # name duration
  ip netns exec "$NB" "$PROBE" --mode=prober --transport=udp --peers="veth=$ADDR" --rate=50 \
    --duration="$2" --timeout_ms=300 --traffic_class=104 >"$OUT/$1.json" 2>>"$OUT/prober.err"
}
probe base 1s
NETEM=0
if ip netns exec "$NB" tc qdisc add dev "$VB" root netem delay 20ms 2>/dev/null; then
  NETEM=1
  probe delayed 1s
  ip netns exec "$NB" tc qdisc del dev "$VB" root
else
  echo "note: netem unavailable; wire-delay check skipped"
fi
touch "$OUT/stop"
wait "$RPID"; RPID=""
probe stopped 1s

python3 - "$OUT" "$NETEM" <<'PY'
import json, sys
out, netem = sys.argv[1], sys.argv[2] == "1"
fails = []
def check(c, what):
    print(("ok   " if c else "FAIL ") + what)
    if not c: fails.append(what)
# 50 probes a second for 1 s; a starved machine sends fewer in the second,
# so only a floor that shows the prober ran is asked for.
MIN_SENT = 10
def win(name):
    d = json.load(open(f"{out}/{name}.json"))
    return [w for w in d["windows"] if w["peer_class"] == "veth"][0]
b = win("base")
check(b["probes_sent"] >= MIN_SENT and b["probes_lost"] == 0, f"samples over the veth, none lost ({b['probes_sent']} sent)")
check(b["network_rtt_seconds"]["count"] == b["probes_sent"], "one sample per probe")
check(b["network_rtt_seconds"]["min"] > 0, "RTT positive")
if netem:
    d = win("delayed")
    check(d["network_rtt_seconds"]["p50"] >= 0.019, f"20 ms netem delay is network RTT (p50 {d['network_rtt_seconds']['p50']})")
    check(d["host_delay_seconds"]["p50"] < 0.005, f"and not responder delay (p50 {d['host_delay_seconds']['p50']})")
s = win("stopped")
check(s["probes_sent"] >= MIN_SENT and s["probes_lost"] == s["probes_sent"], f"responder stopped: all lost ({s['probes_lost']}/{s['probes_sent']})")
check(s["network_rtt_seconds"]["count"] == 0, "no samples without a responder")
sys.exit(1 if fails else 0)
PY
