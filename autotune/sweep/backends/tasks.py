"""What the sweep backend sends to a GPU worker: one compiled variant of an instance, its launch geometry and
its timing plan. Plain values, so the parent and the worker process share them without importing each other."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from autotune.problems.base import ProblemKind
from autotune.sweep.timing import TimingPlan
from autotune.vocab import TestPoint


@dataclass(frozen=True)
class Variant:
    """One compiled variant of an instance on one test point, with its launch geometry."""

    point: TestPoint
    name_expression: str
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    shared_bytes: int = 0
    defines: tuple[tuple[str, str], ...] = ()  # `#define NAME value` pairs (passed to NVRTC as -DNAME=value)


@dataclass(frozen=True)
class KernelTask:
    """What the backend needs of one instance: no Space internals, so test kernels work too."""

    instance_id: str
    source: Path
    convention: str
    variants: tuple[Variant, ...]
    kind: ProblemKind  # the problem kind of the variants' points
    scalars: Mapping[str, float] = field(default_factory=dict)  # the run's scalars of `kind` (missing: defaults)
    reps: int = 50
    compiler: str = "nvrtc"  # the space's `kernel: compiler:` (nvrtc or nvcc)
    compiler_options: tuple[str, ...] = ()  # the space's `kernel: compiler_options:`
    params: Mapping[str, Any] = field(default_factory=dict)  # the instance's parameters (a kind's `check:` reads them)
    semantics: str = "native"  # the space's `kernel: semantics:` (kerneltuner: loop_unroll_factor_* in the source)
    arch_specific: bool = False  # the space's `kernel: arch_specific:` (compiled for sm_XXa)


@dataclass(frozen=True)
class MeasureRequest:
    instance_id: str
    variant: Variant
    convention: str
    kind: ProblemKind
    blob: str
    lowered_name: str
    scalars: Mapping[str, float]
    plan: TimingPlan
    compile_s: float
    params: Mapping[str, Any] = field(default_factory=dict)  # the instance's parameters
