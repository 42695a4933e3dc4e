#!/usr/bin/env python3
"""Every Markdown file that a tracked source, build file or doc names must exist.

A reference is a token ending in ".md" (e.g. "docs/judge.md", "(nic-facts.md 4.1)",
"../README.md"). It resolves when the file exists relative to the repository root, to the
naming file's folder, or to docs/. Not checked: URLs, absolute paths (installed files such as
/usr/share/doc/...), CMake variables (${...}), and paths into other repositories (their first
folder is not a folder of this one, e.g. SONiC's "doc/qos/...").

Usage: doc_links_test.py SOURCE_DIR. Exit 0 when every reference resolves; otherwise it lists
each broken one as file:line: reference and exits 1.
"""
import os
import re
import sys

from source_tree import tracked_files

REF = re.compile(r"(?<![\w/.${}-])((?:\.{1,2}/)?[\w./-]*[\w-]+\.md)\b")
SKIP_SUFFIXES = (".json", ".png", ".svg", ".gz", ".deb", ".ico")


def main():
    root, files, top = tracked_files()
    broken = []
    checked = 0
    for rel in files:
        if rel.startswith("tests/fixtures/") or rel.endswith(SKIP_SUFFIXES):
            continue
        path = os.path.join(root, rel)
        try:
            with open(path, encoding="utf-8") as f:
                lines = f.readlines()
        except (UnicodeDecodeError, IsADirectoryError, FileNotFoundError):
            continue
        for n, line in enumerate(lines, 1):
            for m in REF.finditer(line):
                ref = m.group(1)
                start = m.start(1)
                before = line[max(0, start - 12):start]
                if "://" in before or "${" in before or before.endswith("$"):
                    continue
                if ref.startswith("/"):
                    continue  # an installed file (/usr/share/doc/...)
                first = ref.split("/", 1)[0] if "/" in ref else ""
                if first not in ("", ".", "..") and first not in top:
                    continue  # another repository's path
                checked += 1
                candidates = [os.path.join(root, ref),
                              os.path.join(os.path.dirname(path), ref),
                              os.path.join(root, "docs", ref)]
                if not any(os.path.isfile(c) for c in candidates):
                    broken.append(f"{rel}:{n}: {ref}")
    if broken:
        print("Markdown files named but missing:")
        for b in broken:
            print("  " + b)
        print(f"{len(broken)} of {checked} references broken")
        return 1
    print(f"all {checked} references to Markdown files resolve")
    return 0


if __name__ == "__main__":
    sys.exit(main())
