#!/usr/bin/env bash
# PostgreSQL COPY ingest next to SQLite's batch ingest, same machine, same
# run, same 200k samples (10 nodes × 20 000 steps, batches of 10 000):
#   sqlite   BenchmarkWriteSamples   multi-row prepared INSERTs on the writer
#   postgres BenchmarkWriteSamples   COPY into a staging table + one upsert
#   postgres BenchmarkRawCopy        plain COPY of the same rows into samples
# The PostgreSQL server is a throwaway one (.ci/pg.sh) started --durable
# (fsync on, synchronous_commit on: a real server's settings). SQLite runs
# with its default synchronous=NORMAL in WAL mode.
# Usage: bench/pg_ingest.sh [benchtime]   (default 5x)
set -euo pipefail
cd "$(dirname "$0")/.."
export CGO_ENABLED=0
bt="${1:-5x}"
out=$(mktemp)
pgdir=$(mktemp -d "${TMPDIR:-/tmp}/aml-bench-pg.XXXXXX")
trap 'bash .ci/pg.sh stop "$pgdir"; rm -rf "$pgdir" "$out"' EXIT
AML_TEST_PG=$(bash .ci/pg.sh start "$pgdir" --durable)
export AML_TEST_PG
go test -run '^$' -bench 'BenchmarkWriteSamples$' -benchtime "$bt" ./internal/store/sqlite/ | sed 's/^Benchmark/sqlite:Benchmark/' >>"$out"
go test -run '^$' -bench 'BenchmarkWriteSamples$|BenchmarkRawCopy$' -benchtime "$bt" ./internal/store/postgres/ | sed 's/^Benchmark/postgres:Benchmark/' >>"$out"
echo "date: $(date -u +%Y-%m-%dT%H:%MZ)  machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)  go: $(go env GOVERSION)  postgres: $("$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)/postgres" --version | awk '{print $3}')"
awk '
/:Benchmark/ {
  name=$1; sub(/-[0-9]+$/, "", name); sub(/Benchmark/, "", name)
  for (i=1;i<=NF;i++) if ($(i+1)=="samples/s") rate[name]=$i
}
END {
  printf "%-40s %14s\n", "path", "samples/s"
  printf "%-40s %14.0f\n", "sqlite WriteSamples (batch INSERT)", rate["sqlite:WriteSamples"]
  printf "%-40s %14.0f\n", "postgres WriteSamples (COPY + upsert)", rate["postgres:WriteSamples"]
  printf "%-40s %14.0f\n", "postgres raw COPY into samples", rate["postgres:RawCopy"]
  printf "postgres/sqlite ratio: %.2f   postgres ours/raw COPY: %.2f\n", rate["postgres:WriteSamples"]/rate["sqlite:WriteSamples"], rate["postgres:WriteSamples"]/rate["postgres:RawCopy"]
}
' "$out"
