#!/usr/bin/env bash
# `aml ingest csv` into PostgreSQL beside `psql \copy` of the same rows into
# the same server's samples table, interleaved round by round.
#
# Data: 200 000 samples, a wide CSV of 20 000 rows (time in epoch ms, 1 s
# apart) × 10 value columns. The \copy side gets the same samples already
# keyed as the samples table stores them (node pk, ts in µs, value as
# written in the wide file, no state, context pk), so it does none of
# AML's work (parsing a wide file, validating, interning nodes and the
# context, the overlap check, the run record), in two orders: "node" —
# (node, ts), the order the table's key wants, psql's best case (every
# node's rows go to the right edge of the index) — and "file" — the wide
# file's order (time, then node), as a long CSV exported from the line
# would be. Each side writes into its
# own fresh, migrated schema per round, with the month's partition already
# there for psql (AML makes it itself, inside its time: the cold case, a
# month's first ingest; with WARM=1 AML's schemas get the month's
# partition made beforehand by the same statement as psql's, outside the
# time: the steady state of every later ingest that month). Both times are
# whole processes' wall times (start, connect, write, durable commit,
# exit), measured alternately (the order flips every round) against one
# server started --durable (fsync and synchronous_commit on).
# Usage: [WARM=1] bench/pg_copy.sh [rounds]   (default 7)
# With AML_OLD=path/to/aml (another build, e.g. of main) each round also
# times that binary's ingest into a fourth schema, so a change is measured
# before/after in the same run (column "old", ratio aml/old).
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
awk -v wide="$work/line.csv" -v long="$work/keyed.csv" -v filelong="$work/keyed_file.csv" 'BEGIN {
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
  for (i = 0; i < n; i++) for (j = 1; j <= m; j++) printf "%d,%.0f,%s,,1\n", j, (t0 + i * 1000) * 1000, v[j, i] > filelong
}'

aml_round() { # schema [binary]
  local exe="${2:-$work/aml}"
  psql "$pg" -c "CREATE SCHEMA $1"
  "$work/aml" nodes list --db "$pg&search_path=$1" >/dev/null # migrate (not timed)
  [ -z "${WARM:-}" ] || month_partition "$1"
  local t0 t1
  t0=$(date +%s%N)
  "$exe" ingest csv --db "$pg&search_path=$1" --line L --product P --recipe R --run r1 "$work/line.csv" >/dev/null
  t1=$(date +%s%N)
  echo $(((t1 - t0) / 1000))
}
month_partition() { # schema
  psql "$pg" -c "SET search_path=$1" -c "CREATE TABLE samples_2025_12 PARTITION OF samples FOR VALUES FROM (1764547200000000) TO (1767225600000000)"
}
copy_round() { # schema file
  psql "$pg" -c "CREATE SCHEMA $1"
  "$work/aml" nodes list --db "$pg&search_path=$1" >/dev/null
  month_partition "$1"
  local t0 t1
  t0=$(date +%s%N)
  PGOPTIONS="-c search_path=$1" psql "$pg" -c "\\copy samples (node, ts, value, state, ctx) FROM '$2' WITH (FORMAT csv)"
  t1=$(date +%s%N)
  echo $(((t1 - t0) / 1000))
}

echo "date: $(date -u +%Y-%m-%dT%H:%MZ)  machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)  go: $(go env GOVERSION)  postgres: $("$bin/postgres" --version | awk '{print $3}')  head: $(git rev-parse --short HEAD)$(git diff --quiet HEAD || echo '+dirty')  aml partition: $([ -n "${WARM:-}" ] && echo "made beforehand (WARM)" || echo "made by aml, timed")  load: $(cut -d' ' -f1-3 /proc/loadavg)"
old="${AML_OLD:-}"
printf "%-6s %10s %14s %14s %10s %10s" round "aml (ms)" "\\copy node (ms)" "\\copy file (ms)" "aml/node" "aml/file"
[ -z "$old" ] || printf " %10s %10s" "old (ms)" "aml/old"
printf "\n"
for r in $(seq 1 "$rounds"); do
  # The order of the three (four with AML_OLD) rotates every round.
  sides=(a c f); [ -z "$old" ] || sides+=(o)
  n=${#sides[@]}; o=0
  for k in $(seq 0 $((n - 1))); do
    case ${sides[$(((k + r) % n))]} in
      a) a=$(aml_round a$r) ;;
      c) c=$(copy_round c$r "$work/keyed.csv") ;;
      f) f=$(copy_round f$r "$work/keyed_file.csv") ;;
      o) o=$(aml_round o$r "$old") ;;
    esac
  done
  # Every schema holds the same 200 000 samples.
  for sch in a$r c$r f$r $([ -z "$old" ] || echo o$r); do
    n=$(psql "$pg" -At -c "SELECT count(*) FROM $sch.samples")
    [ "$n" = 200000 ] || { echo "$sch holds $n samples" >&2; exit 1; }
  done
  awk -v r="$r" -v a="$a" -v c="$c" -v f="$f" -v o="$o" 'BEGIN { printf "%-6s %10.1f %14.1f %14.1f %10.3f %10.3f", r, a / 1000, c / 1000, f / 1000, a / c, a / f; if (o > 0) printf " %10.1f %10.3f", o / 1000, a / o; printf "\n" }'
  echo "$a $c $f $o" >>"$work/times"
  psql "$pg" -c "SET client_min_messages=warning" -c "DROP SCHEMA a$r CASCADE" -c "DROP SCHEMA c$r CASCADE" -c "DROP SCHEMA f$r CASCADE"
  [ -z "$old" ] || psql "$pg" -c "SET client_min_messages=warning" -c "DROP SCHEMA o$r CASCADE"
done
med() { sort -n | awk '{ q[NR] = $1 } END { printf "%.3f", q[int((NR + 1) / 2)] }'; }
echo "medians: aml $(awk '{ print $1 / 1000 }' "$work/times" | med) ms, \\copy node order $(awk '{ print $2 / 1000 }' "$work/times" | med) ms, file order $(awk '{ print $3 / 1000 }' "$work/times" | med) ms; per-round ratio medians: aml/node $(awk '{ print $1 / $2 }' "$work/times" | med), aml/file $(awk '{ print $1 / $3 }' "$work/times" | med)$([ -z "$old" ] || echo ", old $(awk '{ print $4 / 1000 }' "$work/times" | med) ms, aml/old $(awk '{ print $1 / $4 }' "$work/times" | med), old/node $(awk '{ print $4 / $2 }' "$work/times" | med)")"
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
