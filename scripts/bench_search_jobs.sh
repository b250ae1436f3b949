#!/usr/bin/env bash
# The search benchmark (scripts/bench_search.py) split into jobs of (pair, 5 seeds), PARALLEL at a time, all capped
# by one deadline, and packed into ONE tar file. Made for a host of many cores (the lent GPU machine's 16 CPU cores).
#
#   bash scripts/bench_search_jobs.sh OUT_DIR [PARALLEL=16] [SECONDS=440] [SEEDS=30]
#
# Jobs, in the order they start (heaviest pairs first within each class):
#   1. ours, cheap: random, brute, hybrid at 1, 2, 5, 10, 20% (seeds 0..SEEDS-1);
#   2. Kernel Tuner's five strategies that were best at some budget of the earlier run (genetic_algorithm,
#      simulated_annealing, firefly_algorithm, pso; random_sample) in simulation mode ($AUTOTUNE_KT_PYTHON) at
#      1..20%, and tpe at 1, 2, 5% (its cost grows with its trials: 10% and 20% are not run), interleaved by chunk
#      of 5 seeds (seeds 0-4 of every pair before seeds 5-9), so that a deadline leaves the same seeds of every pair;
#   3. Kernel Tuner's other five (basinhopping, mls, diff_evo, greedy_ils, dual_annealing), as time allows.
# No job starts a seed after SECONDS from now (bench_search.py --deadline, kt_simulate.py --deadline); a job still
# running 60 s later is killed (its seeds are lost, the others are kept). Every job writes NAME.csv, NAME.traces.npz,
# NAME.timings.json and NAME.log under OUT_DIR/jobs; at the end they are packed into OUT_DIR/search_jobs.tar and
# the folder is removed. Merge: python scripts/bench_search.py --merge DIR --out results/bench/search.csv.gz
source "$(dirname "$0")/help.sh"  # -h, --help: the comment above
set -uo pipefail
out=${1:?OUT_DIR}; par=${2:-16}; seconds=${3:-440}; seeds=${4:-30}
here=$(cd "$(dirname "$0")/.." && pwd)
source "$(dirname "$0")/python.sh"  # $py: the checkout's .venv, or $PYTHON
deadline=$(( $(date +%s) + seconds ))
mkdir -p "$out/jobs"
pairs=()
for kernel in dedispersion_milo convolution_milo; do
  for gpu in A100 A4000 A6000 MI250X W6600 W7800; do
    pairs+=("results/bench/hub/${kernel}_${gpu}.json.xz|${kernel}@${gpu}")
  done
done
for label in "16x16x16" "32x32x32x5209" "64x64x64x1303" "32x32x32x10417" "64x64x64x2605" "128x128x128"; do
  pairs+=("results/complete_h100/complete_h100.sqlite.xz|${label}")
done
for label in "1024x1024" "2048x2048" "4096x4096" "4000x3001"; do
  pairs+=("results/complete_conv_h200/complete_conv_h200.sqlite.xz|${label}")
done
{
  for ((s = 0; s < seeds; s += 5)); do
    for p in "${pairs[@]}"; do echo "ours|$p|$s"; done
  done
  for ((s = 0; s < seeds; s += 5)); do
    for p in "${pairs[@]}"; do echo "kt|$p|$s"; echo "tpe|$p|$s"; done
  done
  for ((s = 0; s < seeds; s += 5)); do
    for p in "${pairs[@]}"; do echo "ktrest|$p|$s"; done
  done
} > "$out/jobs/list.txt"
echo "$(wc -l < "$out/jobs/list.txt") jobs, deadline in ${seconds} s, ${par} at a time" >&2
export here py deadline seeds out
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 MKL_NUM_THREADS=1  # one core per job: BLAS threads would fight
xargs -P "$par" -I{} bash -c '
  IFS="|" read -r kind src pair first <<< "{}"
  (( $(date +%s) < deadline )) || exit 0
  n=$(( seeds - first < 5 ? seeds - first : 5 ))
  name=$(echo "${kind}_${pair}_${first}" | tr -c "A-Za-z0-9_\n" "_")
  case $kind in
    ours) args=(--strategies random,brute,hybrid --seeds "$n" --first-seed "$first" --kt-seeds 0) ;;
    tpe)  args=(--strategies tpe --seeds "$n" --first-seed "$first" --kt-seeds 0 --fractions 0.01,0.02,0.05) ;;
    kt)   args=(--strategies "" --kt-seeds "$n" --kt-first-seed "$first"
                --kt-strategies genetic_algorithm,simulated_annealing,firefly_algorithm,pso,random_sample) ;;
    ktrest) args=(--strategies "" --kt-seeds "$n" --kt-first-seed "$first"
                  --kt-strategies basinhopping,mls,diff_evo,greedy_ils,dual_annealing) ;;
  esac
  cd "$here" && timeout $(( deadline + 60 - $(date +%s) )) "$py" scripts/bench_search.py --source "$src" --pairs "$pair" \
    --min-size 1000 --no-plot --deadline "$deadline" "${args[@]}" --out "$out/jobs/$name.csv" \
    > "$out/jobs/$name.log" 2>&1 || echo "job $kind $pair seeds $first: exit $?" >&2' < "$out/jobs/list.txt"
tar -cf "$out/search_jobs.tar" -C "$out" jobs && rm -rf "$out/jobs"
echo "packed $out/search_jobs.tar ($(du -h "$out/search_jobs.tar" | cut -f1))" >&2
