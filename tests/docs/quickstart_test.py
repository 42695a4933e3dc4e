#!/usr/bin/env python3
"""Runs docs/quickstart.md: every ```sh block except the one tagged `build`, in order, in one
bash with `set -euo pipefail`, from the source tree, against the binaries of BUILD_DIR.

The controller listens on a loopback port picked here (PORT); the commands' own trap is not
relied on: on any exit this runner's trap kills the processes whose pid files the commands
wrote into their $Q directory (and only those), then prints the end of their logs on failure,
or removes $Q after a pass.

usage: quickstart_test.py SOURCE_DIR BUILD_DIR
"""
import os
import re
import socket
import sys
import time

from process_group import run_in_group

TIMEOUT_S = 420

PRELUDE = r"""set -euo pipefail
quickstart_cleanup() {
  rc=$?
  if [ -n "${Q:-}" ] && [ -d "$Q" ]; then
    for f in "$Q"/*.pid; do
      [ -f "$f" ] && kill "$(cat "$f")" 2>/dev/null || true
    done
    if [ "$rc" -ne 0 ]; then
      for log in "$Q"/*.log; do
        [ -f "$log" ] && { echo "--- last lines of $log"; tail -n 25 "$log"; }
      done
    else
      wait 2>/dev/null || true  # the stopped processes (children of this shell) have exited
      rm -rf "$Q"
    fi
  fi
  exit "$rc"
}
trap quickstart_cleanup EXIT
"""


def blocks(markdown):
    """The ```sh blocks of `markdown` (info string `sh`, not `sh build`), in order."""
    out = []
    for info, body in re.findall(r"^```([^\n]*)\n(.*?)^```\s*$", markdown, re.M | re.S):
        words = info.split()
        if words and words[0] == "sh" and "build" not in words[1:]:
            out.append(body)
    return out


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    source, build = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    with open(os.path.join(source, "docs", "quickstart.md"), encoding="utf-8") as f:
        doc = f.read()
    found = blocks(doc)
    # The page's sections: build (skipped), controller, fleet, policy, wait, pass, rollback, stop.
    if len(found) < 7:
        print(f"quickstart_test: docs/quickstart.md has {len(found)} sh blocks, expected >= 7")
        return 1
    script = PRELUDE + "\n".join(found)
    env = dict(os.environ, BUILD=build, PORT=str(free_port()))
    start = time.monotonic()
    rc, stdout, timed_out = run_in_group(["bash", "-c", script], source, env, TIMEOUT_S)
    if timed_out:
        print(stdout[-6000:])
        print(f"quickstart_test: FAILED: not done after {TIMEOUT_S} s")
        return 1
    elapsed = time.monotonic() - start
    print(stdout[-12000:])
    if rc != 0:
        print(f"quickstart_test: FAILED: the commands exited {rc} after {elapsed:.0f} s")
        return 1
    for want in ("DONE", "ROLLED_BACK", "refused: a proposer cannot approve",
                 "is not stored: apply -f", "no differences", "audit chain"):
        if want not in stdout:
            print(f"quickstart_test: FAILED: the output lacks \"{want}\"")
            return 1
    print(f"BENCH quickstart seconds={elapsed:.0f} sh_blocks={len(found)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
