#!/usr/bin/env python3
"""CPU benchmark: the time from a `tune_kernel` call (or `autotune sweep`) to its first compile submission, for large
spaces (issue 31, item 6: planning is on the path to the first measurement).

Each case is one of Kernel Tuner's example scripts in tests/data/kt_public (its first `tune_kernel` call, with the
script's own parameters and restrictions) or a sweep config of examples/. The call runs on autotune's real path
(`autotune.kernel_tuner.tune_kernel` -> space folder -> `run_sweep` -> plan -> first batch) with a stand-in GPU
backend that binds the first batch's jobs the way `GpuBackend.run` does (`task_of`: geometry, name expression,
defines; one compile request key each) and stops there: nothing is compiled or measured, no GPU is needed.

  python3 scripts/bench_plan_speed.py                      # sepconv and reduction, best of 3 per case
  python3 scripts/bench_plan_speed.py --profile 25         # and cProfile's top 25 entries (by cumulative time)
  python3 scripts/bench_plan_speed.py --cases sepconv examples/stencil/sweep.yaml

Reduction's script allocates 800M floats (3.2 GB) for its data; here its `size` is cut to 8M (the data is written
to the space folder, not planned: the plan is the same). Times are wall-clock seconds on this machine, printed;
nothing is asserted.
"""

from __future__ import annotations

import argparse
import cProfile
import hashlib
import io
import json
import os
import pstats
import shutil
import sys
import tempfile
import time
import types
from pathlib import Path
from typing import Any, Sequence

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
CASES_DIR = ROOT / "tests" / "data" / "kt_public"
KT_CASES = {  # script, entry, files it reads, source replacements (documented in the module docstring)
    "sepconv": ("sepconv.py", "tune", ("convolution.cu",), {}),
    "reduction": ("reduction.py", "tune", ("reduction.cu",), {"size = 800000000": "size = 8000000"}),
    "convolution": ("convolution_correct.py", "tune", ("convolution.cu",), {}),
    "matmul": ("matmul.py", "tune", ("matmul.cu",), {}),
}


class FirstSubmit(BaseException):
    """Raised by the stand-in backend when the runner hands it its first batch."""


class _Captured(BaseException):
    pass


def capture_call(name: str, work: Path) -> tuple[tuple, dict[str, Any]]:
    """The script's first tune_kernel call's arguments (the script's own set-up runs, in `work`)."""
    script, entry, files, patches = KT_CASES[name]
    for f in files:
        shutil.copy(CASES_DIR / f, work / f)
    text = (CASES_DIR / script).read_text()
    for old, new in patches.items():
        assert old in text, f"{script}: {old!r} not found"
        text = text.replace(old, new)
    got: dict[str, Any] = {}

    def tune_kernel(*args: Any, **kw: Any) -> Any:
        got["args"], got["kw"] = args, kw
        raise _Captured

    fake = types.ModuleType("kernel_tuner")
    fake.tune_kernel = tune_kernel  # type: ignore[attr-defined]
    fake.run_kernel = lambda n, s, p, arguments, *a, **k: [x.copy() if hasattr(x, "copy") else x for x in arguments]  # type: ignore[attr-defined]
    util = types.ModuleType("kernel_tuner.util")
    util.get_config_string = str  # type: ignore[attr-defined]
    fake.util = util  # type: ignore[attr-defined]
    saved = {k: sys.modules.get(k) for k in ("kernel_tuner", "kernel_tuner.util")}
    sys.modules["kernel_tuner"], sys.modules["kernel_tuner.util"] = fake, util
    cwd = os.getcwd()
    os.chdir(work)
    try:
        module = types.ModuleType(f"kt_case_{name}")
        exec(compile(text, str(CASES_DIR / script), "exec"), module.__dict__)
        try:
            getattr(module, entry)()
        except _Captured:
            pass
    finally:
        os.chdir(cwd)
        for k, v in saved.items():
            if v is None:
                sys.modules.pop(k, None)
            else:
                sys.modules[k] = v
    return got["args"], got["kw"]


