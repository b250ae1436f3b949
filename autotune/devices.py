"""Device limits that space expressions can read, from the real GPU or from a named profile.

A profile lets a user explore a space for a GPU they do not have (`--device V100`). Limits come
from the vendors' published specifications; peak rates are datasheet figures used only by
analytical models (the runner measures bandwidth itself).
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass
from typing import Any

from autotune.errors import UserError

KB = 1024
MB = 1024 * 1024


@dataclass(frozen=True)
class DeviceLimits:
    name: str
    cc: int  # compute capability, major * 10 + minor
    sm_count: int
    max_threads_per_block: int
    max_smem_per_block: int  # opt-in maximum of (static + dynamic) shared memory per block, bytes
    smem_per_block_default: int  # without the opt-in attribute (48 KB)
    max_smem_per_sm: int
    regs_per_sm: int
    max_regs_per_block: int
    max_regs_per_thread: int
    max_threads_per_sm: int
    max_blocks_per_sm: int
    warp_size: int
    l2_bytes: int
    mem_bandwidth: float  # bytes/s, datasheet
    peak_fp64: float  # flop/s, datasheet (SIMT)
    peak_fp32: float
    peak_fp16_tc: float  # dense tensor-core fp16 with fp32 accumulation
    source: str = "profile"  # "profile" or "gpu"

    def names(self) -> dict[str, int | float]:
        """The limits as the flat names space expressions use."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name not in ("name", "source")}


_SHARED = dict(  # what every profile below has, unless it says otherwise
    max_threads_per_block=1024,
    smem_per_block_default=48 * KB,
    regs_per_sm=65536,
    max_regs_per_block=65536,
    max_regs_per_thread=255,
    max_threads_per_sm=2048,
    max_blocks_per_sm=32,
    warp_size=32,
)


def _profile(**limits: Any) -> DeviceLimits:
    return DeviceLimits(**{**_SHARED, **limits})


def _hopper(name: str, bandwidth: float, l2: int) -> DeviceLimits:
    return _profile(
        name=name,
        cc=90,
        sm_count=132,
        max_smem_per_block=227 * KB,
        max_smem_per_sm=228 * KB,
        l2_bytes=l2,
        mem_bandwidth=bandwidth,
        peak_fp64=33.5e12,
        peak_fp32=66.9e12,
        peak_fp16_tc=989.4e12,
    )


PROFILES: dict[str, DeviceLimits] = {
    "H100": _hopper("NVIDIA H100 80GB HBM3 (SXM)", 3.35e12, 50 * MB),
    "H200": _hopper("NVIDIA H200 (SXM)", 4.8e12, 60 * MB),
    "A100": _profile(
        name="NVIDIA A100-SXM4-80GB",
        cc=80,
        sm_count=108,
        max_smem_per_block=163 * KB,
        max_smem_per_sm=164 * KB,
        l2_bytes=40 * MB,
        mem_bandwidth=2.039e12,
        peak_fp64=9.7e12,
        peak_fp32=19.5e12,
        peak_fp16_tc=312e12,
    ),
    "V100": _profile(
        name="Tesla V100-SXM2-16GB",
        cc=70,
        sm_count=80,
        max_smem_per_block=96 * KB,
        max_smem_per_sm=96 * KB,
        l2_bytes=6 * MB,
        mem_bandwidth=900e9,
        peak_fp64=7.8e12,
        peak_fp32=15.7e12,
        peak_fp16_tc=125e12,
    ),
    "K40c": _profile(
        name="Tesla K40c",
        cc=35,
        sm_count=15,
        max_smem_per_block=48 * KB,
        max_smem_per_sm=48 * KB,
        max_blocks_per_sm=16,
        l2_bytes=1536 * KB,
        mem_bandwidth=288e9,
        peak_fp64=1.43e12,
        peak_fp32=4.29e12,
        peak_fp16_tc=0.0,
    ),
}

DEFAULT_PROFILE = "H100"


