#!/usr/bin/env bash
# Build an offline wheelhouse for a machine without network (an air-gapped cluster, or the lent GPU
# machine): the packages autotune needs that a CUDA Python image often lacks.
#   bash scripts/build_wheelhouse.sh [--with-kerneltuner] [DEST=.whl] [PYVER=3.12]
# --with-kerneltuner adds Kernel Tuner 1.5.0 and those of its dependencies the lent GPU machine's image lacks
# (it has numpy, scipy, pandas, scikit-learn, matplotlib, attrs, wrapt, cloudpickle: see
# the device documentation), for scripts/bench_kt_switch.py and bench_sweep.py (about 10 MB more).
# On the target: pip install --no-index --find-links DEST autotune's deps, or
#   python3 -m pip install --no-index --no-deps --target /tmp/site DEST/*.whl; export PYTHONPATH=/tmp/site
source "$(dirname "$0")/help.sh"  # -h, --help: the comment above
set -euo pipefail
KT=0
if [[ "${1:-}" == "--with-kerneltuner" ]]; then KT=1; shift; fi
DEST=${1:-.whl}
PYVER=${2:-3.12}
mkdir -p "$DEST"
PLATS=(--platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_24_x86_64
       --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform manylinux1_x86_64
       --platform manylinux_2_5_x86_64 --platform any)
# sqlalchemy (+ greenlet, typing_extensions); optuna and its needs (alembic, Mako, colorlog, tqdm)
PKGS=("sqlalchemy>=2.0" greenlet typing_extensions "optuna>=3.5" alembic Mako colorlog tqdm)
if [[ $KT == 1 ]]; then
    # Kernel Tuner 1.5.0's Requires-Dist, walked down to what the image lacks: jsonschema (+ referencing,
    # jsonschema-specifications, rpds-py), python-constraint2, xmltodict, platformdirs. Not pymoo (and its moocore,
    # cffi, pycparser, autograd, cma, alive-progress, about-time, graphemeu, Deprecated: 7 MB): Kernel Tuner imports
    # it only for its nsga2/nsga3 strategies, and without it the wheelhouse (16 MB) fits beside the tree in the
    # 64 MiB a device call carries. PYMOO=1 adds them.
    PKGS+=("kernel_tuner==1.5.0" jsonschema jsonschema-specifications referencing rpds-py python-constraint2 xmltodict
           platformdirs)
    if [[ ${PYMOO:-0} == 1 ]]; then
        PKGS+=(pymoo moocore cffi pycparser autograd cma alive-progress "about-time==4.2.1" "graphemeu==0.7.2" Deprecated)
    fi
fi
for pkg in "${PKGS[@]}"; do
    python3 -m pip download -q --no-deps --only-binary=:all: --python-version "$PYVER" --implementation cp \
        "${PLATS[@]}" -d "$DEST" "$pkg"
done
ls -1 "$DEST"
