#!/usr/bin/env bash
# Issue 55 item 1 ("Tables III") on one H100 (about 4 minutes; every step has a timeout): the rule chosen on the CPU
# by scripts/tables7_study.py (docs/tables2.md "Library steps"), validated at FRESH seeds 3911 (fp16) and 3913
# (softmax), never used before (spent: every seed up to 3813 and those of the committed validations).
# Per table, on the CPU first: the committed tuning database with every spent validation whose database is
# committed replayed in (`autotune db bake`; fp16: seeds 3401 and 3811; softmax: 3603, 3703
# and 3813; the seed-3801/3803 samples of results/tables6_h100 kept no database), then two tables:
#   fp16:    --structure cost:0.05:1:4:m,k%2                  (chosen)  and cost:0.05:1:4 (tables6's, for comparison)
#   softmax: --structure cost:0.1:1:1:cols<=2048+rows<16000   (chosen)  and cost:0.1:1:1
# On the GPU: the chosen table validated at 100 fresh problems (`autotune validate --random 100 --seed S`), every
# table kernel, the pool's instances and the library timed at each; the comparison table rescored at the same
# problems from that validation's medians (figures.rescored_figures; information, both tables built before the run).
# Writes $R (default runs/tables7_h100): */dispatch.json, */base.json, */validation/, */figures.txt, PROVENANCE.md,
# gpu.csv, commit.txt, log.txt; packed into $OUT/tables7_h100.tar.gz when OUT is set.
# REPLAY=1 replays the validations from the newest committed validation databases instead of measuring (a check
# of this script on a CPU: the fresh problems are then "not measured").
#   bash scripts/tables7_h100.sh
source "$(dirname "$0")/help.sh"  # -h, --help: the comment above
set -uo pipefail
R=${R:-runs/tables7_h100}; mkdir -p "$R"; R=$(cd "$R" && pwd)
source "$(dirname "$0")/python.sh"  # $py: the checkout's .venv, or $PYTHON
TABLES=${TABLES:-softmax fp16}
want() { [[ " $TABLES " == *" $1 "* ]]; }
. "$(dirname "$0")/gpu_run_lib.sh"  # at, run_start, relative_paths, provenance_head
[ -n "${REPLAY:-}" ] || need_gpu REPLAY=1
pack() {
  for t in fp16 softmax; do
    f="$R/$t/validation/validation.sqlite"
    [ -f "$f" ] && "$py" -m autotune db pack "$f" -o "$f.xz" > /dev/null && rm -f "$f"
    rm -f "$R/$t/tuning.sqlite"  # the committed database with committed validations replayed in: rebuilt on demand
  done
  [ -n "${OUT:-}" ] && tar -C "$R" -czf "$OUT/tables7_h100.tar.gz" . && echo "packed $OUT/tables7_h100.tar.gz"
}
trap pack EXIT
run_start

# NAME TUNING_DB CHOSEN BASE INCLUDE SECONDS SEED REPLAY_DB BAKE... -- VALIDATE_ARGS...
table() {
  local t=$1 tuning=$2 chosen=$3 base=$4 inc=$5 s=$6 seed=$7 replay=$8; shift 8
  local bake=(); while [ "$1" != "--" ]; do bake+=("$1"); shift; done; shift
  mkdir -p "$R/$t"; local db="$R/$t/tuning.sqlite" v="$R/$t/validation"
  at "$t: autotune db bake $tuning ${bake[*]} (CPU)"
  "$py" -m autotune db bake "$tuning" "${bake[@]}" -o "$db" --force > "$R/$t/prepare.txt" 2>&1
  at "$t: baked exit $?"
  timeout 120 "$py" -m autotune emit "$db" -f json --tol 0.1 --structure "$chosen" --include-dir "$inc" \
    -o "$R/$t/dispatch.json" > "$R/$t/emit.txt" 2>&1; at "$t: emit $chosen exit $?"
  timeout 120 "$py" -m autotune emit "$db" -f json --tol 0.1 --structure "$base" --include-dir "$inc" \
    -o "$R/$t/base.json" >> "$R/$t/emit.txt" 2>&1; at "$t: emit $base exit $?"
  local rp=(); [ -n "${REPLAY:-}" ] && rp=(--replay "$replay")
  at "$t: autotune validate $t/dispatch.json --db $t/tuning.sqlite --random 100 --seed $seed --repetitions 10 $* (<= $s s)"
  timeout -s TERM "$s" "$py" -m autotune validate "$R/$t/dispatch.json" --db "$db" --random 100 --seed "$seed" \
    --repetitions 10 --out "$v" -q "$@" "${rp[@]}" > "$R/$t/validate.txt" 2>&1
  at "$t: validate exit $?"
  local sp=(); [ "$t" = softmax ] && sp=(--space examples/softmax/space.yaml)
  [ -f "$v/validation.csv" ] && "$py" - "$R/$t" "${sp[@]}" <<'PY' | tee "$R/$t/figures.txt" | tee -a "$R/log.txt"
import sys, warnings
from pathlib import Path
from autotune.dispatch.figures import rescored_figures, validated_figures
warnings.simplefilter("ignore")
d, spaces = Path(sys.argv[1]), tuple(Path(p) for p in sys.argv[3:])
print(validated_figures(d / "dispatch.json", d / "validation", spaces=spaces).line(f"{d.name} chosen (validated)"))
print(rescored_figures(d / "base.json", d / "validation", spaces=spaces).line(f"{d.name} base (rescored)"))
PY
}

want softmax && table softmax results/tables5_h100/softmax/softmax_model_h100.sqlite.xz \
  "cost:0.1:1:1:cols<=2048+rows<16000" cost:0.1:1:1 examples/softmax 60 3913 \
  results/tables6_h100/softmax/validation/validation.sqlite.xz \
  results/tables4_h100/softmax_3603/validation results/tables5_h100/softmax/active/round0/validation \
  results/tables6_h100/softmax/validation -- --pool-bk 1 --space examples/softmax/space.yaml
want fp16 && table fp16 results/tables2_h100/fp16/fp16_model_h100.sqlite.xz \
  "cost:0.05:1:4:m,k%2" cost:0.05:1:4 kernels_src 120 3911 \
  results/tables6_h100/fp16/validation/validation.sqlite.xz \
  results/tables4_h100/fp16/validation results/tables6_h100/fp16/validation \
  -- --pool-bk 3 --workload configs/workloads/fp16_h100.yaml

relative_paths
write_provenance "tables7_h100: library steps in cost mode, validated at fresh seeds 3911 (fp16) and 3913 (softmax)" \
  "Per table: the committed tuning database with the spent validations named in log.txt replayed in (CPU), the chosen table (dispatch.json) and the tables6 structure (base.json) built from it, the chosen table validated at 100 fresh problems by autotune validate --random 100 (log.txt), base.json rescored at the same problems from that validation's medians. Targets: >= 95% within 10%, worst <= 15%, none below 0.97x the library." \
  "$R/softmax/figures.txt" "$R/fp16/figures.txt"
