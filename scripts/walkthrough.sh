#!/usr/bin/env bash
# README's "Bring your own kernel" walk-through, run as a user would: a kernel and its problem kind in a folder
# outside the checkout, swept on this machine's GPU, reported as a dispatch table (JSON, Python, C++ header),
# the header compiled with g++ and nvcc, and the table validated at problems no sweep tuned.
#   bash scripts/walkthrough.sh [WORKDIR] [RANDOM_PROBLEMS=40]
# Needs a GPU (CuPy) and nvcc. Prints each command before it runs it; exits non-zero at the first failure.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
W=${1:-$(mktemp -d /tmp/autotune-walk.XXXXXX)}
N=${2:-40}
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
at() { echo "+ autotune $*"; python3 -m autotune "$@"; }

mkdir -p "$W/my_kernels"
cp "$ROOT"/examples/transpose/{transpose.cu,space.yaml,reference.py} "$W/my_kernels/"
cat > "$W/my_kernels/sweep.yaml" <<'EOF'
name: transpose_walk
spaces: [space.yaml]
points: [{sizes: {rows: [1024, 4000, 8192], cols: [1024, 3001, 8192]}}]
repetitions: 10
EOF
cd "$W"
echo "walk-through in $W (outside the checkout $ROOT)"
at space show my_kernels/space.yaml
at sweep my_kernels/sweep.yaml -q   # results go to results/transpose_walk.sqlite under the current folder
test -f results/transpose_walk.sqlite
at report results/transpose_walk.sqlite --out report --include-dir my_kernels
python3 - <<'EOF'
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
echo "+ g++ -std=c++17 -I report -I my_kernels app.cpp"; g++ -std=c++17 -I report -I my_kernels app.cpp -o app_gxx && ./app_gxx
echo "+ nvcc -std=c++17 -I report -I my_kernels app.cu"; nvcc -std=c++17 -I report -I my_kernels app.cu -o app_nvcc && ./app_nvcc
at validate report/dispatch.json --db results/transpose_walk.sqlite --random "$N" --seed 1 --out validation
ls results report validation
head -5 validation/validation.csv
echo "walk-through done: $W"