def stop_at_submit() -> Any:
    """A backend that stops at the first compile submission (`StopAtSubmit`); its class is made at the first call, so
    that the base class (the space machinery, NumPy) is imported within the timed call, as a real sweep imports it."""
    from autotune.sweep.backends.base import Backend

    class StopAtSubmit(Backend):
        """A GPU backend's start-up, up to the first compile submission: binds each job as GpuBackend.run does."""

        tol = None

        def __init__(self) -> None:
            self.submitted_at: float | None = None
            self.first_batch: list[tuple[str, tuple]] = []

        def ready(self, hint: str = "") -> None:
            pass

        def device_info(self) -> Any:
            from autotune.vocab import DeviceInfo

            return DeviceInfo(
                name="NVIDIA H100 80GB HBM3",
                uuid="GPU-bench-plan",
                sm_count=132,
                cc=90,
                sm_clock_mhz=None,
                mem_clock_mhz=None,
                l2_bytes=50 << 20,
                copy_bandwidth=3e12,
                driver="0",
                cuda_runtime="0",
                nvrtc="0",
                cupy="0",
                free_bytes=80 << 30,
            )

        def run(self, jobs: Sequence[Any]) -> Any:
            from autotune.sweep.backends.local import task_of

            tasks = [task_of(j) for j in jobs]
            self.submitted_at = time.perf_counter()
            self.first_batch = [(t.instance_id, tuple(v.defines for v in t.variants)) for t in tasks]
            raise FirstSubmit

        def baseline(self, *a: Any) -> Any:
            raise AssertionError("not reached")

        def close(self) -> None:
            pass

    return StopAtSubmit()


def plan_digest(plans: Sequence[Any]) -> str:
    """A digest of everything a sweep's plan holds, in order: per space its name, each instance's id, parameters and
    points, the funnel counts, the limits and the sharing work (the behaviour tests compare it across versions)."""
    h = hashlib.sha256()
    for plan in plans:
        h.update(repr((plan.space.name, plan.funnel_count, plan.max_instances, plan.share)).encode())
        for inst, pts in plan.work.items():
            h.update(repr((inst.id, inst.params, [p.key for p in pts])).encode())
        for inst, pts in plan.extra.items():
            h.update(repr(("extra", inst.id, [p.key for p in pts])).encode())
    return h.hexdigest()[:16]


class _Plans:
    """Records the plans `run_sweep` makes (runner.plan_sweep wrapped for one call)."""

    def __enter__(self) -> "_Plans":
        from autotune.sweep import runner

        self.runner, self.saved, self.plans = runner, runner.plan_sweep, []

        def recorded(*a: Any, **k: Any) -> Any:
            plans = self.saved(*a, **k)
            self.plans = plans
            return plans

        runner.plan_sweep = recorded  # type: ignore[assignment]
        return self

    def __exit__(self, *exc: Any) -> None:
        self.runner.plan_sweep = self.saved  # type: ignore[assignment]


def run_kt(name: str, args: tuple, kw: dict[str, Any], work: Path) -> dict[str, Any]:
    """One tune_kernel call up to its first submission: seconds from the call and its phases."""
    import autotune.interop.kt_sweep as attempt
    import autotune.interop.tune_kernel as facade

    saved = attempt._gpu_backend
    attempt._gpu_backend = lambda device, tol: backend  # type: ignore[assignment]
    folder = work / "space"
    shutil.rmtree(folder, ignore_errors=True)
    phases: dict[str, float] = {}
    orig_sweep = attempt._sweep

    def sweep(*a: Any, **k: Any) -> Any:
        try:
            return orig_sweep(*a, **k)
        finally:
            phases["call_start"] = a[4]

    attempt._sweep = sweep  # type: ignore[assignment]
    t0 = time.perf_counter()
    backend = stop_at_submit()  # (within the timed call: its base class's imports are the call's)
    try:
        with _Plans() as plans:
            facade.tune_kernel(*args, **{**kw, "quiet": True, "verbose": False}, space_dir=str(folder))
    except FirstSubmit:
        pass
    finally:
        attempt._gpu_backend, attempt._sweep = saved, orig_sweep  # type: ignore[assignment]
    assert backend.submitted_at is not None, f"{name}: no batch was submitted"
    return {"first_submit_s": backend.submitted_at - t0, "batch": backend.first_batch, "plans": plans.plans}


