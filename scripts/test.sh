#!/usr/bin/env bash
# The test command of README.md: sets up .venv (once) and runs the test suite.
# Tiers: unit + replay everywhere; `nvcc` tests where nvcc is; `gpu` tests where CuPy sees a GPU;
# PostgreSQL tests when AUTOTUNE_TEST_PG_URL is set (.ci/run starts a server and sets it).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup_venv.sh
pip_install -e '.[test,docs]' || pip_install -e '.[test]' || pip_install -e . || true  # offline: the tools must be there
.venv/bin/python -c "import autotune, sqlalchemy, typer, pandas, yaml, hypothesis" \
    || { echo "error: the installation in .venv is incomplete; delete .venv and run again" >&2; exit 1; }
# One process per CPU, two to four (pytest-xdist), unless the caller chose (-n, -p no:xdist) or AUTOTUNE_TEST_WORKERS
# says otherwise (0: one process); the PostgreSQL and GPU tests keep to one worker each (tests/conftest.py, --dist
# loadgroup).
cpus=$(nproc 2>/dev/null || echo 2)
default_workers=$(( cpus < 2 ? 2 : (cpus > 4 ? 4 : cpus) ))
workers=()
if [ "${AUTOTUNE_TEST_WORKERS:-$default_workers}" != 0 ] && .venv/bin/python -c "import xdist" 2>/dev/null \
        && [[ " $* " != *" -n "* && " $* " != *"xdist"* && " $* " != *" -n"[0-9]* ]]; then
    workers=(-n "${AUTOTUNE_TEST_WORKERS:-$default_workers}" --dist loadgroup)
fi
set +e
.venv/bin/python -m pytest --durations=25 "${workers[@]}" "$@"  # the slowest tests listed: CI time is watched
rc=$?
set -e
if [ "$rc" -eq 5 ]; then
    echo "error: no tests were collected" >&2
    exit 1
fi
exit "$rc"
