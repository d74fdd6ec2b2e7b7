#!/usr/bin/env bash
# A plant's own line, from its CSV exports to an approved, governed write,
# with nothing of AML's simulator: the tank line of ./gen (two setpoints,
# one measured level; local times, ';' and decimal commas). Every step is a
# plain aml command; see README.md next to this script for what each one
# does. Usage: examples/own-line/run.sh [WORKDIR]   (from the repository)
set -euo pipefail
cd "$(dirname "$0")/../.."
W=${1:-$(mktemp -d)}
mkdir -p "$W"
go build -o "$W/aml" ./cmd/aml
aml() { "$W/aml" "$@"; }
# field KEY: the first "KEY": value of the --json document on stdin
field() { grep -m1 "\"$1\":" | sed -E 's/^[^:]*: *"?([^",]*)"?,?$/\1/'; }
export AML_DATA="$W/data" USER="${USER:-erin}"
X="$W/exports"
PLANT=(--line tank-line --product tank --recipe tank-level)
CSV=(--tz Europe/Berlin --delimiter ';' --decimal-comma)

echo "== the plant's exports"
go run ./examples/own-line/gen -out "$X"
head -3 "$X/run-01.csv"

echo "== ingest, the line file, the batch records"
aml ingest csv "$X"/run-0*.csv "${PLANT[@]}" "${CSV[@]}"
aml line apply "$X/line.yaml"
aml recipe put "$X/recipe.yaml" "${PLANT[@]}"
aml runs events "$X/batch.csv" --line tank-line

echo "== a dataset whose lineage verifies, a linear state-space model"
DS=$(aml dataset build --spec examples/own-line/spec.json --json | field id)
aml dataset show "$DS" | sed -n '1,3p'
M=$(aml job submit --dataset "$DS" --trainer linear_state_space@1 --wait --json | field modelId)
aml model show "$M" | sed -n '1,12p'

echo "== a scene drafted from the model, checked, stored, frozen; the write channel"
aml twin scene init --model "$M" --id tank > "$W/scene.yaml"
sed -n '1,12p' "$W/scene.yaml"
aml twin scene check "$W/scene.yaml" --model "$M"
H=$(aml twin scene put "$W/scene.yaml" --json | field hash)
aml twin scene freeze tank --version 1.0.0 --expect-hash "$H" --as ada
aml channel set --line tank-line --profile hybrid_twin --policy hitl_governed --scene tank@1.0.0 --as ada

echo "== the twin gate"
# On a running line, collect shadow evidence on three runs that end after
# the model was made (aml twin shadow --model M) and gate with the default
# profile twin-v3, which production needs. This example's line has no runs
# after its model yet, so it gates with twin-v1 (no shadow evidence): the
# optimiser then searches precisely, and certificates need no production
# model.
aml twin gate --model "$M" --scene tank --profile twin-v1 | sed -n '1,4p'

echo "== the current run: snapshot, optimise, certificate, approval, governed write"
aml ingest csv "$X/live-1.csv" "${PLANT[@]}" "${CSV[@]}" --run live
SNAP=$(aml twin snapshot take --scene tank --model "$M" --run live --json | field snapshotId)
TRIAL=$(aml twin optimize --model "$M" --snapshot "$SNAP" --json | field trialId)
CERT=$(aml cert issue --trial "$TRIAL" --as erin --json | field recommendationId)
aml cert show "$CERT"
aml cert approve "$CERT" --as ada
aml cert execute "$CERT" --as otto
aml cert show "$CERT" | sed -n '1,3p'
echo "work directory: $W"
