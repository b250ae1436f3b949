"""Time launches on the GPU with CUDA events (rules: shared/MEASURING.md).

Protocol for one (instance, test point), after the verified launch:
1. warm-up: `warmup_count(est_ms)` launches (at least 2, enough for ~5 ms, at most 50);
2. repetitions: each launch between its own pair of CUDA events, launch r on data copy r % copies
   (L2 protection by rotation, see launch.py); every repetition's time is kept;
3. launches whose verified launch took less than 1 ms are queued behind a GPU-side spin kernel (reading
   %globaltimer) long enough for the host to enqueue the whole chunk, so the events time the kernels back to
   back and not the Python launch overhead. The spin is sized for `ENQUEUE_US` of host time per launch; when
   the host took longer to enqueue the chunk than the spin lasted (a Python baseline such as PyTorch's, a
   loaded CPU), the GPU may have waited for the host inside an event pair, and the chunk is timed again behind
   a spin sized from the measured enqueue time (up to `SPIN_TRIES` times). Without this PyTorch's softmax
   measured 0.041 ms at 9,126 x 729 where its kernel takes 0.022 ms (a CUDA graph of its calls): its host call
   was timed (results/tables4_h100/softmax_3603/graph_check.md);
4. statistics: median, p20, p80, min, max of the repetitions (`summarize`);
5. unsteady repetitions are timed again: when a complete round's p80/p20 exceeds `UNSTABLE_SPREAD` (1.10; one
   kernel's repetitions on an idle GPU spread by a few percent), the whole round is timed again, up to
   `RETIME_TRIES` (2) more times, and the round with the smallest p80/p20 is kept. A validation's PyTorch softmax
   at 51,528 x 1,010 once spread 0.174-0.282 ms (median 0.208), where a later run measured 0.150 ms with a spread
   of 1%: the refinement scored against it looked wrong where it was right (results/tables5_h100/softmax).

Early stop (status SKIPPED): after the first `EARLY_REPS` (5) repetitions, an instance stops when the
fastest of them exceeds `best_ms / (1 - TOL) * SAFETY` (SAFETY = 1.2), `best_ms` being the best verified
median at this test point so far. It never drops an instance that would be within TOL: such an
instance's median is <= best/(1-TOL); the best only falls as the sweep goes on, so the bound it is held
to only gets stricter later; and a stop needs all 5 first repetitions, its fastest included, to be
more than 20% above that bound, i.e. five launches in a row 20% slower than the instance's own median,
while repetitions of one kernel on an idle GPU spread by a few percent (p80/p20 is stored to check).

Clearly slow instances stop sooner: when the verified launch alone took more than `FAST_FACTOR` (1.5) times that
bound, the instance runs `FAST_REPS` (2) repetitions without warm-up, and stops when the faster of them is also
more than 1.5 times the bound. A kernel of 291 ms where the best had 26 ms then costs 3 launches instead of 8 (a
reduction's first configurations spent 10 s of a 20-s call this way on an H100). Otherwise those two launches count
as warm-up and the usual protocol follows: unwarmed launches (clocks ramping up after a pause for compiles, say) are
never judged by the plain bound.

The clearest stop uses no repetition at all: when the verified launch took at least `ALONE_MIN_MS` (5 ms) and more
than `ALONE_FACTOR` (3) times the bound, i.e. 3.6 / (1 - TOL) times the best, the instance stops on that one time.
What makes a first launch slower than the kernel's own repetitions (a lazily loaded module, clocks ramping up after
an idle GPU, a cold L2 and TLB) costs well under a millisecond each, far from 3.6 times a kernel of 5 ms or more. A
reduction's first configurations on an H100 (26-291 ms a launch, where the best so far took 1-2 ms) then cost one
launch each instead of three: Kernel Tuner's reduction example measured 512-623 configurations in a 20-s
`tune_kernel` call, 281 before (results/bench/kt_switch_h100_kt5.csv, PROVENANCE.md).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from autotune.vocab import DeviceInfo

EARLY_REPS = 5
SAFETY = 1.2
FAST_FACTOR = 1.5  # the verified launch above FAST_FACTOR * the stop bound: judged on FAST_REPS, no warm-up
FAST_REPS = 2
ALONE_FACTOR = 3.0  # the verified launch above ALONE_FACTOR * the stop bound (and >= ALONE_MIN_MS): stop on it alone
ALONE_MIN_MS = 5.0
SPIN_BELOW_MS = 1.0  # a verified launch shorter than this: the chunk is queued behind a spin (item 3)
ENQUEUE_US = 60.0  # host cost of one event pair + launch assumed at first, for sizing the spin
SPIN_TRIES = 3
UNSTABLE_SPREAD = 1.10  # repetitions whose p80/p20 exceeds this are timed again (item 5)
RETIME_TRIES = 2  # rounds timed again at most; the steadiest round is kept

_SPIN_SOURCE = r"""
extern "C" __global__ void autotune_spin(unsigned long long ns) {
    unsigned long long t0, t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    do { asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); } while (t - t0 < ns);
}
"""


@dataclass(frozen=True)
class Stats:
    median_ms: float
    p20_ms: float
    p80_ms: float
    min_ms: float
    max_ms: float
    reps: int


@dataclass(frozen=True)
class TimingPlan:
    reps: int
    best_ms: float | None = None  # best verified median at this point so far (None: no early stop)
    tol: float | None = None  # accepted loss against the best (0.05 = 5 %); None: no early stop
    early_reps: int = EARLY_REPS
    safety: float = SAFETY


# ---------------------------------------------------------------------------------------------- pure
def summarize(times_ms: list[float]) -> Stats:
    t = np.asarray(times_ms, dtype=float)
    p20, med, p80 = np.percentile(t, [20, 50, 80])
    return Stats(float(med), float(p20), float(p80), float(t.min()), float(t.max()), len(t))


def stop_bound(best_ms: float, tol: float, safety: float = SAFETY) -> float:
    if not 0 <= tol < 1:
        raise ValueError(f"TOL must be in [0, 1), got {tol}")
    return best_ms / (1 - tol) * safety


def should_stop(first_times_ms: list[float], plan: TimingPlan) -> bool:
    """The early-stop rule of the module docstring."""
    if plan.best_ms is None or plan.tol is None or len(first_times_ms) < plan.early_reps:
        return False
    return min(first_times_ms[: plan.early_reps]) > stop_bound(plan.best_ms, plan.tol, plan.safety)


def _above(est_ms: float, plan: TimingPlan, factor: float) -> bool:
    """The verified launch above `factor` times the stop bound, where the plan has a bound and more repetitions
    than FAST_REPS (the shared condition of `fast_stop` and `alone_stop`)."""
    if plan.best_ms is None or plan.tol is None or plan.reps <= FAST_REPS:
        return False
    return est_ms > factor * stop_bound(plan.best_ms, plan.tol, plan.safety)


def fast_stop(est_ms: float, plan: TimingPlan) -> bool:
    """Whether the verified launch (`est_ms`) alone marks the instance as clearly slow (module docstring): it is
    then judged on its first FAST_REPS repetitions, without warm-up."""
    return _above(est_ms, plan, FAST_FACTOR)


def alone_stop(est_ms: float, plan: TimingPlan) -> bool:
    """Whether the verified launch (`est_ms`) alone stops the instance (module docstring): a long launch far above
    the bound."""
    return est_ms >= ALONE_MIN_MS and _above(est_ms, plan, ALONE_FACTOR)


def spread(times_ms: list[float]) -> float:
    """p80/p20 of the repetitions (1.0 for fewer than 2, or a p20 of 0)."""
    if len(times_ms) < 2:
        return 1.0
    p20, p80 = np.percentile(np.asarray(times_ms, dtype=float), [20, 80])
    return float(p80 / p20) if p20 > 0 else 1.0


def unsteady(times_ms: list[float], plan: TimingPlan) -> bool:
    """Whether a complete round of repetitions (not stopped early) spreads enough to be timed again (item 5)."""
    return len(times_ms) >= min(plan.reps, EARLY_REPS) and spread(times_ms) > UNSTABLE_SPREAD


def steadiest(rounds: list[list[float]]) -> list[float]:
    """The round with the smallest p80/p20 (the first of equals)."""
    return min(rounds, key=spread)


def warmup_count(est_ms: float) -> int:
    return int(min(50, max(2, math.ceil(5.0 / max(est_ms, 1e-3)))))


def chunk_sizes(plan: TimingPlan) -> list[int]:
    """Repetitions per chunk: the early-stop chunk first (when early stop is on), then the rest."""
    if plan.best_ms is None or plan.tol is None or plan.reps <= plan.early_reps:
        return [plan.reps]
    return [plan.early_reps, plan.reps - plan.early_reps]


# ---------------------------------------------------------------------------------------------- GPU
class Timer:
    """Events, the spin kernel and the protocol; one per GPU process."""

    def __init__(self) -> None:
        import cupy as cp

        self.cp = cp
        self._spin = cp.RawKernel(_SPIN_SOURCE, "autotune_spin")
        self._events: list[tuple[Any, Any]] = []

    def _pairs(self, n: int) -> list[tuple[Any, Any]]:
        while len(self._events) < n:
            self._events.append((self.cp.cuda.Event(), self.cp.cuda.Event()))
        return self._events[:n]

    def time_once(self, launch: Callable[[], None]) -> float:
        start, end = self._pairs(1)[0]
        start.record()
        launch()
        end.record()
        end.synchronize()
        return self.cp.cuda.get_elapsed_time(start, end)

    def run_chunk(self, launch: Callable[[int], None], first: int, n: int, est_ms: float) -> list[float]:
        """Launch r = first .. first+n-1, each between events; launch(r) picks the data copy."""
        pairs = self._pairs(n)
        host_us = ENQUEUE_US
        for _ in range(SPIN_TRIES if est_ms < SPIN_BELOW_MS else 1):
            spin_us = n * host_us + 200.0
            if est_ms < SPIN_BELOW_MS:
                self._spin((1,), (1,), (np.uint64(int(spin_us * 1000)),))
            t0 = time.perf_counter()
            for i, (start, end) in enumerate(pairs):
                start.record()
                launch(first + i)
                end.record()
            enqueue_us = (time.perf_counter() - t0) * 1e6
            pairs[-1][1].synchronize()
            if enqueue_us <= spin_us:
                break
            host_us = 2.0 * enqueue_us / n  # the GPU may have waited for the host: again, behind a longer spin
        return [self.cp.cuda.get_elapsed_time(s, e) for s, e in pairs]

    def measure(self, launch: Callable[[int], None], est_ms: float, plan: TimingPlan) -> tuple[list[float], bool]:
        """(every repetition's time, stopped early?) after warm-up."""
        if alone_stop(est_ms, plan):  # far slower on its verified launch: that one time decides
            return [est_ms], True
        times: list[float] = []
        first = 0
        if fast_stop(est_ms, plan):  # clearly slow: FAST_REPS repetitions without warm-up decide
            cold = self.run_chunk(launch, 0, FAST_REPS, est_ms)
            if fast_stop(min(cold), plan):
                return cold, True
            first = FAST_REPS  # not clearly slow once repeated: the usual protocol, these launches as warm-up
        w = warmup_count(est_ms)
        for r in range(first, w):
            launch(r)
        w = max(w, first)
        for n in chunk_sizes(plan):
            times += self.run_chunk(launch, w + len(times), n, est_ms)
            if len(times) == plan.early_reps and should_stop(times, plan):
                return times, True
        rounds = [times]
        while unsteady(rounds[-1], plan) and len(rounds) <= RETIME_TRIES:  # item 5: the whole round again
            rounds.append(self.run_chunk(launch, w + sum(map(len, rounds)), plan.reps, est_ms))
        return steadiest(rounds), False


def copy_bandwidth(nbytes: int = 1 << 30, reps: int = 20) -> float:
    """Bytes/s (read + write) of a device-to-device copy of `nbytes`: median of `reps` timed copies."""
    import cupy as cp

    src = cp.empty(nbytes // 4, dtype=cp.float32)
    src.data.memset_async(1, src.nbytes)  # not zeros (the copy does not care, the rule does); no CuPy kernel to
    dst = cp.empty_like(src)  # compile: with a fresh kernel cache, cp.ones and dst[...] = src compiled two at start

    def copy() -> None:
        dst.data.copy_from_device_async(src.data, src.nbytes)

    timer = Timer()
    for _ in range(3):
        copy()

    times = [timer.time_once(copy) for _ in range(reps)]
    return 2 * nbytes / (summarize(times).median_ms * 1e-3)


def read_device_info(device: int, props: dict, stamps: dict[str, float] | None = None) -> DeviceInfo:
    """The GPU and software stack: name, UUID, SMs, clocks now (NVML, else the runtime's maxima), L2,
    measured copy bandwidth, driver / runtime / NVRTC / CuPy versions. `stamps` gets the time.monotonic() after
    each part (describe_copy, describe_nvml, describe_nvrtc: the GPU worker's start-up timeline)."""
    import cupy as cp

    from autotune.sweep.compile.nvrtc import nvrtc_version

    stamps = {} if stamps is None else stamps
    rt, p = cp.cuda.runtime, props
    bandwidth = copy_bandwidth()  # first, so that the clocks below are read with the GPU awake
    stamps["describe_copy"] = time.monotonic()
    name = p["name"].decode() if isinstance(p["name"], bytes) else str(p["name"])
    raw_uuid = p.get("uuid", b"")
    h = raw_uuid.hex() if isinstance(raw_uuid, bytes) else str(raw_uuid)
    uuid = f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}" if len(h) == 32 else h
    sm_clock = mem_clock = None
    driver = _version(rt.driverGetVersion())
    try:
        import pynvml as nv

        nv.nvmlInit()
        handle = nv.nvmlDeviceGetHandleByPciBusId(rt.deviceGetPCIBusId(device))
        sm_clock = int(nv.nvmlDeviceGetClockInfo(handle, nv.NVML_CLOCK_SM))
        mem_clock = int(nv.nvmlDeviceGetClockInfo(handle, nv.NVML_CLOCK_MEM))
        uuid = nv.nvmlDeviceGetUUID(handle)
        uuid = uuid.decode() if isinstance(uuid, bytes) else uuid
        dv = nv.nvmlSystemGetDriverVersion()
        driver = f"{dv.decode() if isinstance(dv, bytes) else dv} (CUDA {driver})"
    except Exception:  # noqa: BLE001 - NVML is optional; fall back to the runtime's max clocks
        try:
            sm_clock = rt.deviceGetAttribute(rt.cudaDevAttrClockRate, device) // 1000
            mem_clock = rt.deviceGetAttribute(rt.cudaDevAttrMemoryClockRate, device) // 1000
        except Exception:  # noqa: BLE001
            pass
    stamps["describe_nvml"] = time.monotonic()
    major, minor = nvrtc_version()
    stamps["describe_nvrtc"] = time.monotonic()
    return DeviceInfo(
        name=name,
        uuid=uuid,
        sm_count=int(p["multiProcessorCount"]),
        cc=int(p["major"]) * 10 + int(p["minor"]),
        sm_clock_mhz=sm_clock,
        mem_clock_mhz=mem_clock,
        l2_bytes=int(p["l2CacheSize"]),
        copy_bandwidth=bandwidth,
        driver=driver,
        cuda_runtime=_version(rt.runtimeGetVersion()),
        nvrtc=f"{major}.{minor}",
        cupy=cp.__version__,
        free_bytes=int(rt.memGetInfo()[0]),
    )


def _version(v: int) -> str:
    return f"{v // 1000}.{(v % 1000) // 10}"
