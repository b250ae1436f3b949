#!/usr/bin/env bash
# Issue 32 for a kind other than GEMM, on one H100 (about 2 minutes, at most 3: every phase has a timeout): the
# softmax example's space (examples/softmax/space.yaml) tuned at the 21 points of configs/softmax_model_h100.yaml,
# the table built from that sweep by `autotune report` (structure chosen by leave-one-out among regions, nearest,
# cost and the selection model; TOL 10%), then validated at 200 fresh random held-out problems (seed 3203, never
# used before; within the tuned ranges, rows 4200..65536, cols 257..4001) against every table kernel, the fastest
# instance of every tuned point and PyTorch's softmax. Writes the sweep and validation databases (packed), the
# table, validation.csv/png/summary, the figures (scripts/bench_tables.py) and PROVENANCE.md into $R (default
# $OUT/softmax_model_h100, else runs/softmax_model_h100), packed into $OUT/softmax_model_h100.tar.gz.
# REPLAY=DB (a recorded database) replays instead of measuring: a check of this script on a CPU.
#   bash scripts/softmax_model_h100.sh
source "$(dirname "$0")/help.sh"  # -h, --help: the comment above
set -uo pipefail
R=${R:-${OUT:-runs}/softmax_model_h100}; mkdir -p "$R"
source "$(dirname "$0")/python.sh"  # $py: the checkout's .venv, or $PYTHON
rp=(); [ -n "${REPLAY:-}" ] && rp=(--replay "$REPLAY")
. "$(dirname "$0")/gpu_run_lib.sh"  # at, run_start, relative_paths, provenance_head
[ -n "${REPLAY:-}" ] || need_gpu REPLAY=DB
pack() {
  rm -f "$R/softmax_model_h100.sqlite" "$R/validation/validation.sqlite"
  [ -n "${OUT:-}" ] && tar -C "$R" -czf "$OUT/softmax_model_h100.tar.gz" . && echo "packed $OUT/softmax_model_h100.tar.gz"
}
trap pack EXIT
run_start
DB="$R/softmax_model_h100.sqlite"
at "sweep: 102 instances x 21 points (stops cleanly after 70 s)"
timeout -s TERM 70 "$py" -m autotune sweep configs/softmax_model_h100.yaml --database "sqlite:///$DB" -q "${rp[@]}"
at "sweep exit $?"
at "table: autotune report (structure auto, TOL 10%)"
timeout 30 "$py" -m autotune report "$DB" --tol 0.1 --include-dir examples/softmax --out "$R/report" \
  > "$R/report.txt" 2>&1 || at "report did not finish (exit $?): see report.txt"
if [ -f "$R/report/dispatch.json" ]; then cp "$R/report/dispatch.json" "$R/dispatch.json"
else timeout 20 "$py" -m autotune emit "$DB" -f json --tol 0.1 --structure model:0 --include-dir examples/softmax \
  -o "$R/dispatch.json"; at "fallback emit (model:0) exit $?"; fi
at "validation: 200 fresh problems, seed 3203 (stops after 75 s)"
timeout -s TERM 75 "$py" -m autotune validate "$R/dispatch.json" --db "$DB" --random 200 --seed 3203 --pool-bk 1 \
  --repetitions 10 --space examples/softmax/space.yaml --out "$R/validation" -q "${rp[@]}"
at "validate exit $?"
"$py" scripts/bench_tables.py --space examples/softmax/space.yaml --json "$R/figures.json" "$R/dispatch.json" "$R/validation" | tee "$R/figures.txt"
for f in "$DB" "$R/validation/validation.sqlite"; do
  [ -f "$f" ] && "$py" -m autotune db pack "$f" -o "$f.xz"
done
# the files name paths of this machine: name them relative to the output folder and the checkout
rel() { sed -i -e "s#sqlite:///$R/##g" -e "s#$R/##g" -e "s#$PWD/##g" "$@" 2>/dev/null; }
rel "$R/validation/validate_sweep.yaml" "$R/validation/validation_summary.json" "$R/figures.txt" "$R/figures.json" "$R/report.txt"
rm -f "$R"/report/*.png "$R/report/dispatch.py" "$R/report/dispatch.cuh"  # `autotune emit dispatch.json` remakes them
{
  provenance_head "softmax_model_h100: the softmax example's table between tuned points (issue 32, a kind other than GEMM)"
  echo
  echo "- sweep: configs/softmax_model_h100.yaml (102 instances of examples/softmax/space.yaml x 21 points, 10"
  echo "  repetitions, early stop at TOL) -> softmax_model_h100.sqlite.xz"
  echo "- table: \`autotune report softmax_model_h100.sqlite --tol 0.1 --include-dir examples/softmax\` -> dispatch.json"
  echo "  (structure chosen by leave-one-out: report/structures.csv)"
  echo "- validation: \`autotune validate dispatch.json --db softmax_model_h100.sqlite --random 200 --seed 3203"
  echo "  --pool-bk 1 --repetitions 10 --space examples/softmax/space.yaml --out validation\`"
  echo
  echo '```'; cat "$R/figures.txt"; echo '```'
  echo; echo "Log:"; echo '```'; cat "$R/log.txt"; echo '```'
} > "$R/PROVENANCE.md"
rel "$R/PROVENANCE.md"
