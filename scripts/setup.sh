#!/usr/bin/env bash
# Set up .venv with what the command line needs, and nothing for tests or docs (scripts/test.sh adds those):
# the package (`pip install -e .`) on top of the Python that runs this script ($PYTHON, else python3), plus the
# CuPy wheel matching the CUDA driver (`.[cuda13]` or `.[cuda12]`) where nvidia-smi is and CuPy is not.
# Installs once: again only when pyproject.toml or the extra changed (the stamp in .venv). Offline: from .whl/
# (scripts/build_wheelhouse.sh). scripts/run.sh runs it first; scripts/python.sh where nothing is set up yet.
#   bash scripts/setup.sh
source "$(dirname "$0")/help.sh"  # -h, --help: the comment above
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
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
    echo "setup: installing autotune$extra into .venv (a minute or more the first time)" >&2
    if pip_install -e ".$extra"; then
        echo "$want" > "$stamp"
        echo "setup: .venv is ready: .venv/bin/autotune --help" >&2
    fi  # a failure is checked just below
fi
.venv/bin/python -c "import autotune.cli.main" 2>/dev/null || {
    echo "error: the installation in .venv is incomplete; on a machine without network, run scripts/build_wheelhouse.sh elsewhere and copy .whl/ here" >&2
    exit 1
}
