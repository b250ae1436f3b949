"""Runtime refinement of a dispatch table (optional, off unless asked for): at a problem the table
was not tuned on, time its few best-predicted answers and the library once, keep the fastest, and answer from that
choice after. Standard library only, like `runtime` (a generated module can use it).

    import dispatch                                   # a module written by `autotune emit -f python`
    from autotune.dispatch.refine import Refiner
    refine = Refiner(dispatch.TABLE, timer, top=3, cache_file="dispatch.choices.json")
    index = refine.index("fp32", "NN", {"m": 17, "n": 9, "k": 30, "batch": 1000})

`timer(answer, precision, shape, sizes)` times one answer at one problem (`answer`: a kernel index, LIBRARY -2 or
GENERIC -1; `sizes`: {name: value}) and returns a time (any unit, smaller is faster) or None when it cannot run
there; an exception counts as None. The candidates at a problem: the table's own answer, the next best answers the
table predicts (model tables: by predicted time; other structures: the ranked list of the nearest tuned point),
`top` kernels in all, and the library where the table has one. At a tuned point the table's answer was measured
already: it is returned untimed. The choice is cached in memory and, with `cache_file`, in a JSON file (written
atomically after each new choice, read at start).

A cache file is data: one written for another table (its digest), one that is not a refinement cache, or one over
MAX_CACHE_BYTES is ignored with one warning. Each cached answer is checked before it is served: an index this table
holds (a whole number, not a bool or text), at a problem the table was not tuned on, and an answer the table may give
there: a kernel of that precision and shape valid at those sizes, the library where the table has one, or the
table's own answer. One that is not (an fp64 kernel for an fp32 problem, an index past the kernels) is ignored, with
one warning for the file, and that problem is refined again.

The first call at an unseen problem costs the timer's calls (`stats`: calls, seconds); the GPU test
(tests/gpu/test_refine_gpu.py) measures it with the GPU backend's timer (`refine_timer.backend_timer`).
"""

from __future__ import annotations

import hashlib
import json
import os
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional

from autotune.dispatch.onsite import candidates
from autotune.dispatch.runtime import LIBRARY, NONE, Lookup

Timer = Callable[[int, str, str, dict], Optional[float]]
CACHE_FORMAT = "autotune-refine-cache"
MAX_CACHE_BYTES = 64 << 20  # a cache file larger than this is not read


def table_digest(table: dict) -> str:
    """A digest of the table (its JSON, keys sorted): a cache file belongs to exactly one table."""
    return hashlib.sha256(json.dumps(table, sort_keys=True, default=str).encode()).hexdigest()[:16]


@dataclass
class Stats:
    """What refinement cost so far: problems refined, timer calls, seconds spent in the timer, cache hits."""

    refined: int = 0
    calls: int = 0
    seconds: float = 0.0
    hits: int = 0
    first_call_s: list[float] = field(default_factory=list)  # wall seconds of each refining call


