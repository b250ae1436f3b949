#!/usr/bin/env bash
# Build an offline wheelhouse for a machine without network (an air-gapped cluster, or the lent GPU
# machine): the packages autotune needs that a CUDA Python image often lacks.
#   bash scripts/build_wheelhouse.sh [DEST=.whl] [PYVER=3.12]
# On the target: pip install --no-index --find-links DEST autotune's deps, or
#   python3 -m pip install --no-index --no-deps --target /tmp/site DEST/*.whl; export PYTHONPATH=/tmp/site
set -euo pipefail
DEST=${1:-.whl}
PYVER=${2:-3.12}
mkdir -p "$DEST"
PLATS=(--platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64
       --platform manylinux2014_x86_64 --platform manylinux1_x86_64 --platform any)
# sqlalchemy (+ greenlet, typing_extensions); optuna and its needs (alembic, Mako, colorlog, tqdm)
for pkg in "sqlalchemy>=2.0" greenlet typing_extensions "optuna>=3.5" alembic Mako colorlog tqdm; do
    python3 -m pip download -q --no-deps --only-binary=:all: --python-version "$PYVER" --implementation cp \
        "${PLATS[@]}" -d "$DEST" "$pkg"
done
ls -1 "$DEST"
