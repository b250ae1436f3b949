"""What a dispatch table is built from besides the winners and the set cover: the kernels' records (`KernelInfo`),
the kind's generic kernel, the structure (regions, nearest, cost, model) and the structures tried, the provenance,
and the answers a table may give besides its kernels (`Answers`). The names are imported from
`autotune.dispatch.table` too.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Mapping

import numpy as np


@dataclass(frozen=True)
class KernelInfo:
    """How to build one kernel: its space, procedural name, name expression or defines, source and validity."""

    space: str
    name: str
    template: str | None = None  # NVRTC name expression (or function name) for this precision and shape
    source: str | None = None  # kernel file, relative to the include directory
    convention: str | None = None  # the kind's calling convention
    valid: tuple[tuple[str, int], ...] = ()  # (("m_multiple_of", 8), ("max_k", 256))
    tuned_only: bool = False  # the predicates could not be derived: valid only at its tuned points
    defines: tuple[tuple[str, Any], ...] = ()  # preprocessor defines of a kernel tuned by defines
    parameters: str | None = None  # the kernel's C++ parameter list (explicit instantiation), from the kind
    tiles: tuple[tuple[str, int], ...] = ()  # (("m", 64), ("n", 64), ("k", 32)): its tile per table size (model)


@dataclass(frozen=True)
class GenericKernel:
    """The kind's last-resort kernel (one instance of its generic space) and its name expressions."""

    space: str
    source: str | None = None
    convention: str | None = None
    templates: tuple[tuple[str, str], ...] = ()  # (("fp64:NN", "ns::kernel<double, ...>"), ...)
    parameters: tuple[tuple[str, str], ...] = ()  # (("fp64:NN", "int, int, ..."), ...): C++ parameter lists


@dataclass(frozen=True)
class Structure:
    """How a table answers problems it was not tuned on (chosen by measured held-out loss: dispatch/loo.py).

    mode "regions": merged boxes, then the nearest tuned point's `near` list (runtime.py rules 3 and 4);
    "nearest": the nearest tuned point's `near` list only; "model": every valid kernel and the library priced by
    the selection model's predicted time (dispatch/model.py), fitted on the tuned points; "cost": every valid answer (kernel or library) is
    priced by its time per byte at the tuned point nearest the problem where it was measured (`costs` of each
    point), among answers measured within `reach` (log2 distance) of the nearest tuned point, and the cheapest
    answers. library_margin: a kernel goes before the library off the tuned points only when it was faster by
    at least the factor 1 + margin (the `near` lists; in cost mode its cost times 1 + margin is compared).
    neighbours (cost mode only): with 2 or more, each competing answer is priced by the mean log2 of its cost at
    the `neighbours` tuned points nearest the problem where it was measured (runtime.py rule 4'), so a table whose
    points sample the problem space densely (problems measured ahead of time, at the deployment workload's
    sizes, swept into the tuning database: docs/tables2.md)
    follows the library's steps instead of one point's accident; 1 (the default) is the single nearest.
    library_steps (cost mode only): predicates over the sizes where the library's time steps, e.g. ("m,k%2",)
    (cuBLAS fp16: M and K both even) or ("cols<=2048", "rows<16000") (PyTorch softmax); the library is then priced
    only from tuned points of the problem's step class (runtime.py rule 4', `parse_steps`; docs/tables2.md)."""

    mode: str = "regions"
    library_margin: float = 0.0
    reach: float = 1.0
    neighbours: int = 1
    library_steps: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"unknown structure mode {self.mode!r}; expected one of {MODES}")
        if not (isinstance(self.neighbours, int) and 1 <= self.neighbours <= MAX_NEIGHBOURS):
            raise ValueError(f"neighbours must be an integer in 1..{MAX_NEIGHBOURS}, got {self.neighbours!r}")
        if self.neighbours > 1 and self.mode != "cost":
            raise ValueError(f"neighbours applies to the cost mode only, not {self.mode!r}")
        if self.library_steps:
            if self.mode != "cost":
                raise ValueError(f"library steps apply to the cost mode only, not {self.mode!r}")
            for step in self.library_steps:
                if not _STEP.fullmatch(step):
                    raise ValueError(f"library step {step!r}: expected SIZE[,SIZE...]%N, SIZE<=N or SIZE<N")

    @property
    def regions(self) -> bool:
        return self.mode == "regions"

    def describe(self) -> dict:
        out: dict = {"mode": self.mode, "library_margin": self.library_margin, "reach": self.reach}
        if self.neighbours != 1:  # absent: 1 (tables written before it existed read the same)
            out["neighbours"] = self.neighbours
        if self.library_steps:  # absent: none
            out["library_steps"] = list(self.library_steps)
        return out


