"""The TSM2/ISM2 analytical model (seed 001, Sections 3.6 and 5) as pure code.

From a device's figures (bandwidth, peak flop rate, registers and shared memory per SM, thread limits)
it estimates, for tile parameters t2 (C columns per thread) and t3 (A elements in flight per thread):

- occupancy: threads per SM = min(HW max, R_SM / R_thread, S_SM / S_thread), with
  R_thread = (3 t2 + 2 t3) * bytes / 4 + C_regs and S_thread = t2 * bytes (paper, "Max SM occupancy");
- memory utilisation by Little's law: bytes in flight per SM (occupancy * t3 * bytes) over the bytes
  needed in flight (latency_mem * bandwidth / SM count), capped at 1;
- compute utilisation by Little's law: FMAs in flight per SM (occupancy * t3 * t2) over the FMAs needed
  in flight (latency_fma * FMA lanes per SM), capped at 1;
- the compute/memory threshold t2* = peak_flops * bytes / bandwidth: with t2 <= t2* the inner loop is
  memory-bound (r = time_comp / time_mem = t2 * bandwidth / (peak * bytes) <= 1).

Note on the threshold: the paper prints t2* = Peak Perf / (Peak Band x bytes), but its own derivation
(r above) and its reported values (K40c ~ 40, M40 ~ 6, P100 ~ 50 in double precision) give
t2* = Peak Perf x bytes / Peak Band; this module follows the derivation and the reported values.

Parameter choice (Alg. 5): for a memory-bound problem (n <= t2*) minimise the modelled time of reading A,
m k (n / t2) bytes / (bandwidth * Util_mem(t2, t3)), over 1 <= t2 <= n and t3 in a candidate set; for a
compute-bound one minimise the compute time over t2* <= t2 <= n and the memory time over t2 <= t2*, and
keep the better. The paper runs gradient descent on a continuous relaxation; this module searches the
integer grid exhaustively (same objective, no rounding step). t1 is picked among the block sizes that
fill the modelled occupancy best (the paper profiles it).

Extensions that are not in the paper, marked as such in `Tsm2Choice`: `ks` (k-slices per block of the
project's kernel), chosen so that the launch has enough threads to reach the modelled occupancy on every
SM (the paper launches m threads, which on a large GPU can be far fewer than the SMs can hold: the
"latency-bound" case its Section 5.1 describes); and ISM2's tcf, which the paper finds by profiling,
predicted here as the largest power of two that still launches `ism2_waves` full waves.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

ELEM_BYTES = {"fp64": 8, "fp32": 4}


@dataclass(frozen=True)
class ModelDevice:
    """The device figures the model needs. Bandwidth should be measured (bytes/s, read + write copy)."""

    name: str
    bandwidth: float  # bytes/s
    peak_flops: float  # flop/s of the precision modelled (an FMA counts 2)
    sm_count: int
    regs_per_sm: int
    smem_per_sm: int  # bytes
    max_threads_per_sm: int
    max_threads_per_block: int
    clock_hz: float
    smem_per_block: int = 48 * 1024  # static shared memory limit per block
    mem_latency_s: float = 600e-9  # average global-memory latency (paper: offline profiling)
    fma_latency_cycles: float = 4.0  # dependent-FMA latency (paper: offline profiling)
    base_regs: int = 32  # registers of a thread outside the tiles (paper's constant C)

    def __post_init__(self) -> None:
        for field_name in ("bandwidth", "peak_flops", "clock_hz", "mem_latency_s", "fma_latency_cycles"):
            if not getattr(self, field_name) > 0:
                raise ValueError(f"{field_name} must be positive, got {getattr(self, field_name)!r}")
        if min(self.sm_count, self.regs_per_sm, self.smem_per_sm, self.max_threads_per_sm) < 1:
            raise ValueError("device counts must be >= 1")

    @classmethod
    def from_limits(
        cls,
        limits: Any,
        precision: str,
        *,
        clock_hz: float,
        bandwidth: float | None = None,
        mem_latency_s: float = 600e-9,
    ) -> "ModelDevice":
        """Build from an `autotune.devices.DeviceLimits` (or anything with the same attribute names).

        `bandwidth` overrides the datasheet `mem_bandwidth` (pass the measured copy bandwidth).
        """
        peak = {"fp64": limits.peak_fp64, "fp32": limits.peak_fp32}[precision]
        return cls(
            name=str(getattr(limits, "name", "device")),
            bandwidth=float(bandwidth if bandwidth is not None else limits.mem_bandwidth),
            peak_flops=float(peak),
            sm_count=int(limits.sm_count),
            regs_per_sm=int(limits.regs_per_sm),
            smem_per_sm=int(limits.max_smem_per_sm),
            max_threads_per_sm=int(limits.max_threads_per_sm),
            max_threads_per_block=int(limits.max_threads_per_block),
            smem_per_block=int(getattr(limits, "smem_per_block_default", 48 * 1024)),
            clock_hz=float(clock_hz),
            mem_latency_s=mem_latency_s,
        )


@dataclass(frozen=True)
class Estimate:
    """The model's figures for one (t2, t3) on one device and precision."""

    t2: int
    t3: int
    regs_per_thread: float
    occupancy: int  # threads per SM
    util_mem: float
    util_comp: float
    ratio: float  # r = time_comp / time_mem of the inner loop; > 1: compute-bound