def run_config(path: str, work: Path) -> dict[str, Any]:
    """`autotune sweep CONFIG` up to its first submission (into a fresh database in `work`)."""
    from autotune.store.store import Store
    from autotune.sweep.config import load_config
    from autotune.sweep.runner import run_sweep

    class Quiet:
        def start(self, *a: Any) -> None: ...

        def measured(self, *a: Any) -> None: ...

        def note(self, *a: Any) -> None: ...

    db = work / "bench.sqlite"
    db.unlink(missing_ok=True)
    backend = stop_at_submit()
    t0 = time.perf_counter()
    cfg = load_config(path)
    with Store.open(f"sqlite:///{db}") as store, _Plans() as plans:
        try:
            run_sweep(cfg, store, backend, Quiet())  # type: ignore[arg-type]
        except FirstSubmit:
            pass
    assert backend.submitted_at is not None, f"{path}: no batch was submitted"
    return {"first_submit_s": backend.submitted_at - t0, "batch": backend.first_batch, "plans": plans.plans}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cases", nargs="+", default=["sepconv", "reduction"], help="kt_public case names or configs")
    ap.add_argument("--repeat", type=int, default=3, help="timed calls per case (best and all are printed)")
    ap.add_argument("--profile", type=int, default=0, metavar="N", help="print cProfile's top N entries per case")
    ap.add_argument("--json", type=Path, help="write the figures (and the first batch's ids and defines) here")
    a = ap.parse_args(argv)
    base = Path(tempfile.mkdtemp(prefix="bench_plan_"))
    out: dict[str, Any] = {}
    try:
        for case in a.cases:
            work = base / Path(case).stem
            work.mkdir(parents=True, exist_ok=True)
            if case in KT_CASES:
                call_args, call_kw = capture_call(case, work)

                def once(
                    case: str = case, work: Path = work, call_args: tuple = call_args, call_kw: dict = call_kw
                ) -> dict[str, Any]:
                    return run_kt(case, call_args, call_kw, work)
            else:

                def once(case: str = case, work: Path = work) -> dict[str, Any]:
                    return run_config(case, work)

            times, result = [], {}
            for _ in range(a.repeat):
                result = once()
                times.append(result["first_submit_s"])
            digest = plan_digest(result["plans"])
            batch = hashlib.sha256(repr(result["batch"]).encode()).hexdigest()[:16]
            out[case] = {"first_submit_s": times, "best_s": min(times), "plan": digest, "first_batch": batch}
            print(
                f"{case}: call -> first submission {min(times):.3f} s (best of {a.repeat}: "
                f"{', '.join(f'{t:.3f}' for t in times)}); {sum(len(p.work) for p in result['plans'])} instances "
                f"planned (digest {digest}), first batch {len(result['batch'])} (digest {batch})"
            )
            if a.profile:
                prof = cProfile.Profile()
                prof.enable()
                once()
                prof.disable()
                s = io.StringIO()
                pstats.Stats(prof, stream=s).sort_stats("cumulative").print_stats(a.profile)
                print(s.getvalue())
                s = io.StringIO()
                pstats.Stats(prof, stream=s).sort_stats("tottime").print_stats(a.profile)
                print(s.getvalue())
    finally:
        shutil.rmtree(base, ignore_errors=True)
    if a.json:
        a.json.write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
