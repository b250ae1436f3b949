#!/usr/bin/env bash
# docs/own-kernel.md's walk-through, run as a user would: a kernel and its problem kind in a folder outside the
# checkout, swept, reported as a dispatch table (JSON, Python, C++ header), the header compiled with g++ (and nvcc
# where it is), and the table validated at problems no sweep tuned.
#   bash scripts/walkthrough.sh [--replay] [WORKDIR] [RANDOM_PROBLEMS=40]
# On a GPU it measures. Without one (or with --replay) the same commands replay the H100 measurements committed in
# examples/transpose/results/ (`--replay`: the sweep's and the validation's recordings; at most 200 problems).
# Uses the checkout's .venv (set up by scripts/setup.sh when missing). Prints each command before it runs it;
# exits non-zero at the first failure.
source "$(dirname "$0")/help.sh"  # -h, --help: the comment above
set -euo pipefail
replay=""
if [ "${1:-}" = --replay ]; then replay=1; shift; fi
ROOT=$(cd "$(dirname "$0")/.." && pwd)
source "$ROOT/scripts/python.sh"  # $py: the checkout's .venv
W=${1:-$(mktemp -d -t autotune-walk.XXXXXX)}
N=${2:-40}
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
if [ -z "$replay" ] && ! "$py" -c "import cupy, sys; sys.exit(cupy.cuda.runtime.getDeviceCount() == 0)" 2>/dev/null; then
    echo "no GPU visible to CuPy: replaying the H100 measurements of examples/transpose/results/ (on a GPU the same commands measure)"
    replay=1
fi
recorded="$ROOT/examples/transpose/results"
sweep_replay=() validate_replay=()
if [ -n "$replay" ]; then
    if [ "$N" -gt 200 ]; then
        echo "error: the recording holds 200 held-out problems; give RANDOM_PROBLEMS <= 200 (or measure on a GPU)" >&2
        exit 2
    fi
    sweep_replay=(--replay "$recorded/transpose_h100.sqlite.xz")
    validate_replay=(--replay "$recorded/validation/validation.sqlite.xz")
fi
at() { echo "+ autotune $*"; "$py" -m autotune "$@"; }

mkdir -p "$W/my_kernels"
cp "$ROOT"/examples/transpose/{transpose.cu,space.yaml,reference.py} "$W/my_kernels/"
# the test points of examples/transpose/sweep.yaml (what its recording holds)
cat > "$W/my_kernels/sweep.yaml" <<'EOF'
name: transpose_walk
spaces: [space.yaml]
points: [{sizes: {rows: 4096, cols: 4096}}, {sizes: {rows: 8192, cols: 8192}}, {sizes: {rows: 4000, cols: 3001}}]
repetitions: 20
EOF
cd "$W"
echo "walk-through in $W (outside the checkout $ROOT)"
at space show my_kernels/space.yaml
# results go to results/transpose_walk.sqlite under the current folder
at sweep my_kernels/sweep.yaml -q "${sweep_replay[@]}"
test -f results/transpose_walk.sqlite
at report results/transpose_walk.sqlite --out report --include-dir my_kernels
echo "+ python: from dispatch import KERNELS, lookup_index"
"$py" - <<'EOF'
import sys
sys.path.insert(0, "report")
from dispatch import KERNELS, lookup_index
for rows, cols in ((5000, 3000), (1024, 1024), (777, 9000)):
    i = lookup_index(rows=rows, cols=cols)
    print(f"python lookup_index(rows={rows}, cols={cols}) = {i}", KERNELS[i]["instance_id"] if i >= 0 else "")
EOF
cat > app.cu <<'EOF'
#include <cstdio>
#include "dispatch.cuh"
int main() {
    std::printf("C++ lookup(5000, 3000) = %d, lookup(1024, 1024) = %d, lookup(777, 9000) = %d\n",
                autotune_dispatch::lookup(5000, 3000), autotune_dispatch::lookup(1024, 1024),
                autotune_dispatch::lookup(777, 9000));
    return 0;
}
EOF
cp app.cu app.cpp
for cxx in g++ nvcc; do
    if ! command -v "$cxx" >/dev/null 2>&1; then
        echo "($cxx is not on the PATH: the header is not compiled with it)"
        continue
    fi
    src=app.cpp; [ "$cxx" = nvcc ] && src=app.cu
    echo "+ $cxx -std=c++17 -I report -I my_kernels $src"
    "$cxx" -std=c++17 -I report -I my_kernels "$src" -o "app_$cxx" && "./app_$cxx"
done
at validate report/dispatch.json --db results/transpose_walk.sqlite --random "$N" --seed 1 --out validation -q \
    "${validate_replay[@]}"
ls results report validation
head -5 validation/validation.csv
echo "walk-through done: $W"
