#!/usr/bin/env bash
# Runs every fuzz target of the module for a short time each (default 5s,
# FUZZTIME overrides). A crash fails the run; the failing input is left in
# the package's testdata/fuzz/ for `go test -run` to replay.
set -euo pipefail
cd "$(dirname "$0")/.."
fuzztime="${FUZZTIME:-5s}"
n=0
for pkg in $(go list ./...); do
  dir=$(go list -f '{{.Dir}}' "$pkg")
  grep -ql '^func Fuzz' "$dir"/*_test.go 2>/dev/null || continue
  for target in $(go test -list '^Fuzz' "$pkg" | grep '^Fuzz' || true); do
    echo "-- $pkg $target ($fuzztime)"
    go test -run '^$' -fuzz "^${target}\$" -fuzztime "$fuzztime" -parallel 2 "$pkg"
    n=$((n + 1))
  done
done
echo "fuzzed $n target(s), $fuzztime each, no crash"
