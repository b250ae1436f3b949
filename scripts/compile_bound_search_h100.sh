#!/usr/bin/env bash
# Compile-bound search on one H100, in ONE command of at most 9 minutes (issue 33, Performance: "on a
# compile-bound space the search reaches within 2% of the whole space's best in under 15 minutes of one H100 host").
# scripts/compile_bound_search.py says what runs: (a) the whole 1,080-configuration space of Kernel Tuner's
# convolution example through autotune.kernel_tuner.tune_kernel (at most SWEEP_CAP s; resumed from
# $CB_WORK/sweep.sqlite by a second call on the same warm machine if cut), then (b) the search (auto -> hybrid,
# 108 evaluations, SEED_CAP s each) seed by seed on a fresh compile cache and database while the TOTAL allows.
# The same command again on the same warm machine resumes: the sweep from its database, the seeds after those done.
#
#   bash scripts/compile_bound_search_h100.sh [TOTAL=510] [SWEEP_CAP=330] [SEED_CAP=45] [SEEDS=6]
#
# CB_SIMULATE=1 runs it without a GPU (--simulate: the replay backend on a synthetic cache) to check the plumbing.
# Writes $OUT/compile_bound_search.tar (OUT default: runs/compile_bound_search) (CSV, per-run JSON, sweep.json, host.txt, PROVENANCE.md, the sweep's
# database packed with `autotune db pack` when it works, else gzipped) and prints the provenance table last.
source "$(dirname "$0")/help.sh"  # -h, --help: the comment above
set -uo pipefail
total=${1:-510}; sweep_cap=${2:-330}; seed_cap=${3:-45}; seeds=${4:-6}
work=${CB_WORK:-${TMPDIR:-/tmp}/compile_bound}
here=$(cd "$(dirname "$0")/.." && pwd)
source "$(dirname "$0")/python.sh"  # $py: the checkout's .venv, or $PYTHON
. "$(dirname "$0")/gpu_run_lib.sh"  # need_gpu
[ -n "${CB_SIMULATE:-}" ] || need_gpu CB_SIMULATE=1
out=${OUT:-runs/compile_bound_search}; mkdir -p "$out"; out=$(cd "$out" && pwd)
res="$out/compile_bound"
mkdir -p "$res" "$work"
cd "$here" && "$py" scripts/compile_bound_search.py --out "$res" --work "$work" --total "$total" \
  --sweep-cap "$sweep_cap" --seed-cap "$seed_cap" --budget 108 --seeds "$seeds" ${CB_SIMULATE:+--simulate} 2>&1 | tee "$res/run.log"
rc=${PIPESTATUS[0]}
if [[ -f "$work/sweep.sqlite" ]]; then
  "$py" -m autotune db pack "$work/sweep.sqlite" -o "$res/sweep.sqlite.xz" >/dev/null 2>&1 \
    || gzip -c "$work/sweep.sqlite" > "$res/sweep.sqlite.gz"
fi
tar -C "$out" -cf "$out/compile_bound_search.tar" compile_bound && rm -rf "$res"
[[ -f "$out/compile_bound_search.tar" ]] && tar -xOf "$out/compile_bound_search.tar" compile_bound/PROVENANCE.md 2>/dev/null
exit "$rc"
