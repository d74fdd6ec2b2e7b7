#!/usr/bin/env bash
# Peak memory and time of `aml sim injection` as the sample count grows: runs
# of 14 h at 1 s (50 400 steps × 10 nodes ≈ 0.5 M samples each), 10, 39 and
# 100 of them (≈ 5 M, 19.6 M and 50 M samples), each into a fresh SQLite
# store. With an old commit as argument, that commit's binary (built in a
# throwaway git worktree, $OLD_WT or a temporary directory, removed at exit)
# runs the configurations it accepts (≤ 20 M samples before streaming) in the
# same session. Peak RSS is the child's maximum resident set (getrusage).
# Usage: [RUNS="10 39 100"] bench/sim_memory.sh [old-commit]     (e.g. a3c406f)
set -euo pipefail
cd "$(dirname "$0")/.."
export CGO_ENABLED=0
work=$(mktemp -d)
old=${1:-}
old_wt=${OLD_WT:-$work/old-src}
cleanup() {
  if [ -n "$old" ] && [ -d "$old_wt" ]; then git worktree remove --force "$old_wt"; fi
  rm -rf "$work"
}
trap cleanup EXIT
go build -o "$work/aml-new" ./cmd/aml
if [ -n "$old" ]; then
  git worktree add --detach "$old_wt" "$old" >/dev/null 2>&1
  (cd "$old_wt" && go build -o "$work/aml-old" ./cmd/aml)
fi
# peak RSS (KiB) and wall seconds of a child process
measure() { python3 -c 'import resource,subprocess,sys,time
t=time.monotonic()
r=subprocess.run(sys.argv[1:],stdout=subprocess.PIPE,stderr=subprocess.PIPE)
dt=time.monotonic()-t
if r.returncode: sys.stderr.write(r.stderr.decode()); sys.exit(r.returncode)
import json
print(json.load(__import__("io").BytesIO(r.stdout))["samples"], resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, "%.1f" % dt)' "$@"; }
echo "date: $(date -u +%Y-%m-%dT%H:%MZ)  machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)  go: $(go env GOVERSION)  load: $(cut -d' ' -f1-3 /proc/loadavg)"
printf "%-5s %5s %12s %10s %10s %12s %10s %10s\n" code runs samples rss_MiB B/sample seconds samples/s store_MiB
for runs in ${RUNS:-10 39 100}; do
  for code in old new; do
    bin="$work/aml-$code"
    [ -x "$bin" ] || continue
    if [ "$code" = old ] && [ "$runs" -gt 39 ]; then continue; fi # over the old 20 M cap
    D="$work/data"
    rm -rf "$D"
    read -r samples rss secs < <(measure "$bin" sim injection --runs "$runs" --duration 14h --seed 1 --data "$D" --json)
    store=$(du -sm "$D" | cut -f1)
    python3 -c 'import sys
code, runs, n, rss, s, st = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5]), sys.argv[6]
print(f"{code:<5} {runs:>5} {n:>12} {rss/1024:>10.1f} {rss*1024/n:>10.1f} {s:>12.1f} {n/s:>10.0f} {st:>10}")' "$code" "$runs" "$samples" "$rss" "$secs" "$store"
    rm -rf "$D"
  done
done
