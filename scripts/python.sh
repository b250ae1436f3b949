# Sourced by the scripts under scripts/ that run autotune: sets $py to the Python that has it and its dependencies.
# $PYTHON when set; else the checkout's .venv (scripts/setup.sh, the README's first step); else python3 when it
# already imports them (a GPU machine whose Python has the packages); else .venv, set up now by scripts/setup.sh.
_checkout=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
_runs_autotune() { (cd "$_checkout" && "$1" -c "import autotune.cli.main") >/dev/null 2>&1; }
if [ -n "${PYTHON:-}" ]; then
    _runs_autotune "$PYTHON" || { echo "error: PYTHON=$PYTHON cannot import autotune and its dependencies; unset PYTHON to use .venv" >&2; exit 1; }
    py=$PYTHON
elif _runs_autotune "$_checkout/.venv/bin/python"; then
    py=$_checkout/.venv/bin/python
elif _runs_autotune python3; then
    py=python3
else
    bash "$_checkout/scripts/setup.sh" || exit 1
    py=$_checkout/.venv/bin/python
fi
unset -f _runs_autotune
