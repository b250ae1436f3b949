#!/usr/bin/env python3
"""fp16 batched HGEMM at square n = 33..128 on one GPU: hgemm_stream instances against cuBLAS and the roofline.

Standalone (numpy, cupy, torch; no autotune import), so it runs on a bare GPU machine:

    python3 scripts/bench_hgemm_square.py --build build/stream             # nvcc, no GPU: cubins + names.json
    python3 scripts/bench_hgemm_square.py --prebuilt build/stream --out DIR # GPU: check, then time
    python3 scripts/bench_hgemm_square.py --out DIR                        # GPU: compile with NVRTC (CuPy), check, time

1. Correctness: every instance against a float64 reference of the same fp16 data (||C_b - ref_b||_F / ||ref_b||_F
   <= 1e-2 for every matrix b of the batch, every element finite): the first instance of each bound at every square
   n from 1 to its bound in NN and NT, the others at bound - 7 .. bound; rectangular sizes in all four shapes (first
   of a bound) or NN/NT; unpacked leading dimensions and gaps between matrices with NaN there, matrices starting off
   a 16-byte boundary, beta = 0 with NaN-poisoned C, beta != 0, a batch above 65,535, a capped grid (the ring of
   slots wraps many times) and sizes above the bound (the slow path); everything outside C's matrices must stay NaN.
   --nvrtc-check compiles a few instances through NVRTC (CuPy RawModule, the runner's compiler) and checks them too.
2. Timing (NN, alpha = 1, beta = 0, packed; --shapes NN,NT adds NT): per n, batch = ceil(--target-gb / (6 n^2))
   (A + B + C about 1.5 GB: far above L2), every instance whose bound serves n (n <= bound < n + 8) and cuBLAS
   strided-batched through torch.bmm on the same arrays; CUDA events around each launch, --reps repetitions after
   warm-up, the median (p20/p80 kept). Before its time counts, each instance runs once on NaN-poisoned C and 16
   problems of the batch are checked against float64 (and C must hold no NaN).
   roofline fraction = (batch * 2 * 3 n^2 bytes / measured device-to-device copy bandwidth) / time.
Prints the per-n table last (best instance, ms, roofline fractions, speed-up over cuBLAS) and the worst points; writes
bench.csv (every measurement), summary.csv (best per n), meta.json (GPU, clocks, versions, checks) under --out.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import re
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
SOURCE = "hgemm_stream.cuh"
KERNELS = next((p for p in (HERE.parent / "kernels_src", HERE / "kernels_src") if (p / SOURCE).is_file()), HERE)
PARAMS = ("BM", "BN", "BK", "WM", "WN", "NWARPS", "PPB", "STAGES", "BULK")
SHAPES = ("NN", "NT", "TN", "TT")
TOL = 1e-2  # fp16 inputs, fp32 accumulation: relative to the norm of each reference matrix


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


@dataclass(frozen=True)
class Inst:
    """One instance of hgemm_stream: its template arguments after TRANS_A, TRANS_B."""

    label: str
    p: tuple[int, ...]

    @property
    def d(self) -> dict[str, int]:
        return dict(zip(PARAMS, self.p, strict=True))

    def name(self, shape: str) -> str:
        ta, tb = int(shape[0] == "T"), int(shape[1] == "T")
        return f"autotune::hgemm_stream<{', '.join(str(v) for v in (ta, tb, *self.p))}>"

    @property
    def bound(self) -> int:
        return min(self.d["BM"], self.d["BN"], self.d["BK"])

    @property
    def threads(self) -> int:
        return 32 * self.d["NWARPS"]

    def smem(self) -> int:
        """Dynamic shared memory, bytes: the kernel's Geo::SMEM in its largest shape (spaces/hgemm_stream.yaml)."""
        d = self.d
        ip = cdiv(d["BM"], 16 * d["WM"]) * 16 * d["WM"]
        jp = cdiv(d["BN"], 16 * d["WN"]) * 16 * d["WN"]
        kp = cdiv(d["BK"], 16) * 16
        ci = max(ip // 8, cdiv(d["BM"] + 7, 8)) | 1
        cj = max(jp // 8, cdiv(d["BN"] + 7, 8)) | 1
        ck = max(kp // 8, cdiv(d["BK"] + 7, 8)) | 1
        a, b = 8 * max(kp * ci, ip * ck), 8 * max(jp * ck, kp * cj)
        return 2 * d["STAGES"] * d["PPB"] * (a + b) + (8 * d["STAGES"] if d["BULK"] else 0)

    def serves(self, n: int) -> bool:
        return n <= self.bound < n + 8


def variants() -> list[Inst]:
    """Instances per bound b = 40, 48, ..., 128 (serving n = b - 7 .. b): (WM, WN, NWARPS, PPB, STAGES, BULK)."""
    small = [(1, 1, 4, 2, 4, 0), (1, 1, 4, 1, 6, 0), (1, 1, 8, 4, 3, 0), (1, 1, 4, 2, 4, 1)]
    mid = [(1, 1, 4, 1, 5, 0), (2, 2, 4, 1, 4, 0), (1, 1, 8, 2, 3, 0), (2, 2, 4, 1, 4, 1)]
    m72 = [(1, 1, 4, 1, 4, 0), (1, 1, 8, 1, 4, 0), (2, 2, 8, 1, 3, 0), (1, 1, 4, 1, 4, 1)]
    m88 = [(1, 1, 8, 1, 5, 0), (1, 1, 4, 1, 2, 0), (2, 2, 8, 1, 5, 0), (1, 1, 8, 1, 5, 1)]
    m96 = [(2, 2, 8, 1, 5, 0), (2, 2, 4, 1, 2, 0), (2, 2, 8, 1, 2, 0), (2, 2, 8, 1, 5, 1)]
    m104 = [(1, 1, 8, 1, 4, 0), (2, 2, 8, 1, 3, 0), (1, 1, 4, 1, 2, 0), (2, 2, 8, 1, 3, 1)]
    big = [(2, 2, 8, 1, 3, 0), (2, 4, 8, 1, 3, 0), (2, 2, 16, 1, 3, 0), (2, 2, 8, 1, 3, 1)]
    table = {40: small, 48: small, 56: mid, 64: mid, 72: m72, 80: m72, 88: m88, 96: m96, 104: m104, 112: m104}
    table |= {120: big, 128: big}
    out = []
    for b, rows in table.items():
        for wm, wn, nw, ppb, st, bulk in rows:
            label = f"s{b}_{wm}x{wn}w{nw}p{ppb}s{st}" + ("_bulk" if bulk else "")
            out.append(Inst(label, (b, b, b, wm, wn, nw, ppb, st, bulk)))
    return out


def first_of_bound(insts: list[Inst]) -> set[Inst]:
    seen: dict[int, Inst] = {}
    for i in insts:
        seen.setdefault(i.bound, i)
    return set(seen.values())


def shapes_of(inst: Inst, firsts: set[Inst]) -> tuple[str, ...]:
    return SHAPES if inst in firsts else ("NN", "NT")


# ------------------------------------------------------------------------------------------------ build (nvcc)
ENTRY = re.compile(r"Compiling entry function '(_Z\w+)'")
USED = re.compile(r"Used (\d+) registers")
SPILL = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")


def _demangled_args(mangled: str) -> tuple[int, ...]:
    """The template arguments of `autotune::hgemm_stream<...>` from its mangled name (ILi0ELi0ELi40E...E)."""
    body = mangled.split("hgemm_streamI", 1)[1]
    return tuple(int(x) for x in re.findall(r"Li(\d+)E", body.split("EEv", 1)[0] + "E"))


def build(out: Path, insts: list[Inst]) -> None:
    """One cubin per bound with every instance and shape, and names.json: name expression -> cubin, mangled name,
    registers and spills (ptxas -v). Needs nvcc (sm_90), no GPU."""
    out.mkdir(parents=True, exist_ok=True)
    firsts = first_of_bound(insts)
    groups: dict[int, list[str]] = {}
    for i in insts:
        groups.setdefault(i.bound, []).extend(i.name(s) for s in shapes_of(i, firsts))

    def one(bound: int) -> dict:
        cu = out / f"b{bound}.cu"
        refs = "\n".join(f"    reinterpret_cast<const void*>(&{n})," for n in groups[bound])
        cu.write_text(f'#include "{SOURCE}"\n\nconst void* instances[] = {{\n{refs}\n}};\n')
        cmd = ["nvcc", "-std=c++17", "-arch=sm_90", "-cubin", "-Xptxas", "-v", f"-I{KERNELS}", str(cu)]
        cmd += ["-o", str(out / f"b{bound}.cubin")]
        r = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if r.returncode != 0:
            raise RuntimeError(f"nvcc failed on {cu.name}:\n{r.stderr[-3000:]}")
        names, cur = {}, None
        for line in r.stderr.splitlines():
            if m := ENTRY.search(line):
                args = _demangled_args(m.group(1))
                cur = f"autotune::hgemm_stream<{', '.join(map(str, args))}>"
                names[cur] = {"cubin": f"b{bound}.cubin", "mangled": m.group(1)}
            elif cur and (m := SPILL.search(line)):
                names[cur].update(stack=int(m.group(1)), spill_st=int(m.group(2)), spill_ld=int(m.group(3)))
            elif cur and (m := USED.search(line)):
                names[cur]["regs"] = int(m.group(1))
        missing = set(groups[bound]) - set(names)
        if missing:
            raise RuntimeError(f"ptxas did not report {sorted(missing)[:3]}")
        return names

    t0 = time.time()
    with ThreadPoolExecutor(max_workers=2) as pool:
        maps = list(pool.map(one, sorted(groups)))
    names = {k: v for m in maps for k, v in m.items()}
    (out / "names.json").write_text(json.dumps(names, indent=1))
    spills = {k: v for k, v in names.items() if v.get("spill_st") or v.get("stack")}
    print(f"built {len(names)} kernels in {time.time() - t0:.0f} s into {out}; with stack or spills: {len(spills)}")
    for k, v in spills.items():
        print(f"  {k}: {v}")


# ------------------------------------------------------------------------------------------------ load
def load_prebuilt(d: Path, wanted: list[str]) -> dict:
    import cupy as cp

    names = json.loads((d / "names.json").read_text())
    mods: dict[str, object] = {}
    fns = {}
    for n in wanted:
        e = names[n]
        if e["cubin"] not in mods:
            mods[e["cubin"]] = cp.RawModule(path=str(d / e["cubin"]))
        fns[n] = mods[e["cubin"]].get_function(e["mangled"])
    return fns


def cuda_include() -> list[str]:
    import cupy as cp

    cands = [cp.cuda.get_cuda_path() or ""]
    if shutil.which("nvcc"):
        cands.append(str(Path(shutil.which("nvcc")).resolve().parent.parent))
    cands.append("/usr/local/cuda")
    for c in cands:
        inc = Path(c) / "include"
        if (inc / "cuda_fp16.h").is_file():
            return [f"-I{inc}"] + ([f"-I{inc / 'cccl'}"] if (inc / "cccl").is_dir() else [])
    return []


def load_nvrtc(wanted: list[str]) -> dict:
    """NVRTC through CuPy (the runner's compiler and options: -std=c++17, -arch=sm_XY)."""
    import cupy as cp

    arch = cp.cuda.Device().compute_capability
    opts = ("-std=c++17", f"-arch=sm_{arch}", f"-I{KERNELS}", *cuda_include())
    mod = cp.RawModule(code=(KERNELS / SOURCE).read_text(), options=opts, name_expressions=wanted)
    return {n: mod.get_function(n) for n in wanted}


# ------------------------------------------------------------------------------------------------ launching
class Launcher:
    def __init__(self, fns: dict) -> None:
        import cupy as cp

        self.cp = cp
        self.fns = fns
        self.sms = cp.cuda.Device().attributes["MultiProcessorCount"]
        self._occ: dict[tuple[str, int], int] = {}

    def blocks_per_sm(self, name: str, inst: Inst) -> int:
        key = (name, inst.smem())
        if key not in self._occ:
            fn = self.fns[name]
            ptr = fn.kernel.ptr  # a RawKernel's driver function (CuPy 14: the RawKernel itself has no ptr)
            drv = self.cp.cuda.driver
            if inst.smem() > 48 * 1024:
                attr = getattr(drv, "CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES", 8)
                drv.funcSetAttribute(ptr, attr, inst.smem())
            self._occ[key] = drv.occupancyMaxActiveBlocksPerMultiprocessor(ptr, inst.threads, inst.smem())
        return self._occ[key]

    def grid(self, name: str, inst: Inst, batch: int, cap: int | None = None) -> int:
        g = min(cdiv(batch, inst.d["PPB"]), self.sms * max(1, self.blocks_per_sm(name, inst)))
        return min(g, cap) if cap else g

    def launch(self, inst: Inst, shape: str, m, n, k, alpha, a, lda, sa, b, ldb, sb, beta, c, ldc, sc, batch, cap=None):
        import numpy as np

        name = inst.name(shape)
        g = self.grid(name, inst, batch, cap)
        args = (np.int32(m), np.int32(n), np.int32(k), np.float32(alpha), a, np.int32(lda), np.int64(sa), b)
        args += (np.int32(ldb), np.int64(sb), np.float32(beta), c, np.int32(ldc), np.int64(sc), np.int32(batch))
        self.fns[name]((g, 1, 1), (inst.threads, 1, 1), args, shared_mem=inst.smem())


# ------------------------------------------------------------------------------------------------ correctness
@dataclass(frozen=True)
class Case:
    m: int
    n: int
    k: int
    batch: int
    shape: str
    alpha: float
    beta: float
    pad: int = 0  # leading dimension = rows + pad
    gap: int = 0  # stride = cols * ld + gap
    offset: int = 0  # halves before the first matrix (off 16-byte alignment when not a multiple of 8)
    cap: int | None = None  # grid cap


def cases(inst: Inst, first: bool) -> list[Case]:
    b = inst.bound
    out = []
    for n in range(1, b + 1) if first else range(max(1, b - 7), b + 1):
        for s in ("NN", "NT"):
            out.append(Case(n, n, n, 3, s, 1.5, -0.75 if n % 2 else 0.0))
    rect = [(b, max(1, b - 3), max(1, b - 5)), (max(1, b - 6), b, 1), (3, max(1, b - 1), b), (5, 7, 3)]
    for m, n, k in rect:
        for s in SHAPES if first else ("NN", "NT"):
            out.append(Case(m, n, k, 5, s, -0.5, 0.25))
        out.append(Case(m, n, k, 4, "NN", 1.25, 0.5, pad=3))
        out.append(Case(m, n, k, 4, "NT", 1.25, 0.0, pad=1, gap=5, offset=1))
    out.append(Case(b, b, b, 6, "NN", 1.0, 0.0, offset=3, gap=3))  # every column off 16 bytes
    out.append(Case(b, b, b, 6, "NT", 0.5, 0.0, offset=8, gap=8))  # aligned, gaps between matrices
    out.append(Case(8, 8, 8, 70_000, "NT", 1.0, 0.0))  # batch above 65,535
    m = max(1, b - 1)
    out.append(Case(m, max(1, b - 2), b, 50, "NN", -1.5, 0.5, cap=3))  # the ring wraps: many groups per block
    out.append(Case(b, b, b, 61, "NT", -1.25, 0.0, cap=2))
    out.append(Case(b + 3, b + 1, b + 2, 3, "NN", 0.75, 0.5))  # above the bound: slow path
    return out


def stored(cp, rs, batch: int, rows: int, cols: int, pad: int, gap: int, offset: int, fill: bool):
    """(flat buffer, (batch, cols, rows) view of the stored column-major matrices, ld, stride): NaN everywhere but
    the matrices (random in [-1, 1) when `fill`, NaN otherwise)."""
    ld = rows + pad
    stride = cols * ld + gap
    total = offset + max(0, (batch - 1) * stride + (cols - 1) * ld + rows) + 8
    buf = cp.full(total, cp.nan, dtype=cp.float16)
    view = cp.lib.stride_tricks.as_strided(buf[offset:], shape=(batch, cols, rows), strides=(2 * stride, 2 * ld, 2))
    if fill:
        view[...] = rs.uniform(-1.0, 1.0, size=(batch, cols, rows), dtype=cp.float32).astype(cp.float16)
    return buf, view, ld, stride


def run_case(lau: Launcher, inst: Inst, c: Case, rs) -> float:
    """Worst per-matrix relative error (inf: a non-finite element in C, or a write outside C's matrices)."""
    cp = lau.cp
    ta, tb = c.shape[0] == "T", c.shape[1] == "T"
    ar, ac = (c.k, c.m) if ta else (c.m, c.k)
    br, bc = (c.n, c.k) if tb else (c.k, c.n)
    abuf, av, lda, sa = stored(cp, rs, c.batch, ar, ac, c.pad, c.gap, c.offset, True)
    bbuf, bv, ldb, sb = stored(cp, rs, c.batch, br, bc, c.pad, c.gap, c.offset, True)
    cbuf, cv, ldc, sc = stored(cp, rs, c.batch, c.m, c.n, c.pad, c.gap, c.offset, c.beta != 0.0)
    a64 = av.transpose(0, 2, 1).astype(cp.float64)  # (batch, rows, cols) stored matrices
    b64 = bv.transpose(0, 2, 1).astype(cp.float64)
    opa = a64.transpose(0, 2, 1) if ta else a64
    opb = b64.transpose(0, 2, 1) if tb else b64
    ref = c.alpha * (opa @ opb)
    if c.beta != 0.0:
        ref += c.beta * cv.transpose(0, 2, 1).astype(cp.float64)
    lau.launch(
        inst,
        c.shape,
        c.m,
        c.n,
        c.k,
        c.alpha,
        abuf[c.offset :],
        lda,
        sa,
        bbuf[c.offset :],
        ldb,
        sb,
        c.beta,
        cbuf[c.offset :],
        ldc,
        sc,
        c.batch,
        c.cap,
    )
    cp.cuda.Device().synchronize()
    got = cv.transpose(0, 2, 1).astype(cp.float64)
    if not bool(cp.isfinite(got).all()):
        return math.inf
    outside = cbuf.copy()
    ov = cp.lib.stride_tricks.as_strided(outside[c.offset :], shape=cv.shape, strides=cv.strides)
    ov[...] = cp.nan
    if not bool(cp.isnan(outside).all()):
        return math.inf  # the kernel wrote outside C's matrices
    diff = cp.linalg.norm((got - ref).reshape(c.batch, -1), axis=1)
    norm = cp.maximum(cp.linalg.norm(ref.reshape(c.batch, -1), axis=1), 1e-300)
    return float((diff / norm).max())


def check(lau: Launcher, insts: list[Inst], firsts: set[Inst], log: list, jsonl: Path | None = None) -> list[str]:
    """Every case of every instance; one JSON line per instance to `jsonl` as it finishes (a fault that kills the
    process leaves the instances checked before it)."""
    cp = lau.cp
    rs = cp.random.RandomState(7)
    fails = []
    for inst in insts:
        worst, bad, t0 = 0.0, [], time.time()
        cs = cases(inst, inst in firsts)
        for c in cs:
            err = run_case(lau, inst, c, rs)
            worst = max(worst, err)
            if not err <= TOL:
                bad.append(f"{c}: {err:.3g}")
        status = "PASS" if not bad else f"FAIL({len(bad)})"
        print(
            f"check {inst.label:24s} {len(cs):4d} cases worst {worst:.2e} {status} ({time.time() - t0:.1f} s)",
            flush=True,
        )
        log.append({"label": inst.label, "cases": len(cs), "worst": worst, "bad": bad[:20]})
        if jsonl:
            with open(jsonl, "a") as f:
                f.write(json.dumps(log[-1]) + "\n")
        if bad:
            fails.append(inst.label)
            print("   " + "\n   ".join(bad[:8]), flush=True)
    return fails


# ------------------------------------------------------------------------------------------------ timing
def timed(cp, fn, reps: int, warmup: int = 2) -> tuple[float, float, float]:
    for _ in range(warmup):
        fn()
    evs = [(cp.cuda.Event(), cp.cuda.Event()) for _ in range(reps)]
    for s, e in evs:
        s.record()
        fn()
        e.record()
    evs[-1][1].synchronize()
    ts = sorted(cp.cuda.get_elapsed_time(s, e) for s, e in evs)
    q = lambda f: ts[min(len(ts) - 1, int(f * len(ts)))]  # noqa: E731
    return ts[len(ts) // 2] if len(ts) % 2 else 0.5 * (ts[len(ts) // 2 - 1] + ts[len(ts) // 2]), q(0.2), q(0.8)


def copy_bandwidth(cp, nbytes: int = 1 << 30, reps: int = 20) -> float:
    """A device-to-device copy of nbytes, read plus write bytes over the median time."""
    src = cp.empty(nbytes, dtype=cp.uint8)
    dst = cp.empty_like(src)
    src.fill(1)

    def copy() -> None:
        dst.data.copy_from_device_async(src.data, nbytes)

    ms, _, _ = timed(cp, copy, reps)
    return 2 * nbytes / (ms * 1e-3)


def bench_size(
    lau: Launcher, insts: list[Inst], n: int, shapes: list[str], target: float, reps: int, bw: float, rs
) -> list[dict]:
    """Every shape at square size n: cuBLAS (torch.bmm on the same arrays) and each instance that serves n."""
    import torch

    cp = lau.cp
    batch = max(1, math.ceil(target / (6 * n * n)))
    nbytes = 6 * n * n * batch
    a = rs.uniform(-1.0, 1.0, size=(batch, n, n), dtype=cp.float32).astype(cp.float16)
    b = rs.uniform(-1.0, 1.0, size=(batch, n, n), dtype=cp.float32).astype(cp.float16)
    c = cp.empty((batch, n, n), dtype=cp.float16)
    ta, tb, tc = (torch.as_tensor(x, device="cuda") for x in (a, b, c))
    sample = sorted({0, 1, batch // 2, batch - 1, *map(int, rs.randint(0, batch, size=12).get())})
    rows = []
    for shape in shapes:
        # arrays are (batch, cols, rows) of column-major matrices, i.e. row-major A^T and B^T: C^T = op(B)^T A^T
        tbop = tb if shape == "NN" else tb.transpose(1, 2)

        def cublas(tbop=tbop) -> None:
            torch.bmm(tbop, ta, out=tc)

        ms, lo, hi = timed(cp, cublas, reps)
        frac = nbytes / bw / (ms * 1e-3)
        rows.append(
            dict(
                n=n,
                shape=shape,
                batch=batch,
                label="cublas",
                ms=ms,
                p20=lo,
                p80=hi,
                frac=frac,
                ok=True,
                err=0.0,
                blocks_per_sm=0,
            )
        )
        a64 = a[sample].transpose(0, 2, 1).astype(cp.float64)
        b64 = b[sample].transpose(0, 2, 1).astype(cp.float64)
        ref = a64 @ (b64 if shape == "NN" else b64.transpose(0, 2, 1))
        for inst in (i for i in insts if i.serves(n)):

            def ours(inst=inst, shape=shape) -> None:
                lau.launch(inst, shape, n, n, n, 1.0, a, n, n * n, b, n, n * n, 0.0, c, n, n * n, batch)

            c.fill(cp.nan)  # verified run on poisoned C: sampled problems against float64, no NaN anywhere
            ours()
            cp.cuda.Device().synchronize()
            got = c[sample].transpose(0, 2, 1).astype(cp.float64)
            diff = cp.linalg.norm((got - ref).reshape(len(sample), -1), axis=1)
            err = float((diff / cp.linalg.norm(ref.reshape(len(sample), -1), axis=1)).max())
            ok = err <= TOL and not bool(cp.isnan(c).any())
            ms, lo, hi = timed(cp, ours, reps) if ok else (math.nan, math.nan, math.nan)
            rows.append(
                dict(
                    n=n,
                    shape=shape,
                    batch=batch,
                    label=inst.label,
                    ms=ms,
                    p20=lo,
                    p80=hi,
                    frac=nbytes / bw / (ms * 1e-3) if ok else 0.0,
                    ok=ok,
                    err=err,
                    blocks_per_sm=lau.blocks_per_sm(inst.name(shape), inst),
                )
            )
    return rows


def bench(
    lau: Launcher,
    insts: list[Inst],
    sizes: list[int],
    shapes: list[str],
    target: float,
    reps: int,
    bw: float,
    rows: list[dict],
) -> None:
    rs = lau.cp.random.RandomState(11)
    for n in sizes:
        here = bench_size(lau, insts, n, shapes, target, reps, bw, rs)
        lau.cp.get_default_memory_pool().free_all_blocks()
        rows += here
        cub = next(r for r in here if r["label"] == "cublas" and r["shape"] == shapes[0])
        ours = [r for r in here if r["shape"] == shapes[0] and r["label"] != "cublas" and r["ok"]]
        if ours:
            best = min(ours, key=lambda r: r["ms"])
            print(
                f"n={n:4d} batch={best['batch']:7d} best {best['label']:24s} {best['ms']:.4f} ms "
                f"({best['frac']:.3f}) cuBLAS {cub['ms']:.4f} ({cub['frac']:.3f}) x{cub['ms'] / best['ms']:.3f}",
                flush=True,
            )


def summarize(rows: list[dict], shapes: list[str]) -> list[dict]:
    out = []
    for shape in shapes:
        for n in sorted({r["n"] for r in rows if r["shape"] == shape}):
            here = [r for r in rows if r["n"] == n and r["shape"] == shape]
            cub = next(r for r in here if r["label"] == "cublas")
            ours = [r for r in here if r["label"] != "cublas" and r["ok"]]
            if not ours:
                continue
            best = min(ours, key=lambda r: r["ms"])
            out.append(
                dict(
                    n=n,
                    shape=shape,
                    batch=best["batch"],
                    best=best["label"],
                    ms=best["ms"],
                    frac=best["frac"],
                    cublas_ms=cub["ms"],
                    cublas_frac=cub["frac"],
                    speedup=cub["ms"] / best["ms"],
                )
            )
    return out


def gpu_facts() -> dict:
    q = "name,uuid,driver_version,clocks.sm,clocks.mem,clocks.max.sm,temperature.gpu,power.draw"
    try:
        r = subprocess.run(
            ["nvidia-smi", f"--query-gpu={q}", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=20,
            check=False,
        )
        return dict(zip(q.split(","), (x.strip() for x in r.stdout.strip().splitlines()[0].split(",")), strict=False))
    except Exception as e:  # noqa: BLE001 - facts are best effort
        return {"error": str(e)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", type=Path, help="compile every instance with nvcc into this folder and stop")
    ap.add_argument("--prebuilt", type=Path, help="load the cubins of --build instead of compiling with NVRTC")
    ap.add_argument("--out", type=Path, default=Path("results/bench_hgemm_square"))
    ap.add_argument("--sizes", default="33-128", help="square sizes: 'a-b' or a comma list")
    ap.add_argument("--shapes", default="NN")
    ap.add_argument("--target-gb", type=float, default=1.5, help="A + B + C per size, GB")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--only", default="", help="comma-separated labels (default: every instance)")
    ap.add_argument("--no-check", action="store_true")
    ap.add_argument("--no-timing", action="store_true")
    ap.add_argument(
        "--passed", type=Path, help="time only the instances this checks.jsonl (of a --no-timing run) passed"
    )
    ap.add_argument("--nvrtc-check", default="", help="labels to compile through NVRTC too and check")
    a = ap.parse_args()
    insts = variants()
    if a.only:
        keep = set(a.only.split(","))
        insts = [i for i in insts if i.label in keep]
    firsts = first_of_bound(variants())
    if a.build:
        build(a.build, insts)
        return 0

    import cupy as cp
    import torch

    a.out.mkdir(parents=True, exist_ok=True)
    meta: dict = {
        "gpu": gpu_facts(),
        "cupy": cp.__version__,
        "torch": torch.__version__,
        "cuda_runtime": cp.cuda.runtime.runtimeGetVersion(),
        "driver": cp.cuda.runtime.driverGetVersion(),
        "started": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
        "argv": sys.argv,
    }
    try:
        meta["nvrtc"] = cp.cuda.nvrtc.getVersion()
    except Exception:  # noqa: BLE001
        pass
    print(f"GPU {meta['gpu']}  cupy {cp.__version__} torch {torch.__version__}", flush=True)
    wanted = sorted({i.name(s) for i in insts for s in shapes_of(i, firsts)})
    t0 = time.time()
    fns = load_prebuilt(a.prebuilt, wanted) if a.prebuilt else load_nvrtc(wanted)
    print(
        f"loaded {len(fns)} kernels in {time.time() - t0:.1f} s ({'prebuilt' if a.prebuilt else 'NVRTC'})", flush=True
    )
    lau = Launcher(fns)
    log: list = []
    fails: list[str] = []
    if a.nvrtc_check:
        sel = [i for i in insts if i.label in set(a.nvrtc_check.split(","))]
        t0 = time.time()
        nv = load_nvrtc(sorted({i.name(s) for i in sel for s in shapes_of(i, firsts)}))
        print(f"NVRTC compiled {len(nv)} kernels in {time.time() - t0:.1f} s", flush=True)
        fails += [f"nvrtc:{x}" for x in check(Launcher(nv), sel, firsts, log)]
    if not a.no_check:
        fails += check(lau, insts, firsts, log, a.out / "checks.jsonl")
    meta["checks"] = log
    meta["failures"] = fails
    if a.no_timing:
        (a.out / "meta_check.json").write_text(json.dumps(meta, indent=1, default=str))
        print("FAILURES: " + (", ".join(fails) if fails else "none"))
        return 1 if fails else 0
    if a.passed:
        ok = {r["label"] for r in map(json.loads, a.passed.read_text().splitlines()) if not r["bad"]}
        meta["timed_passed_from"] = str(a.passed)
        insts = [i for i in insts if i.label in ok]
    cp.get_default_memory_pool().free_all_blocks()
    bw = copy_bandwidth(cp)
    meta["copy_bandwidth"] = bw
    print(f"device-to-device copy bandwidth (read + write): {bw / 1e12:.3f} TB/s", flush=True)
    if "-" in a.sizes:
        lo, hi = map(int, a.sizes.split("-"))
        sizes = list(range(lo, hi + 1))
    else:
        sizes = [int(x) for x in a.sizes.split(",") if x]
    shapes = a.shapes.split(",")
    good = [i for i in insts if i.label not in set(fails)]
    rows: list[dict] = []
    meta["gpu_before_timing"] = gpu_facts()
    bench(lau, good, sizes, shapes, a.target_gb * 1e9, a.reps, bw, rows)
    meta["gpu_after_timing"] = gpu_facts()
    meta["reps"] = a.reps
    meta["finished"] = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    summary = summarize(rows, shapes)
    for fname, data in (("bench.csv", rows), ("summary.csv", summary)):
        if data:
            with open(a.out / fname, "w", newline="") as f:
                w = csv.DictWriter(f, fieldnames=list(data[0]))
                w.writeheader()
                w.writerows(data)
    (a.out / "meta.json").write_text(json.dumps(meta, indent=1, default=str))

    print(
        f"\nsquare fp16, alpha = 1, beta = 0, packed; copy {bw / 1e12:.3f} TB/s; median of {a.reps}; "
        f"frac = roofline fraction; cuBLAS = torch.bmm (strided batched)"
    )
    print(f"{'n':>4} {'sh':>2} {'batch':>7} {'best':>24} {'ms':>8} {'frac':>6} | {'cuBLAS':>8} {'frac':>6} | {'x':>6}")
    for s in summary:
        print(
            f"{s['n']:>4} {s['shape']:>2} {s['batch']:>7} {s['best']:>24} {s['ms']:>8.4f} {s['frac']:>6.3f} | "
            f"{s['cublas_ms']:>8.4f} {s['cublas_frac']:>6.3f} | {s['speedup']:>6.3f}"
        )
    if summary:
        wf = min(summary, key=lambda s: s["frac"])
        ws = min(summary, key=lambda s: s["speedup"])
        short = [s["n"] for s in summary if s["frac"] < 0.85]
        slow = [s["n"] for s in summary if s["speedup"] < 1.0]
        print(
            f"worst roofline: n = {wf['n']} {wf['shape']} at {wf['frac']:.3f}; worst speed-up: n = {ws['n']} "
            f"{ws['shape']} x{ws['speedup']:.3f}"
        )
        print(f"below 0.85 of the roofline ({len(short)}): {short}")
        print(f"slower than cuBLAS ({len(slow)}): {slow}")
    print("FAILURES: " + (", ".join(fails) if fails else "none"))
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
