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
# Slim the wheels in place: python-constraint2's wheel (8.8 MB) also ships its extension modules built for another
# Python and their C sources (4.8 MB), which no install for PYVER imports; a device call carries 64 MiB in all.
# The RECORD drops their lines (pip does not check it against the files).
python3 - "$DEST" "$PYVER" <<'PY'
import re, sys, zipfile
from pathlib import Path
dest, tag = Path(sys.argv[1]), "cpython-" + sys.argv[2].replace(".", "")
other = re.compile(r"\.cpython-(\d+)-[^/]*\.so$")
for whl in sorted(dest.glob("*.whl")):
    with zipfile.ZipFile(whl) as z:
        names = z.namelist()
        drop = {n for n in names if (m := other.search(n)) and "cpython-" + m.group(1) != tag}
        if drop:  # a C source is dropped only beside a compiled module for this Python
            drop |= {n for n in names if n.endswith(".c") and any(tag in k for k in names if k.startswith(n[:-2] + "."))}
        if not drop:
            continue
        tmp = whl.with_suffix(".slim")
        with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as out:
            for info in z.infolist():
                if info.filename in drop:
                    continue
                data = z.read(info)
                if info.filename.endswith(".dist-info/RECORD"):
                    data = b"".join(l for l in data.splitlines(True) if l.split(b",")[0].decode() not in drop)
                out.writestr(info, data)
    tmp.replace(whl)
    print(f"slimmed {whl.name}: {len(drop)} files for other Pythons dropped")
PY
ls -1 "$DEST"
