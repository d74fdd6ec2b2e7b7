#!/usr/bin/env bash
# PostgreSQL beside SQLite for a dataset build and the job system, through
# the CLI, on one throwaway server (.ci/pg.sh --durable: fsync on).
#   dataset build  24 simulated runs × 10 nodes at 1 s for 2 h (as
#                  bench/dataset.sh), bench/dataset-spec.json at stride 10,
#                  on SQLite and on PostgreSQL (there including the upload of
#                  the dataset's files to the artifact store); samples in the
#                  store / build seconds.
#   jobs/s         N test_mean@1 jobs (no sleep) queued on PostgreSQL, then 1
#                  and then 2 `aml worker --concurrency 2` processes (each
#                  with its own data directory: datasets fetched from, models
#                  put to the artifact store); rate = N / (last end - first
#                  start) from the jobs table. Scaling ratio = 2 workers / 1.
# Usage: bench/pg_scale.sh [N]   (default 100)
set -euo pipefail
cd "$(dirname "$0")/.."
export CGO_ENABLED=0 AML_TEST_TRAINERS=1
N="${1:-100}"
work=$(mktemp -d)
pgdir=$(mktemp -d "${TMPDIR:-/tmp}/aml-bench-pg.XXXXXX")
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; bash .ci/pg.sh stop "$pgdir"; rm -rf "$pgdir" "$work"; }
trap cleanup EXIT
url=$(bash .ci/pg.sh start "$pgdir" --durable)
base=${url%/aml_test*}
bin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
psqlc() { "$bin/psql" "$1" -Atqc "$2"; }
mkdb() { psqlc "$base/postgres?sslmode=disable" "CREATE DATABASE $1" >/dev/null; echo "$base/$1?sslmode=disable"; }
go build -o "$work/aml" ./cmd/aml
A="$work/aml"
jsonf() { python3 -c 'import json,sys; d=json.load(sys.stdin); print(eval(sys.argv[1], {"d": d}))' "$1"; }
echo "date: $(date -u +%Y-%m-%dT%H:%MZ)  machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)  go: $(go env GOVERSION)  postgres: $("$bin/postgres" --version | awk '{print $3}')"

python3 -c 'import json,sys; s=json.load(open("bench/dataset-spec.json")); s["stride"]=10; json.dump(s,open(sys.argv[1],"w"))' "$work/spec.json"
dsdb=$(mkdb aml_ds)
for be in sqlite postgres; do
  db=(); [ "$be" = postgres ] && db=(--db "$dsdb")
  samples=$("$A" sim injection --runs 24 --duration 2h --seed 1 --data "$work/$be" "${db[@]}" --json | jsonf 'd["samples"]')
  out=$("$A" dataset build --spec "$work/spec.json" --data "$work/$be" "${db[@]}" --json)
  secs=$(echo "$out" | jsonf 'd["seconds"]')
  sha=$(echo "$out" | jsonf 'd["dataset"]["sha256"]')
  printf "dataset build %-8s samples %d  seconds %.3f  samples/s %.0f  sha256 %.12s\n" "$be" "$samples" "$secs" "$(python3 -c "print($samples/$secs)")" "$sha"
done

small=$(python3 - "$work" <<'PY'
import json, sys
s = json.load(open("examples/specs/injection.json"))
s["stride"] = 5; s["split"]["valRatio"] = 0.2; s["split"]["testRatio"] = 0.2
json.dump(s, open(sys.argv[1] + "/small.json", "w")); print(sys.argv[1] + "/small.json")
PY
)
declare -A rate
for W in 1 2; do
  db=$(mkdb "aml_j$W")
  d="$work/sub$W"
  "$A" sim injection --runs 5 --seed 4 --duration 8m --data "$d" --db "$db" >/dev/null
  # at most 50 experiments per dataset (the queue limit): a dataset per 50 jobs
  dss=()
  for k in $(seq $(((N + 49) / 50))); do dss+=($("$A" dataset build --spec "$small" --data "$d" --db "$db" --json | jsonf 'd["dataset"]["id"]')); done
  for i in $(seq 0 $((N - 1))); do "$A" job submit --dataset "${dss[$((i / 50))]}" --trainer test_mean@1 --data "$d" --db "$db" >/dev/null; done
  pids=()
  for k in $(seq "$W"); do "$A" worker --db "$db" --data "$work/w$W-$k" --concurrency 2 2>/dev/null & pids+=($!); done
  while [ "$(psqlc "$db" "SELECT count(*) FROM jobs WHERE ended_at IS NOT NULL")" -lt "$N" ]; do sleep 0.2; done
  for p in "${pids[@]}"; do kill "$p"; wait "$p" 2>/dev/null || true; done
  pids=()
  done_n=$(psqlc "$db" "SELECT count(*) FROM jobs WHERE status = 'done'")
  span=$(psqlc "$db" "SELECT (max(ended_at) - min(started_at)) / 1000.0 FROM jobs")
  rate[$W]=$(python3 -c "print($N/$span)")
  psqlc "$db" "SELECT '  not done: ' || id || ' ' || status || ' ' || coalesce(error_code, '') || ' ' || coalesce(error, '') FROM jobs WHERE status <> 'done'"
  printf "jobs  %d worker(s)  %d jobs (%d done)  %.2fs  %.1f jobs/s\n" "$W" "$N" "$done_n" "$span" "${rate[$W]}"
done
printf "scaling 2 workers / 1 worker: %.2f\n" "$(python3 -c "print(${rate[2]}/${rate[1]})")"
