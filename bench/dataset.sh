#!/usr/bin/env bash
# Dataset build throughput and memory on 24 simulated runs × 10 nodes at 1 s
# for 2 h each (≈1.7 M samples), beside the raw paged read of the same
# samples (bench/rawread: plain prepared SELECT pages) measured in the same run.
# Targets (issue 22): on one core (CPU=0: both under `taskset -c 0`) build ≤ 1.3×
# the raw read at stride 10, ≤ 1.6× at stride 1; peak RSS ≤ 1.8× the output
# array bytes. With CPU set, each raw read and build also reports its CPU time
# (user + sys, getrusage of the child), and cpu_ratio compares those — on a
# loaded machine wall times move with the load, CPU times much less.
# ROUNDS=n repeats each stride's raw/build/raw triple n times (default 1).
# With Debian's python3-numpy (/usr/bin/python3) it also times
# bench/dataset_numpy.py, the same pipeline vectorised in numpy, on the same
# store, and with PLAIN=1 bench/dataset_numpy_plain.py, the straightforward
# numpy implementation (loops over points, samples and windows; minutes per
# build) — both must give the same window count and sha256.
# AML_OLD=<aml binary> also builds with that binary in every round, between
# the two raw reads (line "<stride> old"), for a before/after in one run.
# Usage: [CPU=core] [ROUNDS=n] [AML_OLD=bin] [PLAIN=1] bench/dataset.sh [stride ...]   (default: 10 1)
set -euo pipefail
cd "$(dirname "$0")/.."
export CGO_ENABLED=0
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
go build -o "$work/aml" ./cmd/aml
go build -o "$work/rawread" ./bench/rawread
D="$work/data"
"$work/aml" sim injection --runs 24 --duration 2h --seed 1 --data "$D" --json > "$work/sim.json"
samples=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["samples"])' "$work/sim.json")
nodes=$(python3 -c 'import json; print(",".join(n["nodeId"] for n in json.load(open("bench/dataset-spec.json"))["nodes"]))')
# pin to one core when CPU is set
pin=()
if [ -n "${CPU:-}" ]; then pin=(taskset -c "$CPU"); fi
# peak RSS (KiB) and CPU seconds (user + sys) of a child process, via getrusage
rss() { python3 -c 'import resource,subprocess,sys
r=subprocess.run(sys.argv[1:],stdout=subprocess.PIPE)
sys.stdout.write(r.stdout.decode())
u=resource.getrusage(resource.RUSAGE_CHILDREN)
print("RSS_KIB", u.ru_maxrss, u.ru_utime+u.ru_stime)
sys.exit(r.returncode)' "${pin[@]}" "$@"; }
echo "date: $(date -u +%Y-%m-%dT%H:%MZ)  machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)  go: $(go env GOVERSION)  samples in store: $samples"
# one result line: a build (new, or AML_OLD's) against the round's two raw reads
cat > "$work/row.py" <<'PY'
import json, sys
stride, label, r1, r2, out = sys.argv[1:6]
def parse(s):
    body, tail = s.rsplit("RSS_KIB", 1)
    rss, cpu = tail.split()
    return json.loads(body), int(rss), float(cpu)
r1, _, c1 = parse(r1)
r2, _, c2 = parse(r2)
b, rss, bcpu = parse(out)
d = b["dataset"]
raw_s = min(r1["seconds"], r2["seconds"])
raw_cpu = min(c1, c2)
arr = 0
for k, sh in b["shapes"].items():
    n = 1
    for x in sh: n *= x
    arr += n * (8 if k in ("timestamps", "gridTimestamps") else 4)
rss_mib = rss / 1024
windows = d["trainWindows"] + d["valWindows"] + d["testWindows"]
print(f"{stride+label:<7} {windows:>10} {b['seconds']:>12.3f} {r1['samples']/b['seconds']:>10.0f} {raw_s:>12.3f} {b['seconds']/raw_s:>8.2f} {arr/2**20:>12.1f} {rss_mib:>10.1f} {rss_mib/(arr/2**20):>8.2f} {bcpu:>8.2f} {raw_cpu:>8.2f} {bcpu/raw_cpu:>9.2f}  sha256 {d['sha256'][:16]}")
PY
printf "%-7s %10s %12s %10s %12s %8s %12s %10s %8s %8s %8s %9s\n" stride windows build_s build_sps raw_read_s ratio arrays_MiB rss_MiB rss/arr build_cpu raw_cpu cpu_ratio
for stride in ${@:-10 1}; do
  python3 -c 'import json,sys; s=json.load(open("bench/dataset-spec.json")); s["stride"]=int(sys.argv[1]); json.dump(s,open(sys.argv[2],"w"))' "$stride" "$work/spec.json"
  for round in $(seq "${ROUNDS:-1}"); do
    # raw read first and after the build(s) too; the faster of the two is the limit
    raw1=$(rss "$work/rawread" --data "$D" --recipe recipe-injection-a --nodes "$nodes")
    out=$(rss "$work/aml" dataset build --spec "$work/spec.json" --data "$D" --json)
    old=""
    if [ -n "${AML_OLD:-}" ]; then
      old=$(rss "$AML_OLD" dataset build --spec "$work/spec.json" --data "$D" --json)
    fi
    raw2=$(rss "$work/rawread" --data "$D" --recipe recipe-injection-a --nodes "$nodes")
    python3 "$work/row.py" "$stride" "" "$raw1" "$raw2" "$out"
    if [ -n "$old" ]; then
      python3 "$work/row.py" "$stride" " old" "$raw1" "$raw2" "$old"
    fi
  done
done
if /usr/bin/python3 -c 'import numpy' 2>/dev/null; then
  for stride in ${@:-10 1}; do
    python3 -c 'import json,sys; s=json.load(open("bench/dataset-spec.json")); s["stride"]=int(sys.argv[1]); json.dump(s,open(sys.argv[2],"w"))' "$stride" "$work/spec.json"
    np=$(/usr/bin/python3 bench/dataset_numpy.py "$D" "$work/spec.json" "$work/np")
    plain='{}'
    if [ "${PLAIN:-}" = 1 ]; then
      plain=$(/usr/bin/python3 bench/dataset_numpy_plain.py "$D" "$work/spec.json" "$work/np-plain")
    fi
    out=$("$work/aml" dataset build --spec "$work/spec.json" --data "$D" --json)
    python3 - "$stride" "$np" "$out" "$plain" <<'PY'
import json, sys
stride, np, b, plain = sys.argv[1], json.loads(sys.argv[2]), json.loads(sys.argv[3]), json.loads(sys.argv[4])
d = b["dataset"]
print(f"stride {stride}: vectorised numpy {np['seconds']:.3f} s ({np['windows']} windows), aml {b['seconds']:.3f} s ({d['trainWindows']+d['valWindows']+d['testWindows']} windows): aml/numpy {b['seconds']/np['seconds']:.2f}")
if plain:
    same = "same sha256 as the vectorised script" if plain["sha256"] == np["sha256"] else "sha256 DIFFERS from the vectorised script"
    print(f"stride {stride}: straightforward numpy {plain['seconds']:.3f} s ({plain['windows']} windows, {same}): aml/numpy {b['seconds']/plain['seconds']:.3f}")
PY
  done
else
  echo "numpy comparison skipped: install python3-numpy (apt-get install python3-numpy) for /usr/bin/python3"
fi
