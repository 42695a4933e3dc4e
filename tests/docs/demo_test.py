#!/usr/bin/env python3
"""Runs `make demo`'s script (scripts/demo) against BUILD_DIR, with two campaign trials instead
of ten (DEMO_TRIALS=2, the script's one knob; about a minute and a half instead of four), and checks what
the demo is there to show: it exits 0, the bad change is ROLLED_BACK, the campaign's promotion
(when the campaign found something better and its confirmation trial confirmed it) has ended
(DONE; or ABORTED / ROLLED_BACK by the judge, which a two-trial winner's small gain can meet),
or else the demo says that the campaign found nothing better, and the audit chain verifies.

On a pass the demo's log directory is removed; on a failure it is kept and its path printed.
On a timeout the demo gets SIGTERM (its trap stops what it started, by PID), then its own
process group is killed.

usage: demo_test.py SOURCE_DIR BUILD_DIR
"""
import os
import re
import shutil
import sys
import time

from process_group import run_in_group

TIMEOUT_S = 540


def check(out):
    """What the demo's output must show; a list of what it lacks."""
    missing = []
    if not re.search(r"^change\s+c-\d+\s+ROLLED_BACK\b", out, re.M):
        missing.append("the bad change ROLLED_BACK (`change show` of it)")
    promo = re.search(r"^promotion\s+(c-\d+)", out, re.M)
    if promo:
        # DONE, or ended by the judge: with two trials the confirmed gain can be
        # small (0.887 [0.803, 0.980] in one run here) and the judge may not rule
        # out a +20% regression within the policy's HOLD limit (ABORTED), which
        # is the tool working, not the demo failing.
        if not re.search(r"^change\s+%s\s+(DONE|ABORTED|ROLLED_BACK)\b" %
                         re.escape(promo.group(1)), out, re.M):
            missing.append(f"the promotion {promo.group(1)} ended (DONE, ABORTED or ROLLED_BACK)")
    elif "the campaign found nothing better" not in out:
        # A campaign that STOPPED (a trial it could not build or judge) did not
        # search: the demo did not show what it is for.
        ended = re.search(r"^the campaign ended .*$", out, re.M)
        missing.append("a promotion or \"the campaign found nothing better\"" +
                       (f" (instead: {ended.group(0)})" if ended else ""))
    if not re.search(r"^audit chain ok: \d+ rows verified", out, re.M):
        missing.append("\"audit chain ok\"")
    if "demo: done" not in out:
        missing.append("\"demo: done\"")
    return missing


def main():
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    source, build = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    env = dict(os.environ, DEMO_TRIALS="2")
    start = time.monotonic()
    rc, out, timed_out = run_in_group([os.path.join(source, "scripts", "demo"), build], source,
                                      env, TIMEOUT_S)
    if timed_out:
        print(out[-8000:])
        print(f"demo_test: FAILED: not done after {TIMEOUT_S} s")
        return 1
    elapsed = time.monotonic() - start
    # The demo names its log directory when it starts the controller and when it ends.
    work = re.search(r"(/tmp/rocetune-demo\.[A-Za-z0-9]+)", out)
    print(out[-12000:])
    if rc != 0:
        print(f"demo_test: FAILED: scripts/demo exited {rc} after {elapsed:.0f} s")
        if work:
            print(f"demo_test: logs kept in {work.group(1)}")
        return 1
    missing = check(out)
    if missing:
        print("demo_test: FAILED: the output lacks " + "; ".join(missing))
        if work:
            print(f"demo_test: logs kept in {work.group(1)}")
        return 1
    if work:
        shutil.rmtree(work.group(1), ignore_errors=True)
    print(f"BENCH demo seconds={elapsed:.0f} trials=2")
    return 0


if __name__ == "__main__":
    sys.exit(main())
