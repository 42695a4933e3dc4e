#!/usr/bin/env python3
"""Lints rocetune's Grafana dashboards (deploy/grafana/dashboards/*.json).

Checks: valid JSON; the uid of each file is the stable one below and uids are unique; a
`datasource` variable of type datasource (Prometheus) exists and every panel, target,
query variable and annotation uses it; every panel other than a row has a unit and at least
one target with an expression; panel ids are unique and panels do not overlap; every
`$variable` an expression uses is defined; every series name an expression reads is a
rocetune metric of the metric contract, a recording rule of deploy/prometheus, or a standard
Prometheus / process series.

Usage: dashboards_lint.py SOURCE_DIR. Exit 0 when clean, 1 with one line per problem.
"""
import glob
import json
import os
import re
import sys

# uid per file: changing one breaks links and bookmarks, so this list changes only on purpose.
STABLE_UIDS = {
    "fleet.json": "rocetune-fleet",
    "host.json": "rocetune-host",
    "rollouts.json": "rocetune-rollouts",
}
DATASOURCE_REF = "${datasource}"

# Series names the exporters publish (docs/monitoring.md lists them).
RDMA_CANONICAL = """cnp_sent cnp_handled cnp_ignored ecn_marked_packets out_of_sequence
packet_seq_err local_ack_timeout_err retransmits tx_bytes rx_bytes tx_packets rx_packets
rx_pfc_pause_frames tx_pfc_pause_frames rx_pfc_pause_duration_seconds
tx_pfc_pause_duration_seconds rx_pfc_pause_transitions tx_pause_storm_warning_events
tx_pause_storm_error_events rx_discards_phy tx_discards_phy rx_prio_discards port_xmit_wait
out_of_buffer link_downed symbol_error link_error_recovery port_rcv_errors duplicate_request
implied_nak_seq_err rnr_nak_retry_err unmapped""".split()
# Switch agents: queue counters (rocetune_switch_<name>_total) and levels (gauges).
SWITCH_COUNTERS = """queue_packets queue_bytes queue_dropped_packets queue_dropped_bytes
queue_ecn_marked_packets queue_ecn_marked_bytes pfcwd_storms_detected
pfcwd_storms_restored""".split()
SWITCH_LEVELS = "queue_occupancy_bytes queue_watermark_bytes pfcwd_stormed".split()
KNOWN_SERIES = {f"rocetune_rdma_{n}_total" for n in RDMA_CANONICAL} | {
    f"rocetune_switch_{n}_total" for n in SWITCH_COUNTERS} | {
    f"rocetune_switch_{n}" for n in SWITCH_LEVELS} | set("""
rocetune_dcqcn_parameter rocetune_probe_rtt_seconds rocetune_probe_sent_total
rocetune_probe_timeouts_total rocetune_probe_loss_ratio rocetune_agent_applies_total
rocetune_agent_guard_rollbacks_total rocetune_agent_parameter_drift_total
rocetune_agent_parameters_drifted rocetune_agent_controller_connected
rocetune_agent_reports_sent_total rocetune_agent_sampling_duration_seconds_bucket
rocetune_agent_sampling_duration_seconds_sum rocetune_agent_sampling_duration_seconds_count
rocetune_agent_applied_version rocetune_agent_desired_version rocetune_build_info
process_cpu_seconds_total process_resident_memory_bytes process_virtual_memory_bytes
process_open_fds process_max_fds process_start_time_seconds
rocetune_controller_hosts rocetune_controller_hosts_drifted rocetune_controller_agent_streams
rocetune_controller_reports_received_total rocetune_controller_reports_dropped_total
rocetune_controller_desired_state_replies_total rocetune_controller_report_delay_seconds_bucket
rocetune_controller_group_probe_rtt_seconds rocetune_controller_group_cnp_rate_per_second
rocetune_controller_group_pfc_pause_rate_per_second rocetune_controller_group_reporting_hosts
rocetune_controller_changes rocetune_controller_change_transitions_total
rocetune_controller_changes_rolled_back_total rocetune_controller_judge_verdicts_total
rocetune_controller_change_hold_seconds rocetune_controller_change_p99_seconds
rocetune_controller_active_change rocetune_controller_campaign_trials_total
up ALERTS""".split())

PROMQL_WORDS = set("""sum min max avg count stddev stdvar topk bottomk quantile count_values
group by without on ignoring group_left group_right and or unless bool offset
rate irate increase delta idelta deriv changes resets histogram_quantile label_replace
label_join vector scalar absent absent_over_time abs ceil floor round clamp clamp_min clamp_max
time timestamp sort sort_desc avg_over_time max_over_time min_over_time sum_over_time
count_over_time last_over_time quantile_over_time predict_linear exp ln log2 log10 sqrt
inf nan""".split())


def recording_rules(source_dir):
    names = set()
    for path in glob.glob(os.path.join(source_dir, "deploy/prometheus/*.rules.yml")):
        with open(path) as f:
            names.update(re.findall(r"^\s*-\s*record:\s*(\S+)", f.read(), re.M))
    return names


def series_names(expr):
    """Identifiers in metric-name position (not functions, keywords, labels or strings)."""
    text = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)     # drop string contents
    text = re.sub(r"\{[^}]*\}", "{}", text)            # drop label matchers
    text = re.sub(r"\[[^\]]*\]", "[]", text)           # drop ranges
    text = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", text)
    out = set()
    for m in re.finditer(r"[A-Za-z_:][A-Za-z0-9_:]*", text):
        word = m.group(0)
        rest = text[m.end():].lstrip()
        if word.lower() in PROMQL_WORDS or rest.startswith("("):
            continue
        before = text[:m.start()]
        if before.endswith("$") or before.endswith("${"):
            continue
        out.add(word)
    return out


