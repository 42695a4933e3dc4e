"""The repository as the source checks in this folder see it: its tracked files."""
import os
import subprocess
import sys


def tracked_files():
    """(root, tracked paths relative to it, the repository's top-level folders).

    The root is the first command-line argument (default: the current directory).
    """
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else ".")
    files = subprocess.run(["git", "-C", root, "ls-files"], check=True, capture_output=True,
                           text=True).stdout.split()
    top = {p.split("/", 1)[0] for p in files if "/" in p}
    return root, files, top
