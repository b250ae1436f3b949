#!/usr/bin/env bash
# The main job of README.md: set up .venv (once: scripts/setup.sh), then run the default sweep on this machine's
# GPU. Without a GPU it shows the default space's funnel instead. Extra arguments go to `autotune sweep`.
#   CONFIG=configs/tsm2_h100.yaml bash scripts/run.sh
source "$(dirname "$0")/help.sh"  # -h, --help: the comment above
set -euo pipefail
cd "$(dirname "$0")/.."
CONFIG=${CONFIG:-configs/default.yaml}
bash scripts/setup.sh
if .venv/bin/python -c "import cupy, sys; sys.exit(cupy.cuda.runtime.getDeviceCount() == 0)" 2>/dev/null \
        && .venv/bin/autotune sweep --help >/dev/null 2>&1; then
    exec .venv/bin/autotune sweep "$CONFIG" "$@"
fi
echo "no GPU visible to CuPy (or no runner): showing the default space instead" >&2
exec .venv/bin/autotune space show gemm_batched_simt
