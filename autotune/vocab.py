"""Value objects that flow from the runner to the store and the analyzer.

A `TestPoint` is one problem (precision, transposition shape, sizes, batch count); a `Measurement` is
what one (instance, test point) pair produced on a backend, failures included: a failure is data.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass, field


PRECISIONS = ("fp64", "fp32", "fp16")
SHAPES = ("NN", "NT", "TN", "TT")
ELEM_BYTES = {"fp64": 8, "fp32": 4, "fp16": 2}


class Status(str, enum.Enum):
    """Outcome of one measurement; stored as its string value."""

    OK = "ok"
    COMPILE_ERROR = "compile_error"
    LAUNCH_ERROR = "launch_error"
    WRONG = "wrong"
    TIMEOUT = "timeout"
    CRASHED = "crashed"
    SKIPPED = "skipped"  # stopped early: provably slower than best / (1 - TOL)


@dataclass(frozen=True, order=True)
class TestPoint:
    """One problem: C (m x n) = alpha * op(A) (m x k) * op(B) (k x n) + beta * C, `batch` times."""

    __test__ = False  # not a pytest test class

    precision: str
    shape: str
    m: int
    n: int
    k: int
    batch: int

    def __post_init__(self) -> None:
        if self.precision not in PRECISIONS:
            raise ValueError(f"unknown precision {self.precision!r}; expected one of {PRECISIONS}")
        if self.shape not in SHAPES:
            raise ValueError(f"unknown shape {self.shape!r}; expected one of {SHAPES}")
        if min(self.m, self.n, self.k, self.batch) < 1:
            raise ValueError(f"sizes and batch must be >= 1, got {self}")

    @property
    def key(self) -> str:
        return f"{self.precision}:{self.shape}:{self.m}x{self.n}x{self.k}:b{self.batch}"

    @property
    def elem_bytes(self) -> int:
        return ELEM_BYTES[self.precision]

    @property
    def flops(self) -> float:
        return 2.0 * self.m * self.n * self.k * self.batch

    def bytes_moved(self, beta_nonzero: bool) -> int:
        """Fewest bytes a kernel must move: read A and B once, write C once (read C too if beta != 0)."""
        mn = self.m * self.n
        words = self.m * self.k + self.k * self.n + mn + (mn if beta_nonzero else 0)
        return self.batch * self.elem_bytes * words


@dataclass
class Measurement:
    """What one (instance, test point) produced. Times are milliseconds per launch (whole batch)."""

    instance_id: str
    point: TestPoint
    status: Status
    median_ms: float | None = None
    p20_ms: float | None = None
    p80_ms: float | None = None
    min_ms: float | None = None
    max_ms: float | None = None
    reps: int = 0
    times_ms: list[float] = field(default_factory=list)
    error: str | None = None  # short message for failures
    log: str | None = None  # compiler log or traceback text
    max_rel_err: float | None = None  # ||C - ref|| / ||ref|| of the verified run
    registers: int | None = None
    shared_bytes: int | None = None
    local_bytes: int | None = None
    compile_s: float | None = None
    l2_protection: str | None = None  # "rotate:<copies>", "flush" or "none"


@dataclass(frozen=True)
class DeviceInfo:
    """What makes a number reproducible: the GPU and the software stack it ran under."""

    name: str
    uuid: str
    sm_count: int
    cc: int
    sm_clock_mhz: int | None
    mem_clock_mhz: int | None
    l2_bytes: int
    copy_bandwidth: float  # measured bytes/s (read + write) of a large device-to-device copy
    driver: str
    cuda_runtime: str
    nvrtc: str
    cupy: str
