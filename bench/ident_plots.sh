#!/usr/bin/env bash
# The validation plots of docs/identification.md, from the shared
# cascaded-tanks record (../shared/datasets/cascaded_tanks): ingest the
# estimation and validation runs, train ARX, output-error, state-space and
# process models on the estimation run, and draw each model's free run on
# the validation run (aml model compare --run … --svg docs/img).
# Usage: bench/ident_plots.sh   (from the repository; ≈ 1 min)
set -euo pipefail
cd "$(dirname "$0")/.."
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
go build -o "$W/aml" ./cmd/aml
aml() { "$W/aml" --data "$W/data" "$@"; }
field() { grep -m1 "\"$1\":" | sed -E 's/^[^:]*: *"?([^",]*)"?,?$/\1/'; }
T=../shared/datasets/cascaded_tanks
aml ingest csv "$T/cascaded_tanks_estimation.csv" --line tanks --product water --recipe multisine --run estimation --time-col time_s --time-unit s --ignore-col k --unit u_V=V --unit y_V=V
aml ingest csv "$T/cascaded_tanks_validation.csv" --line tanks --product water --recipe multisine --run validation --time-col time_s --time-unit s --ignore-col k --unit u_V=V --unit y_V=V --time-offset 24h
cat > "$W/spec.json" <<'JSON'
{"lineId": "tanks", "productId": "water", "recipeId": "multisine",
 "nodes": [{"nodeId": "u_V", "role": "control"}, {"nodeId": "y_V", "role": "target"}],
 "beatMs": 4000, "historySteps": 10, "horizonSteps": 10, "stride": 1,
 "cleaning": {"stateFilter": false, "range": false},
 "split": {"mode": "explicit", "trainRunIds": ["estimation"], "testRunIds": ["validation"]},
 "purpose": "mpc_surrogate"}
JSON
DS=$(aml dataset build --spec "$W/spec.json" --json | field id)
M=()
for t in 'one_step@1 {"na":8,"nb":9,"nk":0,"select":false}' 'output_error@1 {"nf":2,"nb":2,"nk":[0]}' 'linear_state_space@1 {}' 'process_model@1 {}'; do
  M+=("$(aml job submit --dataset "$DS" --trainer "${t%% *}" --params "${t#* }" --wait --json | field modelId)")
done
mkdir -p docs/img
aml model compare "${M[@]}" --run validation --svg docs/img
