"""numpy.allclose on the GPU without CuPy's JIT kernels: one small comparison kernel of our own per dtype pair.

The GPU worker checks every configuration of a `tune_kernel` call with an `answer` (the generated check,
autotune/interop/kt_space.py) on the device. `cupy.allclose` compiles CuPy's elementwise and reduction kernels at
their first use; from a fresh CuPy kernel cache (a new machine, a benchmark's fresh cache) that took 4.4 s on a
16-core H100 host while the compile pool held every core, and the first measurement waited for it. The kernel here
includes no header and calls no function: one NVRTC call of about 0.1 s, started when the worker starts (`start_compiles`, a thread: NVRTC
runs without the GIL) and loaded by the thread that checks (no module is loaded while another thread times).

`allclose(expected, got, atol, rtol, equal_nan)` follows numpy.isclose(got, ...)'s rule as numpy.allclose(expected,
got) applies it: |expected - got| <= atol + rtol * |got|, infinities equal only to themselves, NaNs equal only with
`equal_nan`; computed in float32 when both arrays are float32 (as NumPy 2 does with a Python float atol), else in
float64, without fused multiply-adds (NumPy's rounding). It returns None where it cannot decide (a dtype it does not know, sizes that differ, NVRTC failing): the
caller compares on the host then.
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

CTYPES = {
    "float32": "float",
    "float64": "double",
    "int8": "signed char",
    "uint8": "unsigned char",
    "int16": "short",
    "uint16": "unsigned short",
    "int32": "int",
    "uint32": "unsigned int",
    "int64": "long long",
    "uint64": "unsigned long long",
}
THREADS = 256
MAX_BLOCKS = 4096

_SOURCE = r"""
extern "C" __global__ void autotune_allclose(const {te} *e, const {tg} *g, unsigned long long n, double atol,
                                             double rtol, int equal_nan, int *bad) {{
    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n;
         i += (unsigned long long)gridDim.x * blockDim.x) {{
        {tc} a = ({tc})e[i], b = ({tc})g[i];
        bool nan_a = a != a, nan_b = b != b, ok;
        if (nan_a || nan_b) ok = equal_nan && nan_a && nan_b;
        else if ((a - a) != (a - a) || (b - b) != (b - b)) ok = (a == b);  /* an infinity: equal only to itself */
        else {{
            {tc} d = a - b, m = b < 0 ? -b : b;
            ok = (d < 0 ? -d : d) <= ({tc})atol + ({tc})rtol * m;
        }}
        if (!ok) *bad = 1;
    }}
}}
"""

_lock = threading.Lock()
_binaries: dict[tuple[str, str], bytes | None] = {}  # (expected dtype, got dtype) -> cubin/PTX (None: NVRTC failed)
_functions: dict[tuple[str, str], Any] = {}  # loaded in the checking thread
_threads: list[threading.Thread] = []


def source(te: str, tg: str) -> str:
    """The comparison kernel's source for arrays of dtypes `te` (expected) and `tg` (got), numpy names."""
    tc = "float" if te == tg == "float32" else "double"
    return _SOURCE.format(te=CTYPES[te], tg=CTYPES[tg], tc=tc)


def _arch() -> tuple[str, str]:
    import cupy as cp

    from autotune.sweep.compile.nvrtc import arch_option, nvrtc_archs

    return arch_option(int(cp.cuda.Device().compute_capability), nvrtc_archs())


def _compile(pair: tuple[str, str], arch: tuple[str, str]) -> bytes | None:
    from autotune.sweep.compile.nvrtc import nvrtc_compile

    try:
        binary, _, _ = nvrtc_compile(source(*pair), "autotune_allclose.cu", (), (arch[0], "--fmad=false"), arch[1])
        return binary
    except Exception:  # noqa: BLE001 - any failure (CompileFailed included): the caller compares on the host
        return None


def binary(pair: tuple[str, str]) -> bytes | None:
    """The compiled kernel of `pair`, compiled now unless a thread of `start_compiles` has it or is on it."""
    with _lock:
        if pair in _binaries:
            return _binaries[pair]
        busy = [t for t in _threads if t.is_alive()]
    for t in busy:  # a started compile finishes sooner than a second one
        t.join()
    with _lock:
        if pair in _binaries:
            return _binaries[pair]
    got = _compile(pair, _arch())
    with _lock:
        _binaries[pair] = got
    return got


def start_compiles(pairs: tuple[tuple[str, str], ...] = (("float32", "float32"), ("float64", "float64"))) -> None:
    """Compile the kernels of `pairs` in a thread (the GPU worker's start: CuPy imported, context made)."""
    arch = _arch()

    def run() -> None:
        for pair in pairs:
            with _lock:
                if pair in _binaries:
                    continue
            got = _compile(pair, arch)
            with _lock:
                _binaries.setdefault(pair, got)

    t = threading.Thread(target=run, name="autotune-compare-compile", daemon=True)
    with _lock:
        _threads.append(t)
    t.start()


def _function(pair: tuple[str, str]) -> Any:
    if pair not in _functions:
        b = binary(pair)
        if b is None:
            _functions[pair] = None
        else:
            import cupy as cp

            try:
                mod = cp.cuda.function.Module()
                mod.load(b)
                _functions[pair] = (mod, mod.get_function("autotune_allclose"))
            except cp.cuda.driver.CUDADriverError as exc:
                if "NOT_FOUND" not in str(exc) and "INVALID" not in str(exc):
                    raise  # the context's fault (a kernel before this one): the worker reports it
                _functions[pair] = None  # a binary this driver does not take: compared on the host
    got = _functions[pair]
    return None if got is None else got[1]


def allclose(expected: Any, got: Any, atol: float, rtol: float = 1e-5, equal_nan: bool = False) -> bool | None:
    """numpy.allclose(expected, got, rtol, atol, equal_nan) of two CuPy arrays, or None (see the module docstring)."""
    te, tg = str(expected.dtype), str(got.dtype)
    if te not in CTYPES or tg not in CTYPES or expected.size != got.size:
        return None
    if not (expected.flags.c_contiguous and got.flags.c_contiguous):
        return None
    fn = _function((te, tg))
    if fn is None:
        return None
    import cupy as cp

    n = int(expected.size)
    if n == 0:
        return True
    bad = cp.zeros(1, dtype=cp.int32)  # a memset: no kernel of CuPy's
    blocks = max(1, min(MAX_BLOCKS, -(-n // THREADS)))
    fn(
        (blocks,),
        (THREADS,),
        (expected, got, np.uint64(n), np.float64(atol), np.float64(rtol), np.int32(bool(equal_nan)), bad),
    )
    return int(bad.get()[0]) == 0
