#!/usr/bin/env python3
"""The top-level folders include one another only downwards (docs/design.md, section 2).

Layers, lowest first: model (no I/O, protos only), daemon (runtime), then agent and controller
side by side (neither includes the other: what both need lives in model/), then sim (the
simulated hosts implement the agent's seams), cli. A `#include "<folder>/..."` in a tracked .cc
or .h file of the folders below must name a folder its own line allows. tests/ and bench/ may
include anything.

Usage: include_layers_test.py SOURCE_DIR. Exit 0 when every include is allowed; otherwise it
lists each one that is not as file:line: folder -> folder and exits 1.
"""
import os
import re
import sys

from source_tree import tracked_files

ALLOWED = {
    "model": {"model"},
    "daemon": {"daemon", "model"},
    "agent": {"agent", "daemon", "model"},
    "controller": {"controller", "daemon", "model", "sim"},
    "sim": {"sim", "agent", "daemon", "model"},
    "cli": {"cli", "controller", "daemon", "model"},
    # The job signal's C senders: nothing of ours (they write model/job_event.h's format).
    "jobsignal": {"jobsignal"},
}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([a-z_]+)/')


def main():
    root, files, top = tracked_files()
    bad = []
    checked = 0
    for rel in files:
        folder = rel.split("/", 1)[0]
        if folder not in ALLOWED or not rel.endswith((".cc", ".h")):
            continue
        with open(os.path.join(root, rel), encoding="utf-8") as f:
            for n, line in enumerate(f, 1):
                m = INCLUDE.match(line)
                # Only our own folders: "rocetune/v1/..." (generated protos), "absl/..." and
                # the like are not folders of this repository.
                if not m or m.group(1) not in top:
                    continue
                checked += 1
                if m.group(1) not in ALLOWED[folder]:
                    bad.append(f"{rel}:{n}: {folder} -> {m.group(1)}")
    for b in bad:
        print(b)
    print(f"{checked} includes of our own folders checked, {len(bad)} not allowed")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
