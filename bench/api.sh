#!/usr/bin/env bash
# Load test of `aml serve` on loopback, bounded in time: CLIENTS concurrent
# clients for DURATION mixing JSON ingest batches (80%), snapshots (10%,
# with the twin model's state estimate) and virtual trials (10%) against
# the data of `aml demo` (a trained hybrid twin, a frozen scene). Every
# acknowledged sample is counted back through the API; errors or lost
# samples fail the run. Prints the load generator's JSON (p50/p99 per kind,
# throughput) and the server's shutdown.
# Usage: bench/api.sh [duration=60s] [clients=50]
set -euo pipefail
cd "$(dirname "$0")/.."
export CGO_ENABLED=0
dur="${1:-60s}"
clients="${2:-50}"
work=$(mktemp -d)
pid=""
cleanup() { [ -n "$pid" ] && kill -INT "$pid" 2>/dev/null && wait "$pid" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
go build -o "$work/aml" ./cmd/aml
go build -o "$work/apiload" ./bench/apiload
data="$work/data"
echo "preparing: aml demo (simulated line, hybrid twin, frozen scene)…" >&2
"$work/aml" demo --data "$data" --json > "$work/demo.json"
read -r model snapid control value run at < <(python3 - "$work/demo.json" "$data" <<'PY'
import json, sys, sqlite3
d = json.load(open(sys.argv[1]))
k = sorted(d["setpointsBefore"])[0]
db = sqlite3.connect(sys.argv[2] + "/aml.db")
run = db.execute("SELECT id FROM runs ORDER BY started_ms DESC LIMIT 1").fetchone()[0]
import datetime
at = int(datetime.datetime.fromisoformat(d["demoClock"].replace("Z", "+00:00")).timestamp() * 1000)
print(d["modelId"], d["snapshotId"], k, d["setpointsBefore"][k], run, at)
PY
)
token=$("$work/aml" token create --role engineer --name bench --data "$data" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["token"])')
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
# One token drives all clients, so the per-token rate limit is lifted for
# the measurement (it is tested in internal/api).
"$work/aml" serve --addr "127.0.0.1:$port" --data "$data" --workers 1 --rate-limit -1 2> "$work/serve.log" &
pid=$!
for i in $(seq 100); do curl -sf "http://127.0.0.1:$port/api/v1/health" >/dev/null && break; sleep 0.1; done
echo "date: $(date -u +%Y-%m-%dT%H:%MZ)  machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)  go: $(go env GOVERSION)"
"$work/apiload" -url "http://127.0.0.1:$port" -token "$token" -model "$model" -scene injection-hold-control -run "$run" -at "$at" \
  -control "$control" -value "$value" -clients "$clients" -duration "$dur"
status=$?
curl -sf -H "Authorization: Bearer $token" "http://127.0.0.1:$port/metrics" | grep -E '^aml_(ingest_samples_total|events_clients|job_queue_depth) ' || true
kill -INT "$pid"; wait "$pid" || true; pid=""
tail -2 "$work/serve.log"
exit $status
