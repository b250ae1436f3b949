"""Refinement where the application runs (off unless used): at a problem's first call, time the table's candidates
on the caller's own data with CUDA events in the caller's stream, keep the fastest, answer from that choice after.
Standard library only, CuPy imported when the default timer first runs: every generated Python module carries a copy
of this code after its `__future__` line (as it does of runtime.py), so it needs neither autotune nor a database.

    import dispatch                                    # written by `autotune emit -f python`
    refiner = dispatch.refiner(top=3)                  # one per process (thread-safe)
    answer = refiner.index("fp32", "NN", (m, n, k, batch), run=lambda a: my_gemm(a, A, B, C))
    my_gemm(answer, A, B, C)

`run(answer)` launches one answer (a kernel index, or LIBRARY -2: call the library) on this call's arguments in
the stream being timed (CuPy's current stream unless `stream` is given); it must be repeatable (it runs several
times at a first call: write outputs only). The candidates (`candidates`): the table's answer, its next best
kernels (model tables: by predicted time; others: the ranked list of the nearest tuned point), `top` kernels in
all, then the library where the table has one. Each is run once untimed, then `reps` times between two CUDA
events; one that raises is not chosen. At a tuned point, or where nothing may serve the problem, the table's answer
is returned untimed. Choices are cached per (precision, shape, sizes) in memory; first calls are serialized by a
lock (timings on one GPU must not overlap), cached answers are read without it.
"""

from __future__ import annotations

import threading
from typing import Any, Callable, Optional

from autotune.dispatch.runtime import LIBRARY, NONE, Lookup

Run = Callable[[int], Any]
EventTimer = Callable[[Run, int, Any, int], Optional[float]]


def candidates(lookup: Lookup, precision: str, shape: str, dims: tuple[int, ...], top: int, library: bool) -> list:
    """The answers timed at an unseen problem: the table's answer first, then its next best valid kernels (`top`
    kernels in all), then the library (where `library` and the table has one, or where it is the table's answer)."""
    answer = lookup.index(precision, shape, dims)
    ordered = [answer]
    if lookup.mode == "model":
        predicted = lookup.predicted_times(precision, shape, dims)
        ordered += sorted((a for a in predicted if a >= 0), key=lambda a: (predicted[a], a))
    else:
        nearest = lookup.nearest(precision, shape, dims)
        if nearest is not None:
            ranked = lookup.points[(precision, shape)][nearest][2]
            ordered += [a for a in ranked if a >= 0 and lookup.valid(a, dims)]
    kernels = [a for a in dict.fromkeys(ordered) if a != LIBRARY][:top]
    return [*kernels, *([LIBRARY] if (library and lookup.library) or answer == LIBRARY else [])]


def cupy_events(run: Run, answer: int, stream: Any, reps: int) -> Optional[float]:
    """Milliseconds per run of `answer`: one untimed run, then `reps` runs between two CUDA events recorded in
    `stream` (CuPy's current stream when None)."""
    import cupy

    s = stream if stream is not None else cupy.cuda.get_current_stream()
    run(answer)
    start, end = cupy.cuda.Event(), cupy.cuda.Event()
    start.record(s)
    for _ in range(reps):
        run(answer)
    end.record(s)
    end.synchronize()
    return float(cupy.cuda.get_elapsed_time(start, end)) / reps


class Refiner:
    """A table's lookup refined at each problem's first call (see the module docstring)."""

    def __init__(
        self, lookup: Lookup, top: int = 3, reps: int = 3, library: bool = True, timer: EventTimer = cupy_events
    ) -> None:
        if top < 1 or reps < 1:
            raise ValueError(f"top and reps must be >= 1, got {top} and {reps}")
        self.lookup, self.top, self.reps, self.library, self.timer = lookup, top, reps, library, timer
        self.choices: dict[tuple, int] = {}
        self.times: dict[tuple, dict[int, Optional[float]]] = {}  # per refined problem: ms per candidate
        self.timed = 0  # problems timed so far
        self._lock = threading.Lock()

    def index(self, precision: str, shape: str, sizes: Any, run: Run, stream: Any = None) -> int:
        """The answer at a problem: the cached choice, or at its first call the fastest candidate run by `run`."""
        dims = self.lookup.check(precision, shape, sizes)
        key = (precision, shape, dims)
        hit = self.choices.get(key)
        if hit is not None:
            return hit
        with self._lock:
            hit = self.choices.get(key)
            if hit is not None:
                return hit
            answer = self.lookup.index(precision, shape, dims)
            tuned = dims in self.lookup.exact.get((precision, shape), {})
            if not tuned and answer != NONE:
                times: dict[int, Optional[float]] = {}
                for c in candidates(self.lookup, precision, shape, dims, self.top, self.library):
                    try:
                        t = self.timer(run, c, stream, self.reps)
                    except Exception:  # noqa: BLE001 - an answer that cannot run here is not chosen
                        t = None
                    times[c] = t if t is not None and t == t and t > 0 else None
                ok = {a: t for a, t in times.items() if t is not None}
                if ok:
                    answer = min(ok, key=lambda a: (ok[a], a != answer, a))
                self.times[key] = times
                self.timed += 1
            self.choices[key] = answer
            return answer
