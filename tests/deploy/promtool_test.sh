#!/usr/bin/env bash
# promtool checks of deploy/prometheus: MODE is one of
#   check-rules   promtool check rules on every *.rules.yml
#   test-rules    promtool test rules on every *.test.yml (input series -> expected alerts and
#                 recording-rule values)
#   check-config  promtool check config prometheus.yml (also loads the rule files and the
#                 file_sd targets file beside it)
# Usage: promtool_test.sh MODE SOURCE_DIR. Exit 77 (SKIP) when promtool is not installed
# (scripts/install-deps installs the Debian package prometheus, which ships it).
set -euo pipefail
MODE=${1:?usage: promtool_test.sh MODE SOURCE_DIR}
SRC=${2:?usage: promtool_test.sh MODE SOURCE_DIR}
PROMTOOL=${PROMTOOL:-promtool}
if ! command -v "$PROMTOOL" >/dev/null; then
  echo "SKIP: promtool not found (Debian package prometheus; scripts/install-deps installs it)"
  exit 77
fi
cd "$SRC/deploy/prometheus"
shopt -s nullglob
case "$MODE" in
  check-rules)
    files=(*.rules.yml)
    [ ${#files[@]} -gt 0 ] || { echo "no *.rules.yml in deploy/prometheus" >&2; exit 1; }
    "$PROMTOOL" check rules "${files[@]}"
    ;;
  test-rules)
    files=(*.test.yml)
    [ ${#files[@]} -gt 0 ] || { echo "no *.test.yml in deploy/prometheus" >&2; exit 1; }
    "$PROMTOOL" test rules "${files[@]}"
    # Every alert has at least one test case that expects it to fire.
    missing=0
    for a in $(sed -nE 's/^\s*-\s*alert:\s*(\S+)\s*$/\1/p' *.rules.yml); do
      if ! grep -A2 -E "alertname:\s*$a\s*$" *.test.yml | grep -q "exp_labels"; then
        echo "alert $a: no test case expects it to fire" >&2
        missing=1
      fi
    done
    exit $missing
    ;;
  check-config)
    "$PROMTOOL" check config prometheus.yml
    ;;
  *)
    echo "unknown mode $MODE" >&2
    exit 2
    ;;
esac
