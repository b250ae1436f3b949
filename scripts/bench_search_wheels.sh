#!/usr/bin/env bash
# Wheels of Kernel Tuner 1.5.0 and what its ten benchmarked strategies import, for a machine without network (the
# lent GPU machine, Python 3.12) running scripts/bench_search_jobs.sh's Kernel Tuner jobs. numpy is taken from the
# machine; pymoo, scikit-learn (strategies not benchmarked) are left out. About 43 MB.
#   bash scripts/bench_search_wheels.sh [DEST=.whl-kt] [PYVER=3.12]
# On the target: python3 -m pip install --no-index --no-deps --target /tmp/kt DEST/*.whl, and run Kernel Tuner as
#   PYTHONPATH=/tmp/kt python3 (AUTOTUNE_KT_PYTHON names a script that does so).
source "$(dirname "$0")/help.sh"  # -h, --help: the comment above
set -euo pipefail
DEST=${1:-.whl-kt}
PYVER=${2:-3.12}
mkdir -p "$DEST"
PLATS=(--platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64
       --platform manylinux2014_x86_64 --platform any)
for pkg in kernel_tuner==1.5.0 python-constraint2==2.9.0 scipy==1.17.1 jsonschema==4.26.0 \
           jsonschema-specifications==2025.9.1 referencing==0.37.0 rpds-py==2026.9.1 attrs==26.1.0 xmltodict==1.0.4 \
           packaging==26.4 typing_extensions==4.16.0; do
    python3 -m pip download -q --no-deps --only-binary=:all: --python-version "$PYVER" --implementation cp \
        "${PLATS[@]}" -d "$DEST" "$pkg"
done
ls -1 "$DEST"