@dataclass(frozen=True)
class Tsm2Choice:
    """Predicted TSM2 parameters for one problem; `bound` is the original problem's classification."""

    m: int
    n: int
    k: int
    precision: str
    bound: str  # "memory" or "compute"
    t2_threshold: float
    t1: int
    t2: int
    t3: int
    ks: int  # extension: k-slices per block so that the launch fills the device
    estimate: Estimate
    predicted_time_s: float  # the model's objective at the choice (A traffic or flops only)


def elem_bytes(precision: str) -> int:
    if precision not in ELEM_BYTES:
        raise ValueError(f"TSM2 models fp64 and fp32, not {precision!r}")
    return ELEM_BYTES[precision]


def t2_threshold(dev: ModelDevice, precision: str) -> float:
    """t2* = peak_flops * bytes / bandwidth: t2 at which the inner loop turns compute-bound."""
    return dev.peak_flops * elem_bytes(precision) / dev.bandwidth


def classify(dev: ModelDevice, precision: str, n: int) -> str:
    """The original problem (t2 = n): memory-bound when n <= t2*, else compute-bound."""
    return "memory" if n <= t2_threshold(dev, precision) else "compute"


def regs_per_thread(t2: int, t3: int, precision: str, base_regs: int = 32) -> float:
    """R_thread = (3 t2 + 2 t3) * bytes / 4 + C (next B, current B, C accumulators; current/next A)."""
    return (3 * t2 + 2 * t3) * elem_bytes(precision) / 4 + base_regs


def occupancy(dev: ModelDevice, t2: int, t3: int, precision: str) -> int:
    """Max threads per SM: min(HW max, R_SM / R_thread, S_SM / S_thread) with S_thread = t2 * bytes."""
    by_regs = dev.regs_per_sm / regs_per_thread(t2, t3, precision, dev.base_regs)
    by_smem = dev.smem_per_sm / (t2 * elem_bytes(precision))
    return int(min(dev.max_threads_per_sm, by_regs, by_smem))


def bytes_in_flight_needed(dev: ModelDevice) -> float:
    """Little's law per SM: latency * bandwidth / SM count."""
    return dev.mem_latency_s * dev.bandwidth / dev.sm_count


def fma_in_flight_needed(dev: ModelDevice) -> float:
    """Little's law per SM: FMA latency (cycles) * FMA lanes per SM (peak / (2 * SMs * clock))."""
    return dev.fma_latency_cycles * dev.peak_flops / (2.0 * dev.sm_count * dev.clock_hz)


def estimate(dev: ModelDevice, t2: int, t3: int, precision: str) -> Estimate:
    if t2 < 1 or t3 < 1:
        raise ValueError("t2 and t3 must be >= 1")
    occ = occupancy(dev, t2, t3, precision)
    eb = elem_bytes(precision)
    util_mem = min(1.0, occ * t3 * eb / bytes_in_flight_needed(dev))
    util_comp = min(1.0, occ * t3 * t2 / fma_in_flight_needed(dev))
    ratio = t2 / t2_threshold(dev, precision)
    return Estimate(t2, t3, regs_per_thread(t2, t3, precision, dev.base_regs), occ, util_mem, util_comp, ratio)


def memory_time(dev: ModelDevice, m: int, n: int, k: int, precision: str, est: Estimate) -> float:
    """Alg. 5 line 2-4: A is read n / t2 times at bandwidth * Util_mem."""
    if est.util_mem <= 0:
        return math.inf
    passes = math.ceil(n / est.t2)
    return m * k * passes * elem_bytes(precision) / (dev.bandwidth * est.util_mem)


def compute_time(dev: ModelDevice, m: int, n: int, k: int, est: Estimate) -> float:
    """Alg. 5 line 7-9: 2 m k n flops at peak * Util_comp."""
    if est.util_comp <= 0:
        return math.inf
    return 2.0 * m * n * k / (dev.peak_flops * est.util_comp)


def _best(
    dev: ModelDevice, m: int, n: int, k: int, precision: str, t2s: range, t3s: tuple[int, ...], objective: str
) -> tuple[float, Estimate] | None:
    best: tuple[float, int, int, Estimate] | None = None
    for t2 in t2s:
        for t3 in t3s:
            est = estimate(dev, t2, t3, precision)
            if objective == "memory":
                time = memory_time(dev, m, n, k, precision, est)
            else:
                time = compute_time(dev, m, n, k, est)
            # ties: fewer registers (smaller t3), then larger t2 (fewer passes over A)
            key = (time, t3, -t2)
            if best is None or key < best[:3]:
                best = (time, t3, -t2, est)
    return None if best is None else (best[0], best[3])