class Refiner:
    """A table's lookup with runtime refinement (see the module docstring)."""

    def __init__(
        self, table: dict, timer: Timer, top: int = 3, cache_file: str | Path | None = None, library: bool = True
    ) -> None:
        if top < 1:
            raise ValueError(f"top must be >= 1, got {top}")
        self.lookup = Lookup(table)
        self.timer = timer
        self.top = int(top)
        self.library = library and bool(self.lookup.library)
        self.digest = table_digest(table)
        self.cache_file = Path(cache_file) if cache_file is not None else None
        self.choices: dict[str, dict[str, Any]] = {}
        self.checked: set[str] = set()  # keys of choices checked to be answers of this table (the file's are not yet)
        self.warned = False  # the cache file held an answer of another table (said once)
        self.stats = Stats()
        if self.cache_file is not None and self.cache_file.is_file():
            self._read()

    # ---------------------------------------------------------------------------------------------- answers
    def index(self, precision: str, shape: str, sizes: Any) -> int:
        """The answer (kernel index, GENERIC, LIBRARY or NONE) at a problem, refined by timing at first sight."""
        dims = self.lookup.check(precision, shape, sizes)
        key = self.key(precision, shape, dims)
        hit = self.choices.get(key)
        if hit is not None and (key in self.checked or self._admissible(key, hit, precision, shape, dims)):
            self.stats.hits += 1
            return int(hit["answer"])
        answer = self.lookup.index(precision, shape, dims)
        if self.tuned(precision, shape, dims) or answer == NONE:
            return answer  # measured there already / nothing may serve it
        start = time.perf_counter()
        named = dict(zip(self.lookup.names, dims, strict=True))
        times: dict[int, float | None] = {}
        for cand in self.candidates(precision, shape, dims):
            t0 = time.perf_counter()
            try:
                t = self.timer(cand, precision, shape, named)
            except Exception:  # noqa: BLE001 - an answer that cannot run here is not chosen
                t = None
            self.stats.calls += 1
            self.stats.seconds += time.perf_counter() - t0
            times[cand] = float(t) if t is not None and t == t and t > 0 else None
        timed = {a: t for a, t in times.items() if t is not None}
        chosen = min(timed, key=lambda a: (timed[a], a != answer, a)) if timed else answer
        self.choices[key] = {"answer": chosen, "table": answer, "times": {str(a): t for a, t in times.items()}}
        self.checked.add(key)
        self.stats.refined += 1
        self.stats.first_call_s.append(time.perf_counter() - start)
        if self.cache_file is not None:
            self._write()
        return chosen

    def kernel(self, precision: str, shape: str, sizes: Any) -> dict:
        """The kernel record of the refined answer (as the generated module's `lookup`)."""
        return self.lookup.kernel(self.index(precision, shape, sizes), precision, shape)

    def candidates(self, precision: str, shape: str, dims: tuple[int, ...]) -> list[int]:
        """The answers timed at an unseen problem (`onsite.candidates`, as the generated module times them)."""
        return candidates(self.lookup, precision, shape, dims, self.top, self.library)

    def tuned(self, precision: str, shape: str, dims: tuple[int, ...]) -> bool:
        return any(p[0] == dims for p in self.lookup.points.get((precision, shape), []))

    @staticmethod
    def key(precision: str, shape: str, dims: tuple[int, ...]) -> str:
        return f"{precision}:{shape}:" + "x".join(map(str, dims))

    def _admissible(self, key: str, hit: Any, precision: str, shape: str, dims: tuple[int, ...]) -> bool:
        """Whether a cached choice read from the file is an answer this table may give at the problem (see the
        module docstring); one that is not is dropped (one warning per file) and the problem refined again."""
        from autotune.errors import UserError
        from autotune.untrusted import number

        lookup = self.lookup
        raw = hit.get("answer") if isinstance(hit, dict) else None
        try:  # a whole number as written by _write: not a bool, a fraction or text
            answer = int(number(raw, name="answer", integer=True)) if isinstance(raw, int) else None
        except UserError:
            answer = None
        if answer is None or self.tuned(precision, shape, dims):
            ok = False  # at a tuned point the table's answer was measured: nothing is cached there
        elif answer >= 0:
            record = lookup.kernels[answer] if answer < len(lookup.kernels) else {}
            ok = record.get("precision") == precision and record.get("shape") == shape and lookup.valid(answer, dims)
        else:
            ok = answer == LIBRARY and bool(lookup.library)
        if ok or (answer is not None and answer == lookup.index(precision, shape, dims)):
            self.checked.add(key)
            self.choices[key] = {**hit, "answer": answer} if isinstance(hit, dict) else {"answer": answer}
            return True
        del self.choices[key]
        if not self.warned:
            self.warned = True
            warnings.warn(
                f"{self.cache_file}: the cached answer {str(hit)[:80]!r} at {key} is not one this table gives there "
                "(another precision or shape, a kernel not valid there or not in the table): ignored, with any other "
                "such answer in the file; the problem is refined again",
                stacklevel=3,
            )
        return False

    # ------------------------------------------------------------------------------------------------ cache file
    def _read(self) -> None:
        assert self.cache_file is not None
        try:
            if self.cache_file.stat().st_size > MAX_CACHE_BYTES:
                raise ValueError(f"over {MAX_CACHE_BYTES >> 20} MiB")
            doc = json.loads(self.cache_file.read_text())
        except (OSError, ValueError, RecursionError) as exc:
            warnings.warn(f"{self.cache_file}: not a refinement cache ({exc}); starting empty", stacklevel=3)
            return
        choices = doc.get("choices") if isinstance(doc, dict) else None  # None: doc is no JSON object
        if not isinstance(choices, dict) or doc.get("format") != CACHE_FORMAT or doc.get("table") != self.digest:
            warnings.warn(
                f"{self.cache_file} was written for another table (or is not a refinement cache): ignored; "
                "it is rewritten at the next refined problem",
                stacklevel=3,
            )
            return
        self.choices = {str(k): v for k, v in choices.items()}  # each checked when first served (_admissible)

    def _write(self) -> None:
        assert self.cache_file is not None
        doc = {"format": CACHE_FORMAT, "version": 1, "table": self.digest, "choices": self.choices}
        tmp = self.cache_file.with_name(self.cache_file.name + f".tmp{os.getpid()}")
        tmp.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
        os.replace(tmp, self.cache_file)
