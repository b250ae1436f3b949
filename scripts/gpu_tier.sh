#!/usr/bin/env bash
# The whole GPU test tier (tests/gpu/) on a GPU machine in about five minutes: its files split in two halves run at
# once (`pytest -m gpu --dist loadfile`, 3 and 4 workers: one GPU, the files' own fixtures and processes), then the
# start-up timing tests alone (under the halves' compiles a worker's CuPy import took 1.6 s); beside the halves, the
# kernel families' and examples' nvcc build checks (tests/test_kernels_compile_*.py, test_examples_compile.py, which CI
# skips: tests/conftest.py); each part's summary and
# failures printed last, the logs in OUT (default: a new temporary folder). Where the machine has no
# virtualenv of the project, WHEELS names a wheelhouse (scripts/build_wheelhouse.sh) installed with pip --target
# first (a lent machine without network).
#   bash scripts/gpu_tier.sh [OUT]          knobs: WHEELS=DIR, TIER_TIMEOUT=seconds per part (default 300)
# Exit status: 0 when every part passes; 1 otherwise.
source "$(dirname "$0")/help.sh"  # -h, --help: the comment above
set -u
cd "$(dirname "$0")/.."
OUT=${1:-$(mktemp -d -t gpu_tier.XXXXXX)}
mkdir -p "$OUT"
py=python3
[ -x .venv/bin/python ] && py=.venv/bin/python
if [ -n "${WHEELS:-}" ]; then
    "$py" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$OUT/site" \
        "$WHEELS"/*.whl >/dev/null 2>&1 || { echo "error: the wheels in $WHEELS did not install" >&2; exit 1; }
    export PYTHONPATH=$OUT/site:$PWD
fi
"$py" -c "import cupy, sys; sys.exit(cupy.cuda.runtime.getDeviceCount() == 0)" >/dev/null 2>&1 \
    || { echo "error: gpu_tier.sh runs the GPU tests and CuPy sees no GPU here (on a CPU: bash scripts/test.sh)" >&2; exit 2; }
nvidia-smi --query-gpu=name,uuid,driver_version --format=csv,noheader
# half a: the kernel families' reference checks (long compiles); half b: every other file
A="tests/gpu/test_hgemm.py tests/gpu/test_simt_gemm.py tests/gpu/test_tiny.py tests/gpu/test_tsm2.py"
A="$A tests/gpu/test_npy_upload_gpu.py tests/gpu/test_kt_check_gpu.py tests/gpu/test_refine_gpu.py"
A="$A tests/gpu/test_compile_timeout_gpu.py tests/gpu/test_nvcc_sweep.py"
ALONE="tests/gpu/test_startup_gpu.py"  # timed against a quiet machine: after the halves, one worker
B=$(ls tests/gpu/test_*.py | grep -v -x -F "$(echo "$A $ALONE" | tr ' ' '\n')" | tr '\n' ' ')
t=${TIER_TIMEOUT:-300}
run_part() {  # NAME WORKERS FILES... (WORKERS 0: in the pytest process)
    local name=$1 workers=$2; shift 2
    local spread=(-n "$workers" --dist loadfile)
    [ "$workers" = 0 ] && spread=(-p no:xdist)
    local tier=(-m gpu)
    [ "$name" = kernels ] && tier=()  # the kernel build checks (nvcc, no GPU): every test of their files
    timeout "$t" "$py" -m pytest -q "${tier[@]}" -p no:cacheprovider "${spread[@]}" "$@" --durations=5 \
        > "$OUT/tier_$name.log" 2>&1
    echo "part $name rc=$?" >> "$OUT/tier_$name.log"
}
# shellcheck disable=SC2086  # the file lists split on spaces
run_part a 3 $A &
# shellcheck disable=SC2086
run_part b 4 $B &
# shellcheck disable=SC2086
run_part kernels 4 tests/test_kernels_compile_*.py tests/test_examples_compile.py &  # the kernel build checks CI skips (tests/conftest.py)
wait
run_part alone 0 $ALONE
rc=0
for h in a b kernels alone; do
    echo "== part $h"
    grep -E "passed|failed|error|rc=" "$OUT/tier_$h.log" | tail -3
    grep -E "^(FAILED|ERROR)" "$OUT/tier_$h.log" | head -20
    grep -q "part $h rc=0" "$OUT/tier_$h.log" || rc=1
done
echo "logs: $OUT"
exit $rc
