#!/usr/bin/env bash
# The model tables' GPU runs on one H100 (about 7 minutes, at most 9.5: every phase has a timeout): the fp32/fp64 model table
# (results/small_tables_h100/model/dispatch.json, built on a CPU from the committed sweep) validated at 200 fresh
# random held-out problems (seed 3202); then the fp16 table tuned again over every residue of the sizes
# (configs/fp16_model_h100.yaml, 100 points), built with the selection model (library margin chosen by
# leave-one-out) and validated at 200 fresh problems (seed 3201). Seeds 3201/3202 were never used before.
# Figures by scripts/bench_tables.py. Everything lands in $R (default $OUT/model_tables, else runs/model_tables)
# and is packed into $OUT/model_tables_h100.tar.gz.
#   bash scripts/model_tables_h100.sh
source "$(dirname "$0")/help.sh"  # -h, --help: the comment above
set -uo pipefail
R=${R:-${OUT:-runs}/model_tables}; mkdir -p "$R/fp16" "$R/small"
source "$(dirname "$0")/python.sh"  # $py: the checkout's .venv, or $PYTHON
at() { echo "== $(date -u +%H:%M:%S) $*"; }
pack() { [ -n "${OUT:-}" ] && tar -C "$R" -czf "$OUT/model_tables_h100.tar.gz" . && at "packed $OUT/model_tables_h100.tar.gz"; }
trap pack EXIT
nvidia-smi --query-gpu=name,uuid,driver_version,clocks.sm,clocks.mem --format=csv | tee "$R/gpu.csv"
git rev-parse HEAD > "$R/commit.txt" 2>/dev/null
at "fp32/fp64 validation (stops after 120 s)"
"$py" -m autotune db unpack results/small_tables_h100/small_tables_h100.sqlite.xz -o "$R/small_tables_h100.sqlite"
cp results/small_tables_h100/model/dispatch.json "$R/small/dispatch.json"
timeout -s TERM 120 "$py" -m autotune validate "$R/small/dispatch.json" --db "$R/small_tables_h100.sqlite" \
  --random 200 --seed 3202 --workload configs/workloads/small_h100.yaml --pool-bk 3 --repetitions 10 \
  --out "$R/small/validation" -q; at "validate exit $?"
rm -f "$R/small_tables_h100.sqlite"  # committed already
"$py" scripts/bench_tables.py "$R/small/dispatch.json" "$R/small/validation"
at "fp16 tuning sweep (stops cleanly after 180 s)"
timeout -s TERM 180 "$py" -m autotune sweep configs/fp16_model_h100.yaml \
  --database "sqlite:///$R/fp16_model_h100.sqlite" -q; at "sweep exit $?"
at "fp16 table (selection model, library margin chosen by leave-one-out among 0, 5, 10%)"
emit16=(-m autotune emit "$R/fp16_model_h100.sqlite" -f json --bk 10 --tol 0.1 --workload
        configs/workloads/fp16_h100_all.yaml --include-dir kernels_src -o "$R/fp16/dispatch.json")
timeout 100 "$py" "${emit16[@]}" --structure auto:model \
  || { at "leave-one-out did not finish in 100 s: margin 10%"; "$py" "${emit16[@]}" --structure model:0.1; }
at "emit exit $?"
at "fp16 validation (stops after 140 s)"
timeout -s TERM 140 "$py" -m autotune validate "$R/fp16/dispatch.json" --db "$R/fp16_model_h100.sqlite" \
  --random 200 --seed 3201 --workload configs/workloads/fp16_h100.yaml --pool-bk 3 --repetitions 10 \
  --out "$R/fp16/validation" -q; at "validate exit $?"
"$py" scripts/bench_tables.py --json "$R/figures.json" "$R/small/dispatch.json" "$R/small/validation" \
  "$R/fp16/dispatch.json" "$R/fp16/validation"