def pick_t1(dev: ModelDevice, occ: int, ks: int = 1, candidates: tuple[int, ...] = (64, 128, 256, 512)) -> int:
    """Block size that fills the modelled occupancy best (threads actually resident), ties -> closest to 128."""
    scored = []
    for t1 in candidates:
        threads = t1 * ks
        if threads > dev.max_threads_per_block:
            continue
        resident = (occ // threads) * threads
        scored.append((-resident, abs(math.log2(t1 / 128)), t1))
    if not scored:
        raise ValueError("no block size fits the device")
    return min(scored)[2]


def pick_ks(dev: ModelDevice, m: int, occ: int, t1: int, t2: int, precision: str, max_ks: int = 16) -> int:
    """Extension: smallest power-of-two k-split so that m * ks threads cover sm_count * occupancy."""
    ks = 1
    while (
        m * ks < dev.sm_count * occ
        and ks < max_ks
        and t1 * ks * 2 <= dev.max_threads_per_block
        and t1 * ks * 2 * t2 * elem_bytes(precision) <= dev.smem_per_block
    ):
        ks *= 2
    return ks


def choose_tsm2(
    dev: ModelDevice,
    m: int,
    n: int,
    k: int,
    precision: str,
    t3_candidates: tuple[int, ...] = (1, 2, 4, 8, 16),
    t1_candidates: tuple[int, ...] = (32, 64, 128, 256, 512),
) -> Tsm2Choice:
    """Alg. 5 of the paper (exhaustive instead of gradient descent), then t1 and the k-split."""
    if min(m, n, k) < 1:
        raise ValueError("m, n, k must be >= 1")
    thr = t2_threshold(dev, precision)
    bound = classify(dev, precision, n)
    if bound == "memory":
        found = _best(dev, m, n, k, precision, range(1, n + 1), t3_candidates, "memory")
        assert found is not None
        time, est = found
    else:
        lo = max(1, math.ceil(thr))
        comp = _best(dev, m, n, k, precision, range(lo, n + 1), t3_candidates, "compute")
        mem = _best(dev, m, n, k, precision, range(1, max(1, math.floor(thr)) + 1), t3_candidates, "memory")
        options = [x for x in (comp, mem) if x is not None]
        time, est = min(options, key=lambda x: x[0])
    # t1 must be a multiple of t3 in the project's kernel; choose the k-split first with t1 = 128
    t1s = tuple(t for t in t1_candidates if t % est.t3 == 0)
    ks = pick_ks(dev, m, est.occupancy, 128 if 128 in t1s else t1s[0], est.t2, precision)
    fitting = tuple(
        t
        for t in t1s
        if t * ks <= dev.max_threads_per_block and t * ks * est.t2 * elem_bytes(precision) <= dev.smem_per_block
    )
    t1 = pick_t1(dev, est.occupancy, ks, fitting or t1s)
    return Tsm2Choice(m, n, k, precision, bound, thr, t1, est.t2, est.t3, ks, est, time)


@dataclass(frozen=True)
class Ism2Choice:
    m: int
    n: int
    k: int
    precision: str
    t1: int
    t2: int
    t3: int
    tcf: int  # threads launched = ceil(m / tcf)
    threads_launched: int


def choose_ism2(
    dev: ModelDevice, m: int, n: int, k: int, precision: str, ism2_waves: int = 4, max_tcf: int = 64
) -> Ism2Choice:
    """ISM2: t2 = n (capped at 16), t3 from the memory model (capped at k), t1 from occupancy, and the
    thread-count factor tcf = largest power of two keeping >= `ism2_waves` full waves of threads
    (the paper observes that down to m / 64 threads the speed holds, and profiles tcf)."""
    if min(m, n, k) < 1:
        raise ValueError("m, n, k must be >= 1")
    t2 = min(n, 16)
    t3s = tuple(t for t in (1, 2, 4, 8, 16) if t <= max(1, k))
    found = _best(dev, m, n, k, precision, range(t2, t2 + 1), t3s, "memory")
    assert found is not None
    _, est = found
    t1 = pick_t1(dev, est.occupancy, 1, tuple(t for t in (64, 128, 256, 512) if t % est.t3 == 0))
    wave = dev.sm_count * est.occupancy
    tcf = 1
    while tcf * 2 <= max_tcf and m / (tcf * 2) >= ism2_waves * wave:
        tcf *= 2
    return Ism2Choice(m, n, k, precision, t1, t2, est.t3, tcf, math.ceil(m / tcf))
