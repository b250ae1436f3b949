"""The TSM2/ISM2 analytical model (autotune/tsm2_model.py) against the paper's own figures and its logic."""

from __future__ import annotations

import dataclasses
import itertools
import math

import pytest

from autotune.problems.gemm import tsm2_model as tm


def device(bandwidth: float, peak: float, **kw) -> tm.ModelDevice:
    base = dict(
        name="dev",
        bandwidth=bandwidth,
        peak_flops=peak,
        sm_count=132,
        regs_per_sm=65536,
        smem_per_sm=228 * 1024,
        max_threads_per_sm=2048,
        max_threads_per_block=1024,
        clock_hz=1.98e9,
    )
    base.update(kw)
    return tm.ModelDevice(**base)


# Datasheet figures the paper quotes (Sec. 4.1) and the thresholds it reports (Sec. 4.2, 4.4), fp64.
@pytest.mark.parametrize("peak, bw, reported", [(1430e9, 288e9, 40), (213e9, 288e9, 6), (4600e9, 720e9, 50)])
def test_threshold_reproduces_papers_values(peak: float, bw: float, reported: float) -> None:
    thr = tm.t2_threshold(device(bw, peak), "fp64")
    assert thr == pytest.approx(peak * 8 / bw)
    assert abs(thr - reported) / reported < 0.05


def test_threshold_scales_with_element_size_and_ratio() -> None:
    d = device(3.0e12, 60e12)
    assert tm.t2_threshold(d, "fp64") == pytest.approx(2 * tm.t2_threshold(d, "fp32"))
    faster_memory = dataclasses.replace(d, bandwidth=6.0e12)
    assert tm.t2_threshold(faster_memory, "fp32") == pytest.approx(tm.t2_threshold(d, "fp32") / 2)


def test_skinny_problems_are_memory_bound_on_h100_like_device() -> None:
    for prec, peak in (("fp32", 66.9e12), ("fp64", 33.5e12)):
        d = device(2.98e12, peak)
        for n in (1, 2, 4, 8, 16):
            assert tm.classify(d, prec, n) == "memory"
            assert tm.estimate(d, n, 4, prec).ratio < 1.0
        assert tm.classify(d, prec, 1000) == "compute"


def test_m40_fp64_n16_is_compute_bound_like_the_paper() -> None:
    m40 = device(288e9, 213e9, sm_count=24)
    assert tm.classify(m40, "fp64", 16) == "compute"
    assert tm.classify(m40, "fp64", 4) == "memory"


def test_registers_and_occupancy_follow_paper_formula() -> None:
    assert tm.regs_per_thread(4, 4, "fp64", base_regs=20) == (3 * 4 + 2 * 4) * 2 + 20
    assert tm.regs_per_thread(4, 4, "fp32", base_regs=20) == (3 * 4 + 2 * 4) + 20
    d = device(2.98e12, 66.9e12)
    # small tiles: the hardware thread limit binds (25 registers x 2048 threads < 64 K)
    assert tm.occupancy(dataclasses.replace(d, base_regs=20), 1, 1, "fp32") == 2048
    # large tiles: registers bind, occupancy = R_SM / R_thread
    assert tm.occupancy(d, 16, 8, "fp64") == int(65536 / tm.regs_per_thread(16, 8, "fp64"))
    # shared memory binds when it is tiny
    tiny_smem = dataclasses.replace(d, smem_per_sm=16 * 1024)
    assert tm.occupancy(tiny_smem, 16, 1, "fp64") == 16 * 1024 // (16 * 8)


def test_occupancy_decreases_and_memory_concurrency_saturates_with_t3() -> None:
    d = device(2.98e12, 66.9e12)
    occs = [tm.occupancy(d, 16, t3, "fp32") for t3 in (1, 2, 4, 8, 16, 32)]
    assert all(a >= b for a, b in itertools.pairwise(occs))
    utils = [tm.estimate(d, 16, t3, "fp32").util_mem for t3 in (1, 2, 4, 8)]
    assert all(a <= b for a, b in itertools.pairwise(utils))
    assert utils[0] < 1.0 and utils[-1] == 1.0
    # Little's law: bytes needed in flight per SM = latency * bandwidth / SMs
    assert tm.bytes_in_flight_needed(d) == pytest.approx(600e-9 * 2.98e12 / 132)


