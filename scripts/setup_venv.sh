# Sourced by scripts/run.sh and scripts/test.sh: create .venv (once) on top of the Python that runs
# this script, so packages that Python already has (CuPy, numpy, ...) are used, not downloaded again.
# `--system-site-packages` alone does not see them when that Python is itself a virtual environment,
# so a .pth file adds its site-packages too. On a machine without network, a wheelhouse made by
# scripts/build_wheelhouse.sh in .whl/ is used instead of the package index.
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
    "$PY" -c "import sys; sys.exit(sys.version_info < (3, 11))" 2>/dev/null || {
        echo "error: autotune needs Python 3.11 or newer; $PY is $("$PY" --version 2>&1 | head -1): run with PYTHON=python3.11 (or newer)" >&2
        exit 1
    }
    "$PY" -m venv --system-site-packages .venv || {
        rm -rf .venv
        echo "error: $PY cannot create a virtual environment (Debian and Ubuntu: apt install python3-venv)" >&2
        exit 1
    }
    parent=$("$PY" -c "import sysconfig; p = sysconfig.get_paths(); print(p['purelib']); print(p['platlib'])" | sort -u)
    venv_site=$(.venv/bin/python -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
    echo "$parent" > "$venv_site/_autotune_parent_env.pth"
fi
if [ -d .whl ]; then
    PIP_OFFLINE=(--no-index --find-links .whl --no-build-isolation)
else
    PIP_OFFLINE=()
fi
pip_install() {  # quiet on success; prints pip's messages and returns 1 on failure
    local log
    log=$(mktemp)
    if .venv/bin/python -m pip install -q --disable-pip-version-check "${PIP_OFFLINE[@]}" "$@" >"$log" 2>&1; then
        rm -f "$log"
        return 0
    fi
    grep -v "is ignored: it is neither" "$log" >&2 || true
    rm -f "$log"
    return 1
}