def expressions(dash):
    """(where, expr) for every PromQL expression in a dashboard."""
    out = []
    for p in dash.get("panels", []):
        for t in p.get("targets", []):
            out.append((f"panel {p.get('id')} '{p.get('title')}' target {t.get('refId')}",
                        t.get("expr", "")))
    for v in dash.get("templating", {}).get("list", []):
        if v.get("type") == "query":
            q = v.get("query")
            q = q.get("query", "") if isinstance(q, dict) else (q or "")
            m = re.match(r"^\s*label_values\((.*),\s*\w+\)\s*$", q)
            out.append((f"variable ${v.get('name')}", m.group(1) if m else q))
    for a in dash.get("annotations", {}).get("list", []):
        if a.get("builtIn"):
            continue
        out.append((f"annotation '{a.get('name')}'", a.get("expr", "")))
    return out


def lint_dashboard(path, dash, known, problems):
    def bad(msg):
        problems.append(f"{os.path.basename(path)}: {msg}")

    name = os.path.basename(path)
    want = STABLE_UIDS.get(name)
    if want is None:
        bad(f"no stable uid registered for this file (add it to STABLE_UIDS in {__file__})")
    elif dash.get("uid") != want:
        bad(f"uid is {dash.get('uid')!r}, the stable uid is {want!r}")
    if not dash.get("title"):
        bad("no title")

    variables = {v.get("name"): v for v in dash.get("templating", {}).get("list", [])}
    ds = variables.get("datasource")
    if ds is None or ds.get("type") != "datasource" or ds.get("query") != "prometheus":
        bad("no `datasource` variable of type datasource with query prometheus")
    for v in variables.values():
        if v.get("type") == "query" and (v.get("datasource") or {}).get("uid") != DATASOURCE_REF:
            bad(f"variable ${v.get('name')} does not query through {DATASOURCE_REF}")

    ids = set()
    cells = {}
    for p in dash.get("panels", []):
        pid, title = p.get("id"), p.get("title")
        where = f"panel {pid} '{title}'"
        if pid in ids:
            bad(f"{where}: duplicate panel id")
        ids.add(pid)
        g = p.get("gridPos") or {}
        for x in range(g.get("x", 0), g.get("x", 0) + g.get("w", 0)):
            for y in range(g.get("y", 0), g.get("y", 0) + g.get("h", 0)):
                if (x, y) in cells:
                    bad(f"{where}: overlaps panel {cells[(x, y)]}")
                    break
                cells[(x, y)] = pid
        if p.get("type") == "row":
            continue
        if not g.get("w") or not g.get("h"):
            bad(f"{where}: no gridPos size")
        unit = ((p.get("fieldConfig") or {}).get("defaults") or {}).get("unit")
        if not unit:
            bad(f"{where}: no unit (fieldConfig.defaults.unit)")
        if (p.get("datasource") or {}).get("uid") != DATASOURCE_REF:
            bad(f"{where}: datasource is not {DATASOURCE_REF}")
        if not p.get("targets"):
            bad(f"{where}: no targets")
        for t in p.get("targets", []):
            if (t.get("datasource") or {}).get("uid") != DATASOURCE_REF:
                bad(f"{where} target {t.get('refId')}: datasource is not {DATASOURCE_REF}")
    for a in dash.get("annotations", {}).get("list", []):
        if not a.get("builtIn") and (a.get("datasource") or {}).get("uid") != DATASOURCE_REF:
            bad(f"annotation '{a.get('name')}': datasource is not {DATASOURCE_REF}")

    builtin_vars = {"__rate_interval", "__interval", "__range", "__range_s", "__interval_ms"}
    for where, expr in expressions(dash):
        if not expr.strip():
            bad(f"{where}: empty expression")
            continue
        for var in re.findall(r"\$\{?(\w+)", expr):
            if var not in variables and var not in builtin_vars:
                bad(f"{where}: uses undefined variable ${var}")
        for s in sorted(series_names(expr) - known):
            bad(f"{where}: reads unknown series {s!r} (not in the metric contract or the rules)")


def main():
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    source = sys.argv[1]
    known = KNOWN_SERIES | recording_rules(source)
    files = sorted(glob.glob(os.path.join(source, "deploy/grafana/dashboards/*.json")))
    problems = []
    if not files:
        problems.append("no dashboards under deploy/grafana/dashboards/")
    for name in STABLE_UIDS:
        if not os.path.exists(os.path.join(source, "deploy/grafana/dashboards", name)):
            problems.append(f"{name}: missing")
    uids = {}
    for path in files:
        try:
            with open(path) as f:
                dash = json.load(f)
        except (OSError, ValueError) as e:
            problems.append(f"{os.path.basename(path)}: not valid JSON: {e}")
            continue
        uid = dash.get("uid")
        if uid in uids:
            problems.append(f"{os.path.basename(path)}: uid {uid!r} also used by {uids[uid]}")
        uids[uid] = os.path.basename(path)
        lint_dashboard(path, dash, known, problems)
    prov = os.path.join(source, "deploy/grafana/provisioning")
    for sub in ("datasources", "dashboards"):
        if not glob.glob(os.path.join(prov, sub, "*.yml")):
            problems.append(f"deploy/grafana/provisioning/{sub}/: no provisioning file")
    for p in problems:
        print(p)
    n = sum(len(expressions(json.load(open(f)))) for f in files) if not problems else 0
    if problems:
        print(f"dashboards_lint: {len(problems)} problems", file=sys.stderr)
        return 1
    print(f"dashboards_lint: {len(files)} dashboards, {n} expressions, uids {sorted(uids)}: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
