#!/usr/bin/env bash
# Run scripts/bench_search.py's replays of our strategies split into jobs of (pair, 5 seeds), N at a time, one CSV per
# job under OUT (Kernel Tuner's part runs separately: --kt-seeds). Heaviest pairs first, so a time limit cuts short
# jobs last. Usage: bash scripts/bench_search_jobs.sh OUT_DIR [PARALLEL] [SEEDS] [FRACTIONS] [STRATEGIES]
set -uo pipefail
out=${1:?OUT_DIR}; par=${2:-16}; seeds=${3:-30}; fractions=${4:-0.01,0.02,0.05,0.1}; strategies=${5:-tpe,random,brute}
mkdir -p "$out"
here=$(cd "$(dirname "$0")/.." && pwd)
jobs=()
for kernel in dedispersion_milo convolution_milo; do
  for gpu in A100 A4000 A6000 MI250X W6600 W7800; do
    jobs+=("results/bench/hub/${kernel}_${gpu}.json.gz|${kernel}@${gpu}")
  done
done
for label in "16x16x16" "32x32x32x5209" "64x64x64x1303" "32x32x32x10417" "64x64x64x2605" "128x128x128"; do
  jobs+=("results/complete_h100/complete_h100.sqlite.xz|${label}")
done
for job in "${jobs[@]}"; do
  for ((s = 0; s < seeds; s += 5)); do
    echo "$job|$s"
  done
done | xargs -P "$par" -I{} bash -c '
  IFS="|" read -r src pair first <<< "{}"
  n=$(( '"$seeds"' - first < 5 ? '"$seeds"' - first : 5 ))
  name=$(echo "${pair}_${first}" | tr -c "A-Za-z0-9_\n" "_")
  cd '"$here"' && ${PYTHON:-python3} scripts/bench_search.py --source "$src" --pairs "$pair" --seeds "$n" --first-seed "$first" \
    --kt-seeds 0 --strategies '"$strategies"' --fractions '"$fractions"' --min-size 1000 --no-plot \
    --out '"$out"'/"$name".csv > '"$out"'/"$name".log 2>&1 || echo "job $pair seeds $first failed" >&2'
