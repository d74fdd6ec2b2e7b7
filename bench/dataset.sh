#!/usr/bin/env bash
# Dataset build throughput and memory on 24 simulated runs × 10 nodes at 1 s
# for 2 h each (≈1.7 M samples), beside the raw paged read of the same
# samples (bench/rawread: plain prepared SELECT pages) measured in the same run.
# Targets: build time ≤ 1.5× raw read time; peak RSS ≤ 2× output array bytes.
# With Debian's python3-numpy (/usr/bin/python3) it also times
# bench/dataset_numpy.py, the same pipeline vectorised in numpy, on the same
# store, and with PLAIN=1 bench/dataset_numpy_plain.py, the straightforward
# numpy implementation (loops over points, samples and windows; minutes per
# build) — both must give the same window count and sha256.
# Usage: [PLAIN=1] bench/dataset.sh [stride ...]   (default: 10 1)
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
# peak RSS (KiB) of a child process, via getrusage
rss() { python3 -c 'import resource,subprocess,sys
r=subprocess.run(sys.argv[1:],stdout=subprocess.PIPE)
sys.stdout.write(r.stdout.decode())
print("RSS_KIB", resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
sys.exit(r.returncode)' "$@"; }
echo "date: $(date -u +%Y-%m-%dT%H:%MZ)  machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)  go: $(go env GOVERSION)  samples in store: $samples"
printf "%-7s %10s %12s %10s %12s %8s %12s %10s %8s\n" stride windows build_s build_sps raw_read_s ratio arrays_MiB rss_MiB rss/arr
for stride in ${@:-10 1}; do
  python3 -c 'import json,sys; s=json.load(open("bench/dataset-spec.json")); s["stride"]=int(sys.argv[1]); json.dump(s,open(sys.argv[2],"w"))' "$stride" "$work/spec.json"
  # raw read first and after the build too; the faster of the two is the limit
  raw1=$("$work/rawread" --data "$D" --recipe recipe-injection-a --nodes "$nodes")
  out=$(rss "$work/aml" dataset build --spec "$work/spec.json" --data "$D" --json)
  raw2=$("$work/rawread" --data "$D" --recipe recipe-injection-a --nodes "$nodes")
  python3 - "$stride" "$raw1" "$raw2" "$out" <<'PY'
import json, sys
stride, r1, r2, out = sys.argv[1], json.loads(sys.argv[2]), json.loads(sys.argv[3]), sys.argv[4]
body, rss = out.rsplit("RSS_KIB", 1)
b = json.loads(body)
d = b["dataset"]
raw_s = min(r1["seconds"], r2["seconds"])
arr = 0
for k, sh in b["shapes"].items():
    n = 1
    for x in sh: n *= x
    arr += n * (8 if k in ("timestamps", "gridTimestamps") else 4)
rss_mib = int(rss) / 1024
windows = d["trainWindows"] + d["valWindows"] + d["testWindows"]
print(f"{stride:<7} {windows:>10} {b['seconds']:>12.3f} {r1['samples']/b['seconds']:>10.0f} {raw_s:>12.3f} {b['seconds']/raw_s:>8.2f} {arr/2**20:>12.1f} {rss_mib:>10.1f} {rss_mib/(arr/2**20):>8.2f}")
PY
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
