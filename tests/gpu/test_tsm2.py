"""TSM2 and ISM2 against a float64 reference on the GPU (CuPy): every shape, sizes the tiles do not divide,
alpha and beta other than 0 and 1, leading dimensions larger than the matrices, NaN-poisoned C for beta = 0."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from autotune.paths import KERNELS_DIR

pytestmark = pytest.mark.gpu

cp = pytest.importorskip("cupy")
try:
    _ndev = cp.cuda.runtime.getDeviceCount()
except Exception:  # noqa: BLE001 - no driver
    _ndev = 0
if _ndev == 0:
    pytest.skip("no CUDA GPU", allow_module_level=True)

CTYPE = {"fp32": "float", "fp64": "double"}
DTYPE = {"fp32": np.float32, "fp64": np.float64}
TOL = {"fp32": 1e-5, "fp64": 1e-12}
SHAPES = {"NN": (0, 0), "NT": (0, 1), "TN": (1, 0), "TT": (1, 1)}

# (T1, T2, T3, KS, RPT, BPF, AST): paper configuration, k-split, rows per thread, T3 == T1, T2 not a power of
# two, both B prefetch modes, cp.async pipelines of A
TSM2 = [
    (128, 4, 4, 1, 1, 1, 0),
    (64, 16, 8, 4, 1, 0, 0),
    (32, 8, 4, 8, 2, 1, 0),
    (32, 3, 32, 2, 1, 0, 0),
    (64, 2, 2, 2, 4, 0, 0),
    (128, 16, 4, 2, 1, 1, 0),
    (64, 16, 8, 2, 1, 0, 3),
    (32, 7, 4, 4, 2, 0, 4),
    (32, 3, 32, 2, 1, 0, 2),
]
# (T1, T2, T3, TCF)
ISM2 = [(128, 8, 8, 1), (64, 16, 4, 4), (32, 5, 2, 64)]


def _names(kernel: str, configs: list[tuple[int, ...]]) -> list[str]:
    out = []
    for prec, (ta, tb), cfg in itertools.product(CTYPE, SHAPES.values(), configs):
        out.append(f"autotune::{kernel}<{CTYPE[prec]}, {ta}, {tb}, {', '.join(map(str, cfg))}>")
    return out


@pytest.fixture(scope="module")
def module():
    names = _names("tsm2", TSM2) + _names("ism2", ISM2)
    mod = cp.RawModule(
        code=(KERNELS_DIR / "tsm2.cuh").read_text(),
        options=("-std=c++17", f"--include-path={KERNELS_DIR}"),
        name_expressions=names,
    )
    mod.compile()
    return mod


def _operand(rng, rows: int, cols: int, ld: int, dt):
    """A column-major rows x cols matrix inside an ld x cols allocation (ld >= rows)."""
    full = cp.asarray(rng.uniform(-1, 1, (ld, cols)), dtype=dt, order="F")
    return full, full[:rows]


def _run(
    module,
    kernel: str,
    cfg: tuple[int, ...],
    prec: str,
    shape: str,
    m: int,
    n: int,
    k: int,
    alpha: float,
    beta: float,
    seed: int = 0,
) -> tuple[float, bool]:
    rng = np.random.default_rng(seed)
    dt = DTYPE[prec]
    ta, tb = SHAPES[shape]
    a_rows, a_cols = (k, m) if ta else (m, k)
    b_rows, b_cols = (n, k) if tb else (k, n)
    lda, ldb, ldc = a_rows + 3, b_rows + 5, m + 2
    A_full, A = _operand(rng, a_rows, a_cols, lda, dt)
    B_full, B = _operand(rng, b_rows, b_cols, ldb, dt)
    C_full, C0 = _operand(rng, m, n, ldc, dt)
    C0 = C0.copy()
    pad_before = C_full[m:].copy()
    if beta == 0.0:
        C_full[:m] = cp.nan  # must not be read
    opA = A.astype(cp.float64).T if ta else A.astype(cp.float64)
    opB = B.astype(cp.float64).T if tb else B.astype(cp.float64)
    ref = alpha * (opA @ opB)
    if beta != 0.0:
        ref += beta * C0.astype(cp.float64)

    name = f"autotune::{kernel}<{CTYPE[prec]}, {ta}, {tb}, {', '.join(map(str, cfg))}>"
    fn = module.get_function(name)
    t1 = cfg[0]
    per_block = t1 * (cfg[4] if kernel == "tsm2" else cfg[3])  # RPT rows per thread, or TCF
    grid = (-(-m // per_block), 1, 1)
    block = (t1, cfg[3], 1) if kernel == "tsm2" else (t1, 1, 1)
    i32, i64 = np.int32, np.int64
    fn(
        grid,
        block,
        (
            i32(m),
            i32(n),
            i32(k),
            dt(alpha),
            A_full,
            i32(lda),
            i64(0),
            B_full,
            i32(ldb),
            i64(0),
            dt(beta),
            C_full,
            i32(ldc),
            i64(0),
            i32(1),
        ),
    )
    cp.cuda.Device().synchronize()
    C = C_full[:m].astype(cp.float64)
    untouched = bool(cp.all(C_full[m:] == pad_before))
    if bool(cp.isnan(C).any()):
        return float("inf"), untouched
    return float(cp.linalg.norm(C - ref) / cp.linalg.norm(ref)), untouched


# (m, n, k): k spans several B tiles with a ragged last one; m below and above a block; n above T2 (passes)
TSM2_SIZES = [(1037, 7, 777), (45, 16, 2049), (300, 1, 1), (2000, 13, 130)]


@pytest.mark.parametrize("prec", list(CTYPE))
@pytest.mark.parametrize("shape", list(SHAPES))
@pytest.mark.parametrize("cfg", TSM2, ids=lambda c: "T1_{}_T2_{}_T3_{}_KS_{}_RPT_{}_BPF_{}_AST_{}".format(*c))
def test_tsm2_matches_reference(module, prec: str, shape: str, cfg: tuple[int, ...]) -> None:
    for i, (m, n, k) in enumerate(TSM2_SIZES):
        for alpha, beta in ((1.5, -0.75), (-0.5, 0.0)):
            err, untouched = _run(module, "tsm2", cfg, prec, shape, m, n, k, alpha, beta, seed=i)
            assert err <= TOL[prec], f"m={m} n={n} k={k} alpha={alpha} beta={beta}: rel err {err:.3e}"
            assert untouched, "rows of C between m and ldc were written"


ISM2_SIZES = [(100_003, 8, 8), (5001, 16, 16), (777, 3, 300), (31, 17, 5)]


@pytest.mark.parametrize("prec", list(CTYPE))
@pytest.mark.parametrize("shape", list(SHAPES))
@pytest.mark.parametrize("cfg", ISM2, ids=lambda c: "T1_{}_T2_{}_T3_{}_TCF_{}".format(*c))
def test_ism2_matches_reference(module, prec: str, shape: str, cfg: tuple[int, ...]) -> None:
    for i, (m, n, k) in enumerate(ISM2_SIZES):
        for alpha, beta in ((1.5, -0.75), (-0.5, 0.0)):
            err, untouched = _run(module, "ism2", cfg, prec, shape, m, n, k, alpha, beta, seed=10 + i)
            assert err <= TOL[prec], f"m={m} n={n} k={k} alpha={alpha} beta={beta}: rel err {err:.3e}"
            assert untouched, "rows of C between m and ldc were written"
