#!/usr/bin/env bash
# The main job of README.md: set up .venv (once), then run the default sweep on this machine's GPU.
# Without a GPU it shows the default space's funnel instead. Extra arguments go to `autotune sweep`.
#   CONFIG=configs/tsm2_h100.yaml bash scripts/run.sh
set -euo pipefail
cd "$(dirname "$0")/.."
CONFIG=${CONFIG:-configs/default.yaml}
source scripts/setup_venv.sh
extra=""
if command -v nvidia-smi >/dev/null 2>&1 && ! .venv/bin/python -c "import cupy" 2>/dev/null; then
    cuda_major=$(nvidia-smi | sed -n 's/.*CUDA Version: *\([0-9]*\).*/\1/p' | head -1)
    extra="[cuda${cuda_major:-12}]"
fi
# reinstall only when pyproject.toml or the extra changed since the last install (7 s saved per call)
stamp=.venv/.autotune-install-stamp
want="$(sha256sum pyproject.toml | cut -d' ' -f1) $extra"
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
    if pip_install -e ".$extra"; then echo "$want" > "$stamp"; fi  # a failure is checked just below
fi
.venv/bin/python -c "import autotune, sqlalchemy, typer" \
    || { echo "error: installation incomplete; on an offline machine run scripts/build_wheelhouse.sh elsewhere and copy .whl/ here" >&2; exit 1; }
if .venv/bin/python -c "import cupy, sys; sys.exit(cupy.cuda.runtime.getDeviceCount() == 0)" 2>/dev/null \
        && .venv/bin/autotune sweep --help >/dev/null 2>&1; then
    exec .venv/bin/autotune sweep "$CONFIG" "$@"
fi
echo "no GPU visible to CuPy (or no runner): showing the default space instead" >&2
exec .venv/bin/autotune space show gemm_batched_simt