def test_memory_time_counts_passes_over_a() -> None:
    d = device(2.98e12, 66.9e12)
    m = k = 20480
    full = tm.memory_time(d, m, 16, k, "fp32", tm.estimate(d, 16, 8, "fp32"))
    half = tm.memory_time(d, m, 16, k, "fp32", tm.estimate(d, 8, 8, "fp32"))
    assert half > full  # t2 = 8 reads A twice for n = 16
    assert full >= m * k * 4 / d.bandwidth


@pytest.mark.parametrize("prec, peak", [("fp32", 66.9e12), ("fp64", 33.5e12)])
@pytest.mark.parametrize("n", [2, 4, 8, 16])
def test_choice_for_memory_bound_reads_a_once_and_fits_the_kernel(prec: str, peak: float, n: int) -> None:
    d = device(2.98e12, peak)
    ch = tm.choose_tsm2(d, 20480, n, 20480, prec)
    assert ch.bound == "memory"
    assert ch.t2 == n  # Alg. 5: t2 = n reads A once
    assert ch.estimate.util_mem == 1.0
    assert ch.predicted_time_s == pytest.approx(20480 * 20480 * tm.elem_bytes(prec) / d.bandwidth)
    assert ch.t1 % ch.t3 == 0  # the kernel's hard constraint
    assert ch.t1 * ch.ks <= d.max_threads_per_block
    assert ch.t1 * ch.ks * ch.t2 * tm.elem_bytes(prec) <= d.smem_per_block
    # extension: with m = 20480 rows the paper's one-thread-per-row launch cannot fill 132 SMs
    assert ch.ks > 1


def test_small_device_does_not_split_k() -> None:
    k40 = device(288e9, 1430e9, sm_count=15, regs_per_sm=65536, smem_per_sm=48 * 1024, max_threads_per_sm=2048)
    ch = tm.choose_tsm2(k40, 20480, 16, 20480, "fp64")
    assert ch.bound == "memory" and ch.t2 == 16
    assert ch.ks == 1  # 20480 rows already cover 15 SMs x occupancy


def test_compute_bound_choice_respects_threshold() -> None:
    m40 = device(288e9, 213e9, sm_count=24)
    ch = tm.choose_tsm2(m40, 20480, 16, 20480, "fp64")
    assert ch.bound == "compute"
    comp = tm.compute_time(m40, 20480, 16, 20480, ch.estimate)
    mem = tm.memory_time(m40, 20480, 16, 20480, "fp64", ch.estimate)
    assert ch.predicted_time_s == pytest.approx(comp if ch.t2 >= math.ceil(ch.t2_threshold) else mem)
    assert 1 <= ch.t2 <= 16


def test_ism2_tcf_grows_with_m_and_is_power_of_two() -> None:
    d = device(2.98e12, 66.9e12)
    tcfs = [tm.choose_ism2(d, m, 8, 8, "fp32").tcf for m in (10**4, 10**5, 10**6, 10**7, 10**8)]
    assert all(a <= b for a, b in itertools.pairwise(tcfs))
    assert tcfs[0] == 1 and tcfs[-1] > 1
    assert all(t & (t - 1) == 0 for t in tcfs)
    ch = tm.choose_ism2(d, 10**7, 8, 8, "fp32")
    assert ch.threads_launched == math.ceil(10**7 / ch.tcf)
    assert ch.t1 % ch.t3 == 0 and ch.t3 <= 8


def test_invalid_inputs_raise() -> None:
    with pytest.raises(ValueError):
        device(0.0, 1e12)
    with pytest.raises(ValueError):
        tm.elem_bytes("fp16")
    with pytest.raises(ValueError):
        tm.choose_tsm2(device(1e12, 1e12), 0, 2, 10, "fp32")


def test_from_limits_reads_device_limit_names() -> None:
    @dataclasses.dataclass(frozen=True)
    class Limits:  # the attribute names of autotune.devices.DeviceLimits
        name: str = "H100"
        mem_bandwidth: float = 3.35e12
        peak_fp64: float = 33.5e12
        peak_fp32: float = 66.9e12
        sm_count: int = 132
        regs_per_sm: int = 65536
        max_smem_per_sm: int = 228 * 1024
        max_threads_per_sm: int = 2048
        max_threads_per_block: int = 1024
        smem_per_block_default: int = 48 * 1024

    d = tm.ModelDevice.from_limits(Limits(), "fp64", clock_hz=1.98e9, bandwidth=2.98e12)
    assert d.bandwidth == 2.98e12 and d.peak_flops == 33.5e12 and d.smem_per_sm == 228 * 1024
    assert tm.ModelDevice.from_limits(Limits(), "fp32", clock_hz=1.98e9).bandwidth == 3.35e12
