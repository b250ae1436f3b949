"""Device harness for the GPU runner (compile, verify, time, isolation). Prints a table last.

    python3 scripts/check_worker.py [--out DIR]

1. the GPU and software stack (device_info, measured copy bandwidth);
2. NVRTC cost per instance at 1, 8 and 24 name expressions per call (fresh caches, one process),
   and the cost of a cache hit;
3. a sweep of the gemm_naive space (soft constraints on) on a few test points through GpuBackend
   (process pool + GPU worker), cold cache then warm cache: configurations per second;
4. cuBLAS on the same points, same protocol, and the best naive instance against it and the roofline;
5. the same instance timed twice in one run (repeatability);
6. failure isolation: compile error, wrong result, illegal address, hang, each followed by a good
   measurement.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path


from autotune.problems.gemm import GEMM, gemm_point
from autotune import paths
from autotune.sweep.compile.nvrtc import CompileCache, CompileRequest, compile_batch
from autotune.devices import get_device
from autotune.space.generator import generate
from autotune.vocab import Measurement
from autotune.sweep.backends.base import Job
from autotune.space.spec import load_space
from autotune.sweep.backends.local import GpuBackend
from autotune.sweep.backends.tasks import KernelTask, Variant

TEST_KERNELS = paths.ROOT / "tests" / "data" / "kernels"
POINTS = (
    gemm_point("fp32", "NN", 32, 32, 32, 20_000),
    gemm_point("fp64", "NT", 16, 16, 16, 50_000),
    gemm_point("fp16", "TN", 4, 4, 4, 200_000),
)


def row(*cols: object) -> str:
    return " | ".join(str(c) for c in cols)


def compile_costs(arch: int) -> list[str]:
    shapes = [(a, b) for a in (0, 1) for b in (0, 1)]
    names = tuple(
        f"autotune::gemm_naive<float, float, {a}, {b}, {x}, {y}>"
        for a, b in shapes
        for x, y in ((16, 8), (32, 4), (8, 8), (16, 16), (32, 8), (4, 32))
    )
    src = paths.KERNELS_DIR / "gemm_naive.cuh"
    lines = []
    for per_call in (1, 8, len(names)):
        with tempfile.TemporaryDirectory() as d:
            t0 = time.perf_counter()
            for i in range(0, len(names), per_call):
                out = compile_batch(CompileRequest(src, names[i : i + per_call], arch, (paths.KERNELS_DIR,)), Path(d))
                assert all(k.ok for k in out), out[0].log
            wall = time.perf_counter() - t0
            lines.append(
                row(
                    f"NVRTC, {per_call} per call",
                    f"{len(names)} instances",
                    f"{wall / len(names) * 1e3:.1f} ms/instance",
                )
            )
            if per_call == len(names):
                t0 = time.perf_counter()
                out = compile_batch(CompileRequest(src, names, arch, (paths.KERNELS_DIR,)), Path(d))
                hit = time.perf_counter() - t0
                assert all(k.cached for k in out)
                blobs = len(list((Path(d) / "blobs").iterdir()))
                lines.append(
                    row(
                        "cache hit",
                        f"{len(names)} instances",
                        f"{hit / len(names) * 1e3:.2f} ms/instance, {blobs} blob",
                    )
                )
    return lines


def sweep(backend: GpuBackend, jobs: list[Job]) -> tuple[list[Measurement], float]:
    t0 = time.perf_counter()
    got = list(backend.run(jobs))
    return got, time.perf_counter() - t0


def failure_tasks() -> list[tuple[str, KernelTask]]:
    p = gemm_point("fp32", "NN", 37, 29, 16, 64)
    grid = (3, 4, 64)

    def task(name: str, template: str, src: Path, extra: str = "") -> KernelTask:
        v = Variant(p, f"{template}<float, float, 0, 0{extra}>", grid, (16, 8, 1))
        return KernelTask(name, src, "strided", (v,), GEMM, GEMM.scalars(), 10)

    good = task("naive", "autotune::gemm_naive", paths.KERNELS_DIR / "gemm_naive.cuh", ", 16, 8")
    out = []
    for name, template in (
        ("broken", "gemm_broken"),
        ("wrong", "gemm_wrong"),
        ("fault", "gemm_fault"),
        ("hang", "gemm_hang"),
    ):
        out += [(name, task(name, f"autotune_test::{template}", TEST_KERNELS / "faulty.cuh")), (f"after {name}", good)]
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, default=Path("."))
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    table: list[str] = []
    record: dict = {}
    cache = Path(tempfile.mkdtemp(prefix="autotune-cache-"))
    with GpuBackend(cache_dir=cache, timeout_s=30, include_dirs=(paths.KERNELS_DIR, TEST_KERNELS)) as backend:
        info = backend.device_info()
        record["device"] = asdict(info)
        table.append(
            row(
                "GPU",
                info.name,
                f"cc {info.cc}, {info.sm_count} SMs, L2 {info.l2_bytes >> 20} MiB",
                f"SM clock {info.sm_clock_mhz} MHz, mem clock {info.mem_clock_mhz} MHz",
            )
        )
        table.append(
            row(
                "software",
                f"driver {info.driver}",
                f"CUDA runtime {info.cuda_runtime}",
                f"NVRTC {info.nvrtc}, CuPy {info.cupy}",
            )
        )
        table.append(row("copy bandwidth (1 GiB D2D, read+write)", f"{info.copy_bandwidth / 1e12:.3f} TB/s"))
        table += compile_costs(info.cc)

        space = load_space("gemm_naive")
        instances = generate(space, get_device("H100")).instances()
        jobs = [Job(space, inst, POINTS, GEMM.scalars(), 20) for inst in instances]
        got, cold = sweep(backend, jobs)
        status = {}
        for m in got:
            status[m.status.value] = status.get(m.status.value, 0) + 1
        n = len(got)
        table.append(
            row(
                "sweep, cold cache",
                f"{len(instances)} instances x {len(POINTS)} points",
                f"{cold:.1f} s, {n / cold:.1f} measurements/s",
                json.dumps(status),
            )
        )
        warm_backend_got, warm = sweep(backend, jobs)
        table.append(
            row(
                "sweep, warm cache",
                f"{n} measurements",
                f"{warm:.1f} s, {n / warm:.1f} measurements/s",
                f"restarts {backend.restarts}",
            )
        )
        record["sweep"] = [asdict(m) for m in got + warm_backend_got]

        for p in POINTS:
            ours = [m for m in got if m.point == p and m.median_ms]
            best = min(ours, key=lambda m: m.median_ms)
            again = next(m for m in warm_backend_got if m.point == p and m.instance_id == best.instance_id)
            cb = backend.baseline(GEMM, p, GEMM.scalars(), 50)
            record.setdefault("cublas", []).append(asdict(cb))
            roof = p.bytes_moved(False) / info.copy_bandwidth * 1e3
            name = next(i.name for i in instances if i.id == best.instance_id)
            table.append(
                row(
                    f"{p.key}",
                    f"best naive {name} {best.median_ms * 1e3:.1f} us "
                    f"(p20 {best.p20_ms * 1e3:.1f}, p80 {best.p80_ms * 1e3:.1f}, {best.reps} reps, {best.l2_protection})",
                    f"same instance again {again.median_ms * 1e3:.1f} us",
                    f"cuBLAS {cb.status.value} {cb.median_ms * 1e3 if cb.median_ms else float('nan'):.1f} us",
                    f"roofline {roof * 1e3:.1f} us -> naive {roof / best.median_ms:.2f}, cuBLAS "
                    f"{roof / cb.median_ms if cb.median_ms else float('nan'):.2f}",
                )
            )
            regs = statistics.median(m.registers for m in ours)
            table.append(row("", f"registers median {regs}", f"max rel err {max(m.max_rel_err for m in ours):.2e}"))

        failures = []
        for label, task in failure_tasks():
            backend.timeout_s = 5 if label == "hang" else 30
            t0 = time.perf_counter()
            (m,) = backend.run_tasks([task])
            failures.append(
                row(
                    f"isolation: {label}",
                    m.status.value,
                    f"{time.perf_counter() - t0:.1f} s",
                    (m.error or "")[:90].replace("\n", " "),
                )
            )
            record.setdefault("failures", []).append(asdict(m))
        table += failures
        table.append(row("worker restarts", backend.restarts))
        table.append(row("cache files", sum(1 for _ in CompileCache(cache).root.rglob("*.json")), "index entries"))

    (args.out / "check_worker.json").write_text(json.dumps(record, default=str, indent=1))
    print("\n".join(table))
    return 0


if __name__ == "__main__":
    sys.exit(main())
