#!/usr/bin/env bash
# Ingest and query throughput of the embedded store, each next to the raw
# SQLite limit measured in the same run on the same settings:
#   CSV ingest (parse + store)  vs  plain one-row prepared INSERT loop
#   API batch ingest            vs  plain one-row prepared INSERT loop
#   paged per-node query        vs  plain prepared SELECT loop
# Usage: bench/ingest.sh [benchtime]   (default 5x; each x = 200k samples)
set -euo pipefail
cd "$(dirname "$0")/.."
export CGO_ENABLED=0
bt="${1:-5x}"
out=$(mktemp)
trap 'rm -f "$out"' EXIT
go test -run '^$' -bench 'BenchmarkIngestSQLite$' -benchtime "$bt" ./internal/ingest/ | tee -a "$out" >/dev/null
go test -run '^$' -bench 'BenchmarkWriteSamples$|BenchmarkRawInsert$|BenchmarkQueryPage$|BenchmarkRawSelect$' -benchtime "$bt" ./internal/store/sqlite/ | tee -a "$out" >/dev/null
echo "date: $(date -u +%Y-%m-%dT%H:%MZ)  machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)  go: $(go env GOVERSION)"
awk '
/^Benchmark/ {
  name=$1; sub(/-[0-9]+$/, "", name); sub(/^Benchmark/, "", name)
  for (i=1;i<=NF;i++) if ($(i+1)=="samples/s") rate[name]=$i
}
END {
  printf "%-28s %14s %14s %8s %s\n", "path", "samples/s", "raw samples/s", "ratio", "(raw/ours: time ours takes per raw time; target <= 1.5)"
  row("CSV ingest (IngestFiles)", "IngestSQLite", "RawInsert")
  row("API batch (WriteSamples)", "WriteSamples", "RawInsert")
  row("paged query (QueryPage)", "QueryPage", "RawSelect")
}
function row(label, a, b) { printf "%-28s %14.0f %14.0f %8.2f\n", label, rate[a], rate[b], rate[b]/rate[a] }
' "$out"