def parse_structure(text: str) -> Structure:
    """MODE[:MARGIN[:REACH[:NEIGHBOURS[:STEPS]]]] (e.g. `cost:0.05:1:2`, `cost:0.05:1:4:m,k%2`) as a Structure;
    ValueError otherwise (MARGIN a fraction in [0, 1), REACH >= 0, NEIGHBOURS 1..MAX_NEIGHBOURS, cost mode only;
    STEPS the library's step predicates joined by "+", e.g. `cols<=2048+rows<16000`, cost mode only)."""
    mode, *rest = text.split(":")
    if len(rest) > 4:
        raise ValueError(f"too many fields in {text!r}")
    steps = tuple(x.strip() for x in rest[3].split("+")) if len(rest) > 3 else ()
    margin = float(rest[0]) if rest else 0.0
    reach = float(rest[1]) if len(rest) > 1 else 1.0
    neighbours_text = rest[2].strip() if len(rest) > 2 else "1"
    if not neighbours_text.isdigit():
        raise ValueError(f"NEIGHBOURS must be a positive integer, got {neighbours_text!r}")
    if not (0 <= margin < 1 and 0 <= reach < 1e6):  # also refuses nan
        raise ValueError(f"MARGIN must be in [0, 1) and REACH >= 0, got {text!r}")
    return Structure(mode, margin, reach, int(neighbours_text), steps)


_STEP = re.compile(r"[A-Za-z_]\w*(,[A-Za-z_]\w*)*%[1-9]\d*|[A-Za-z_]\w*<=?[1-9]\d*")


MODES = ("regions", "nearest", "cost", "model")
MAX_NEIGHBOURS = 16
STRUCTURES = (
    tuple(Structure(m, margin) for m in ("regions", "nearest") for margin in (0.0, 0.05, 0.1, 0.2))
    + tuple(Structure("cost", margin, reach) for reach in (0.5, 1.0, 2.0) for margin in (0.0, 0.05, 0.1, 0.2))
    + tuple(Structure("model", margin) for margin in (0.0, 0.05, 0.1))
)


@dataclass(frozen=True)
class Provenance:
    """Where the measurements came from."""

    device: str
    sweep_ids: tuple[str, ...] = ()
    device_info: Mapping[str, Any] = field(default_factory=dict)
    software: Mapping[str, str] = field(default_factory=dict)
    scalars: Mapping[str, float] = field(default_factory=dict)  # the sweeps' scalars (bytes moved read them)
    include_dir: str | None = None  # what the kernels' sources are relative to


@dataclass(frozen=True)
class Answers:
    """What a table may answer besides its kernels, and what it knows of its kernels (one argument for the table
    builder, leave-one-out and the structure choice).

    `kernel_info`: (instance_id, precision, shape) -> KernelInfo (None: none known). `library_ms`: the library's
    time per point row of the matrix (NaN: not measured; None: no times; see `library_times`); where it is faster
    than the table's kernels it is the point's answer. `fallback`: "library", "naive" or "none", the answer where
    no kernel of the table is valid (None: `default_fallback`). `generic`: the kind's generic kernel (None: it has
    none)."""

    kernel_info: Mapping[tuple[str, str, str], KernelInfo] | None = None
    library_ms: np.ndarray | None = None
    fallback: str | None = None
    generic: GenericKernel | None = None
