#!/usr/bin/env bash
# PostgreSQL COPY ingest next to SQLite's batch ingest, same machine, same
# run, same 200k samples (10 nodes × 20 000 steps, batches of 10 000):
#   sqlite   BenchmarkWriteSamples     multi-row prepared INSERTs on the writer
#   postgres BenchmarkWriteSamples     new data: overlap check + binary COPY into samples
#   postgres BenchmarkRewriteSamples   the same instants again, new values: staging + upsert
#   postgres BenchmarkReingestSamples  the same instants again, same values
#   postgres BenchmarkRawCopy          pgx CopyFrom of the same rows into samples
# The PostgreSQL server is a throwaway one (.ci/pg.sh) started --durable
# (fsync on, synchronous_commit on: a real server's settings). SQLite runs
# with its default synchronous=NORMAL in WAL mode.
#
# With a git ref as second argument, the postgres benchmarks also run on
# that commit's code (extracted with git archive, the current
# bench_test.go copied in so both sides run the same benchmarks) against
# the same server in the same run: a before/after.
# Usage: bench/pg_ingest.sh [benchtime] [base-ref]   (default 5x, no base)
set -euo pipefail
cd "$(dirname "$0")/.."
export CGO_ENABLED=0
bt="${1:-5x}"
base="${2:-}"
out=$(mktemp)
pgdir=$(mktemp -d "${TMPDIR:-/tmp}/aml-bench-pg.XXXXXX")
basedir=""
trap 'bash .ci/pg.sh stop "$pgdir"; rm -rf "$pgdir" "$out" ${basedir:+"$basedir"}' EXIT
AML_TEST_PG=$(bash .ci/pg.sh start "$pgdir" --durable)
export AML_TEST_PG
pgbench='BenchmarkWriteSamples$|BenchmarkRewriteSamples$|BenchmarkReingestSamples$|BenchmarkRawCopy$'
if [ -n "$base" ]; then
  basedir=$(mktemp -d "${TMPDIR:-/tmp}/aml-bench-base.XXXXXX")
  git archive "$base" | tar -x -C "$basedir"
  cp internal/store/postgres/bench_test.go "$basedir/internal/store/postgres/bench_test.go"
  (cd "$basedir" && go test -run '^$' -bench "$pgbench" -benchtime "$bt" ./internal/store/postgres/) | sed 's/^Benchmark/base:Benchmark/' >>"$out"
fi
go test -run '^$' -bench 'BenchmarkWriteSamples$' -benchtime "$bt" ./internal/store/sqlite/ | sed 's/^Benchmark/sqlite:Benchmark/' >>"$out"
go test -run '^$' -bench "$pgbench" -benchtime "$bt" ./internal/store/postgres/ | sed 's/^Benchmark/postgres:Benchmark/' >>"$out"
echo "date: $(date -u +%Y-%m-%dT%H:%MZ)  machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)  go: $(go env GOVERSION)  postgres: $("$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)/postgres" --version | awk '{print $3}')  load: $(cut -d' ' -f1-3 /proc/loadavg)"
[ -z "$base" ] || echo "base: $base ($(git rev-parse --short "$base"))  head: $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- internal/store/postgres || echo ' + uncommitted changes')"
awk -v base="$base" '
/:Benchmark/ {
  name=$1; sub(/-[0-9]+$/, "", name); sub(/Benchmark/, "", name)
  for (i=1;i<=NF;i++) {
    if ($(i+1)=="samples/s") rate[name]=$i
    if ($(i+1)=="allocs/op") allocs[name]=$i
  }
}
function row(label, key) {
  a = (key in allocs) ? sprintf("%.2f", allocs[key]/200000) : "-"
  printf "%-44s %12.0f %14s %16s\n", label, rate[key], (key in allocs) ? allocs[key] : "-", a
}
END {
  printf "%-44s %12s %14s %16s\n", "path", "samples/s", "allocs/op", "allocs/sample"
  row("sqlite WriteSamples (batch INSERT)", "sqlite:WriteSamples")
  if (base != "") {
    row("postgres WriteSamples, base", "base:WriteSamples")
    row("postgres RewriteSamples, base", "base:RewriteSamples")
    row("postgres ReingestSamples, base", "base:ReingestSamples")
    row("postgres raw pgx COPY, base run", "base:RawCopy")
  }
  row("postgres WriteSamples (new data)", "postgres:WriteSamples")
  row("postgres RewriteSamples (new values)", "postgres:RewriteSamples")
  row("postgres ReingestSamples (same values)", "postgres:ReingestSamples")
  row("postgres raw pgx COPY into samples", "postgres:RawCopy")
  w = rate["postgres:WriteSamples"]
  printf "postgres/sqlite: %.2f   postgres/raw COPY: %.2f\n", w/rate["sqlite:WriteSamples"], w/rate["postgres:RawCopy"]
  if (base != "") {
    printf "after/before: write %.2f  rewrite %.2f  reingest %.2f   before: postgres/sqlite %.2f, postgres/raw COPY %.2f\n",
      w/rate["base:WriteSamples"], rate["postgres:RewriteSamples"]/rate["base:RewriteSamples"],
      rate["postgres:ReingestSamples"]/rate["base:ReingestSamples"],
      rate["base:WriteSamples"]/rate["sqlite:WriteSamples"], rate["base:WriteSamples"]/rate["base:RawCopy"]
  }
}
' "$out"