def profile(name: str) -> DeviceLimits:
    """A named profile, matched case-insensitively."""
    for key, limits in PROFILES.items():
        if key.lower() == name.strip().lower():
            return limits
    raise UserError(
        f"unknown device profile {name!r}", hint=f"use one of {', '.join(PROFILES)} (or run on a machine with a GPU)"
    )


_KNOWN: dict[int, DeviceLimits] = {}  # limits another process read (`know_gpu`)


def know_gpu(limits: DeviceLimits, ordinal: int = 0) -> None:
    """Take `limits` as GPU `ordinal`'s from now on in this process: read by a process that has CuPy and the device
    already (the GPU worker, `GpuBackend.device_limits`), so this one neither imports CuPy nor initializes CUDA."""
    _KNOWN[ordinal] = limits


def detect_gpu(ordinal: int = 0) -> DeviceLimits | None:
    """Limits read from the real GPU through CuPy (or given by `know_gpu`), or None where there is no CuPy or no
    GPU (read once)."""
    known = _KNOWN.get(ordinal)
    return known if known is not None else read_gpu(ordinal)


def no_gpu_reason(ordinal: int = 0) -> str | None:
    """Why this process cannot measure on GPU `ordinal` (CuPy missing, or CuPy sees no such GPU), or None when it
    can: what a script that measures says in its one error line on a machine without a GPU."""
    try:
        import cupy  # noqa: F401  (heavy import, only here)
    except ImportError:
        return "CuPy is not installed (pip install -e '.[cuda13]', or '.[cuda12]' with a CUDA 12 driver)"
    return None if detect_gpu(ordinal) is not None else "CuPy sees no GPU"


@functools.lru_cache(maxsize=None)
def read_gpu(ordinal: int) -> DeviceLimits | None:
    try:
        import cupy  # noqa: F401  (heavy import, only here)
        from cupy.cuda import runtime

        if runtime.getDeviceCount() <= ordinal:
            return None
        p = runtime.getDeviceProperties(ordinal)
    except Exception:  # no CuPy, no driver, no device: explore with a profile instead
        return None
    name = p["name"].decode() if isinstance(p["name"], bytes) else str(p["name"])
    cc = p["major"] * 10 + p["minor"]
    known = next((v for k, v in PROFILES.items() if k.lower() in name.lower()), None)
    bandwidth = 2.0 * p.get("memoryClockRate", 0) * 1e3 * p.get("memoryBusWidth", 0) / 8
    return DeviceLimits(
        name=name,
        cc=cc,
        sm_count=p["multiProcessorCount"],
        max_threads_per_block=p["maxThreadsPerBlock"],
        max_smem_per_block=p.get("sharedMemPerBlockOptin", p["sharedMemPerBlock"]),
        smem_per_block_default=p["sharedMemPerBlock"],
        max_smem_per_sm=p.get("sharedMemPerMultiprocessor", p["sharedMemPerBlock"]),
        regs_per_sm=p.get("regsPerMultiprocessor", p["regsPerBlock"]),
        max_regs_per_block=p["regsPerBlock"],
        max_regs_per_thread=255,
        max_threads_per_sm=p.get("maxThreadsPerMultiProcessor", 2048),
        max_blocks_per_sm=p.get("maxBlocksPerMultiProcessor", 32),
        warp_size=p["warpSize"],
        l2_bytes=p.get("l2CacheSize", 0),
        mem_bandwidth=bandwidth or (known.mem_bandwidth if known else 0.0),
        peak_fp64=known.peak_fp64 if known else 0.0,
        peak_fp32=known.peak_fp32 if known else 0.0,
        peak_fp16_tc=known.peak_fp16_tc if known else 0.0,
        source="gpu",
    )


def get_device(profile_name: str | None = None) -> DeviceLimits:
    """The named profile; without a name, the real GPU if there is one, else the default profile."""
    if profile_name:
        return profile(profile_name)
    return detect_gpu() or PROFILES[DEFAULT_PROFILE]
