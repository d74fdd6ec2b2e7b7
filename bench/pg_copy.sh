#!/usr/bin/env bash
# `aml ingest csv` into PostgreSQL beside `psql \copy` of the same rows into
# the same server's samples table, interleaved round by round.
#
# Data: 200 000 samples, a wide CSV of 20 000 rows (time in epoch ms, 1 s
# apart) × 10 value columns. The \copy side gets the same samples already
# keyed as the samples table stores them (node pk, ts in µs, value as
# written in the wide file, no state, context pk), in (node, ts) order —
# the order the table's key wants, psql's best case — so it does none of
# AML's work (parsing a wide file, validating, interning nodes and the
# context, the overlap check, the run record). Each side writes into its
# own fresh, migrated schema per round, with the month's partition already
# there for psql (AML makes it itself, inside its time). Both times are
# whole processes' wall times (start, connect, write, durable commit,
# exit), measured alternately (the order flips every round) against one
# server started --durable (fsync and synchronous_commit on).
# Usage: bench/pg_copy.sh [rounds]   (default 7)
set -euo pipefail
cd "$(dirname "$0")/.."
export CGO_ENABLED=0
rounds="${1:-7}"
pgdir=$(mktemp -d "${TMPDIR:-/tmp}/aml-bench-pg.XXXXXX")
work=$(mktemp -d "${TMPDIR:-/tmp}/aml-bench-copy.XXXXXX")
trap 'bash .ci/pg.sh stop "$pgdir" >/dev/null; rm -rf "$pgdir" "$work"' EXIT
pg=$(bash .ci/pg.sh start "$pgdir" --durable)
bin="$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)"
psql() { "$bin/psql" -X -q -v ON_ERROR_STOP=1 "$@"; }
go build -o "$work/aml" ./cmd/aml
export AML_DATA="$work/data"
"$work/aml" init --data "$AML_DATA" >/dev/null

# The same samples twice: wide for aml, keyed long for psql.
awk -v wide="$work/line.csv" -v long="$work/keyed.csv" 'BEGIN {
  srand(42); n = 20000; m = 10; t0 = 1764547200000
  printf "time_ms" > wide
  for (j = 1; j <= m; j++) printf ",n%02d", j > wide
  printf "\n" > wide
  for (i = 0; i < n; i++) {
    printf "%.0f", t0 + i * 1000 > wide
    for (j = 1; j <= m; j++) { v[j, i] = sprintf("%.6f", 100 * j + 10 * sin(i / 50 + j) + rand()); printf ",%s", v[j, i] > wide }
    printf "\n" > wide
  }
  for (j = 1; j <= m; j++) for (i = 0; i < n; i++) printf "%d,%.0f,%s,,1\n", j, (t0 + i * 1000) * 1000, v[j, i] > long
}'

aml_round() { # schema
  psql "$pg" -c "CREATE SCHEMA $1"
  "$work/aml" nodes list --db "$pg&search_path=$1" >/dev/null # migrate (not timed)
  local t0 t1
  t0=$(date +%s%N)
  "$work/aml" ingest csv --db "$pg&search_path=$1" --line L --product P --recipe R --run r1 "$work/line.csv" >/dev/null
  t1=$(date +%s%N)
  echo $(((t1 - t0) / 1000))
}
copy_round() { # schema
  psql "$pg" -c "CREATE SCHEMA $1"
  "$work/aml" nodes list --db "$pg&search_path=$1" >/dev/null
  psql "$pg" -c "SET search_path=$1" -c "CREATE TABLE samples_2025_12 PARTITION OF samples FOR VALUES FROM (1764547200000000) TO (1767225600000000)"
  local t0 t1
  t0=$(date +%s%N)
  PGOPTIONS="-c search_path=$1" psql "$pg" -c "\\copy samples (node, ts, value, state, ctx) FROM '$work/keyed.csv' WITH (FORMAT csv)"
  t1=$(date +%s%N)
  echo $(((t1 - t0) / 1000))
}

echo "date: $(date -u +%Y-%m-%dT%H:%MZ)  machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)  go: $(go env GOVERSION)  postgres: $("$bin/postgres" --version | awk '{print $3}')  head: $(git rev-parse --short HEAD)$(git diff --quiet HEAD || echo '+dirty')  load: $(cut -d' ' -f1-3 /proc/loadavg)"
printf "%-6s %12s %12s %8s\n" round "aml (ms)" "\\copy (ms)" ratio
for r in $(seq 1 "$rounds"); do
  if [ $((r % 2)) -eq 1 ]; then a=$(aml_round a$r); c=$(copy_round c$r); else c=$(copy_round c$r); a=$(aml_round a$r); fi
  # Both schemas hold the same 200 000 samples.
  na=$(psql "$pg" -At -c "SELECT count(*) FROM a$r.samples")
  nc=$(psql "$pg" -At -c "SELECT count(*) FROM c$r.samples")
  [ "$na" = 200000 ] && [ "$nc" = 200000 ] || { echo "row counts differ: aml $na, copy $nc" >&2; exit 1; }
  awk -v r="$r" -v a="$a" -v c="$c" 'BEGIN { printf "%-6s %12.1f %12.1f %8.3f\n", r, a / 1000, c / 1000, a / c }'
  echo "$a $c" >>"$work/times"
  psql "$pg" -c "SET client_min_messages=warning" -c "DROP SCHEMA a$r CASCADE" -c "DROP SCHEMA c$r CASCADE"
done
sort -n -k1 "$work/times" | awk '{ a[NR] = $1 } END { m = a[int((NR + 1) / 2)]; printf "median aml %.1f ms", m / 1000 }'
sort -n -k2 "$work/times" | awk '{ c[NR] = $2 } END { m = c[int((NR + 1) / 2)]; printf ", median \\copy %.1f ms", m / 1000 }'
awk '{ printf "%.6f\n", $1 / $2 }' "$work/times" | sort -n | awk '{ q[NR] = $1 } END { printf ", per-round ratios %.3f–%.3f, median %.3f\n", q[1], q[NR], q[int((NR + 1) / 2)] }'
