#!/usr/bin/env bash
# The shared record stores' write path (audit log, tokens, twin records:
# internal/store/sqldb + twinstore) on SQLite and PostgreSQL, same machine,
# same run: BenchmarkAuditAppend appends one hash-chained audit entry per
# write transaction — what every twin record change costs on top of its
# own rows. "serial": one handle; "parallel": GOMAXPROCS goroutines over two
# handles on one database (two processes), serialised by the write lock
# (SQLite's single writer, PostgreSQL's advisory lock).
# Then the whole twin loop (aml demo) on each back-end.
# The PostgreSQL server is a throwaway one started --durable.
# Usage: bench/pg_records.sh [benchtime]   (default 3s)
set -euo pipefail
cd "$(dirname "$0")/.."
export CGO_ENABLED=0
bt="${1:-3s}"
pgdir=$(mktemp -d "${TMPDIR:-/tmp}/aml-bench-pg.XXXXXX")
work=$(mktemp -d "${TMPDIR:-/tmp}/aml-bench-rec.XXXXXX")
trap 'bash .ci/pg.sh stop "$pgdir"; rm -rf "$pgdir" "$work"' EXIT
AML_TEST_PG=$(bash .ci/pg.sh start "$pgdir" --durable)
export AML_TEST_PG
echo "date: $(date -u +%Y-%m-%dT%H:%MZ)  machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)  go: $(go env GOVERSION)  load: $(cut -d' ' -f1-3 /proc/loadavg)"
go test -run '^$' -bench 'BenchmarkAuditAppend' -benchtime "$bt" ./internal/store/twinstore/ | awk '
/^BenchmarkAuditAppend/ { name=$1; sub(/-[0-9]+$/, "", name); sub(/BenchmarkAuditAppend\//, "", name); ns[name]=$3 }
END {
  for (k in ns) printf "%-20s %10.0f µs/append  %8.0f appends/s\n", k, ns[k]/1000, 1e9/ns[k]
  printf "postgres/sqlite appends/s: serial %.2f, parallel %.2f\n", ns["sqlite/serial"]/ns["postgres/serial"], ns["sqlite/parallel"]/ns["postgres/parallel"]
}'
go build -o "$work/aml" ./cmd/aml
psql="$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)/psql"
"$psql" -q "$AML_TEST_PG" -c "CREATE SCHEMA demo"
t0=$(date +%s.%N); "$work/aml" demo --data "$work/lite" >/dev/null; t1=$(date +%s.%N)
"$work/aml" demo --db "${AML_TEST_PG}&search_path=demo" --data "$work/pg" >/dev/null; t2=$(date +%s.%N)
awk -v a="$t0" -v b="$t1" -v c="$t2" 'BEGIN { printf "aml demo: sqlite %.1f s, postgres %.1f s (postgres/sqlite time %.2f)\n", b-a, c-b, (c-b)/(b-a) }'
