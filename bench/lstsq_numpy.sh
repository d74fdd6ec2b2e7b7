#!/usr/bin/env bash
# bench/lstsq_numpy.sh [rounds] — the 200 000 × 41 least-squares problem of
# BenchmarkARXFit in numpy.linalg.lstsq (bench/lstsq_numpy.py, OpenBLAS with
# OPENBLAS_NUM_THREADS threads, default 2) and in Go (BenchmarkLstsq: the
# shared solver internal/ident/lsq and gonum's mat.QR; BenchmarkARXFit: the
# whole ARX fit), run interleaved `rounds` times (default 5) on the same
# machine. Prints each round and the medians, and the ratios Go ÷ numpy
# (below 1: Go is faster).
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-5}
export OPENBLAS_NUM_THREADS=${OPENBLAS_NUM_THREADS:-2}

py=""
for c in /usr/bin/python3 python3; do
	if command -v "$c" >/dev/null 2>&1 && "$c" -c 'import numpy' >/dev/null 2>&1; then
		py=$c
		break
	fi
done
if [ -z "$py" ]; then
	echo "numpy is not installed: apt-get install -y python3-numpy (Debian; add libopenblas0-pthread for OpenBLAS), or pip install numpy" >&2
	exit 1
fi

bin=$(mktemp -d)/linear.test
trap 'rm -rf "$(dirname "$bin")"' EXIT
go test -c -o "$bin" ./internal/ident/linear

median() { sort -g | awk '{v[NR]=$1} END{print (NR%2) ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2}'; }

np=() lsq=() gq=() arx=()
for r in $(seq "$rounds"); do
	line=$("$py" bench/lstsq_numpy.py 3)
	blas=$(awk '{print $6}' <<<"$line")
	np+=("$(awk '{print $2}' <<<"$line")")
	out=$(cd internal/ident/linear && "$bin" -test.run '^$' -test.bench 'BenchmarkLstsq|BenchmarkARXFit$' -test.benchtime 3x)
	ms() { awk -v b="$1" '$1 ~ b {printf "%.1f", $3/1e6}' <<<"$out"; }
	lsq+=("$(ms '^BenchmarkLstsq/lsq')")
	gq+=("$(ms '^BenchmarkLstsq/gonumQR')")
	arx+=("$(ms '^BenchmarkARXFit')")
	echo "round $r: numpy lstsq ${np[-1]} ms | Go lsq.Solve ${lsq[-1]} ms, gonum QR ${gq[-1]} ms, ARX fit ${arx[-1]} ms"
done
m_np=$(printf '%s\n' "${np[@]}" | median)
m_lsq=$(printf '%s\n' "${lsq[@]}" | median)
m_gq=$(printf '%s\n' "${gq[@]}" | median)
m_arx=$(printf '%s\n' "${arx[@]}" | median)
echo "numpy: $py $("$py" -c 'import numpy; print(numpy.__version__)'), OPENBLAS_NUM_THREADS=$OPENBLAS_NUM_THREADS, BLAS $blas"
echo "Go: $(go version | awk '{print $3}'), GOMAXPROCS=${GOMAXPROCS:-$(nproc)}"
echo "medians of $rounds rounds (ms): numpy lstsq $m_np, lsq.Solve $m_lsq, gonum QR $m_gq, ARX fit $m_arx"
awk -v n="$m_np" -v l="$m_lsq" -v g="$m_gq" -v a="$m_arx" 'BEGIN{
	printf "ratio lsq.Solve / numpy lstsq: %.2f\n", l/n
	printf "ratio ARX fit (build + solve) / numpy lstsq: %.2f\n", a/n
	printf "ratio gonum QR / numpy lstsq: %.2f\n", g/n
}'
