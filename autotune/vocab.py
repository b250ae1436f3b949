"""Value objects that flow from the runner to the store and the analyzer.

A `TestPoint` is one problem of a problem kind (kind, precision, variant, named sizes); a `Measurement` is
what one (instance, test point) pair produced on a backend, failures included: a failure is data.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field


# every precision a test point may have: its element size in bytes
ELEM_BYTES = {"fp64": 8, "fp32": 4, "fp16": 2, "bf16": 2, "int64": 8, "int32": 4, "int16": 2, "int8": 1, "uint8": 1}
MAX_SIZE = 1 << 62
MAX_SEED = 2**32 - 1  # a seed is 0..2**32-1: what numpy's RandomState and Optuna's samplers take
METHODS = ("greedy", "exact")  # the kernel-set reductions (autotune.analysis.setcover), named by `--method`


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
    """One problem of a problem kind: its precision, its variant (`shape`: GEMM's transposition NN/NT/TN/TT,
    "" for kinds without variants) and its named integer sizes, in the kind's order.

    A size reads as an attribute (`point.m`, `point.rows`). Build points through the kind
    (`ProblemKind.point`, `autotune.problems.gemm.gemm_point`), which checks the names; what a point
    costs (bytes, flops), its data and its reference belong to its kind (`autotune.problems`)."""

    __test__ = False  # not a pytest test class

    kind: str
    precision: str
    shape: str
    sizes: tuple[tuple[str, int], ...]

    def __post_init__(self) -> None:
        if self.precision not in ELEM_BYTES:
            raise ValueError(f"unknown precision {self.precision!r}; expected one of {', '.join(ELEM_BYTES)}")
        if not self.sizes:
            raise ValueError(f"a test point of {self.kind!r} needs at least one size")
        for name, value in self.sizes:
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"size {name} must be an integer >= 1, got {value!r} ({self.kind} {self.precision})")
            if value > MAX_SIZE:
                raise ValueError(f"size {name} = {value} is above {MAX_SIZE} (kernels take sizes as 64-bit integers)")

    def __getattr__(self, name: str) -> int:
        if name.startswith("__"):
            raise AttributeError(name)
        for key, value in object.__getattribute__(self, "sizes"):
            if key == name:
                return value
        raise AttributeError(f"a {self.kind} test point has no size {name!r}")

    @property
    def dims(self) -> dict[str, int]:
        """The sizes as a dict, in the kind's order."""
        return dict(self.sizes)

    @property
    def key(self) -> str:
        sizes = "x".join(str(v) for _, v in self.sizes)
        return f"{self.kind}:{self.precision}:{self.shape or '-'}:{sizes}"

    @property
    def elem_bytes(self) -> int:
        return ELEM_BYTES[self.precision]


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
    flops: float | None = None  # the work its problem kind counts for the point (set by the runner)
    bytes_moved: int | None = None  # fewest bytes moved (the roofline's numerator; set by the runner)
    device: str | None = (
        None  # uuid of the GPU that measured it, set by an executor of several GPUs (Dask); None: the sweep's
    )


TIME_STATS = ("median_ms", "p20_ms", "p80_ms", "min_ms", "max_ms")  # a Measurement's summary of its times_ms
# what a measurement row holds as the Measurement gave it (besides the pair, status, TIME_STATS, reps and times)
RECORDED_AS_GIVEN = (
    "max_rel_err",
    "registers",
    "shared_bytes",
    "local_bytes",
    "compile_s",
    "l2_protection",
    "error",
    "log",
)


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
    free_bytes: int | None = None  # device memory free when the sweep started (None: unknown, e.g. replay)
