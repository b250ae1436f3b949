"""The survivors pass of prune-while-enumerate (autotune/space/enum.py): parameters are bound one at a time in a
given order, in blocks of at most the engine's `chunk` rows, and each constraint is applied to the partial
combinations as soon as the parameters it reads are bound, so a partial combination that fails is never expanded."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from autotune.errors import SpaceError
from autotune.space.enum import Con, Enumerator, LimitReached, code_dtype
from autotune.space.orders import by_step


def survivors(
    engine: Enumerator,
    cons: Sequence[Con],
    order: Sequence[str],
    max_survivors: int,
    too_many: Callable[[int], SpaceError],
    total: int | None = None,
) -> dict[str, np.ndarray]:
    """Codes of every parameter for the rows that pass `cons`, in binding-order lexicographic order; written into
    arrays of `total` rows where the count is known, else gathered in blocks and joined."""
    engine.where = "enumeration"
    if total is not None and total > max_survivors:
        raise LimitReached(too_many(max_survivors))
    walk = _Walk(engine, cons, order, max_survivors, too_many, total)
    walk.expand({}, 1, 0)
    return walk.result()


@dataclass(frozen=True)
class _Block:
    """Rows `lo:hi` of a level, each expanded by the `d` values of the next parameter and filtered: `new` holds the
    `m` kept rows' expanded columns, `parent` their row in the level (None: every row kept, in order), `others` the
    columns still to take from the level's `codes`."""

    codes: dict[str, np.ndarray]
    lo: int
    hi: int
    d: int
    new: dict[str, np.ndarray]
    m: int
    parent: np.ndarray | None
    others: list[str]


class _Walk:
    """One `survivors` pass: the constraints decided at each binding step, and the rows kept so far."""

    def __init__(
        self,
        engine: Enumerator,
        cons: Sequence[Con],
        order: Sequence[str],
        max_survivors: int,
        too_many: Callable[[int], SpaceError],
        total: int | None,
    ) -> None:
        self.engine, self.order = engine, order
        self.max_survivors, self.too_many = max_survivors, too_many
        self.out: dict[str, np.ndarray] | None = (
            {p: np.empty(total, dtype=code_dtype(engine.sizes[p])) for p in order} if total is not None else None
        )
        self.pieces: list[dict[str, np.ndarray]] = []
        self.at_step = by_step(order, cons, lambda c: c.deps)
        self.reads = [sorted({q for c in cs for q in c.deps} - {order[i]}) for i, cs in enumerate(self.at_step)]
        # rows that will certainly be expanded below a row kept at step i, before the next constraint applies
        self.certain = [1] * (len(order) + 1)
        for i in range(len(order) - 1, -1, -1):
            self.certain[i] = engine.sizes[order[i]] * (1 if self.at_step[i] else self.certain[i + 1])
        self.kept_total = 0
        self.last = len(order) - 1

    def emit(self, n: int) -> int:
        """Count `n` more survivors (stopping past the limit); the row they start at."""
        lo = self.kept_total
        self.kept_total += n
        if self.kept_total > self.max_survivors:
            raise LimitReached(self.too_many(self.max_survivors))
        if self.out is not None and self.kept_total > len(self.out[self.order[0]]):
            raise AssertionError(f"enumeration found more rows than counting ({len(self.out[self.order[0]]):,})")
        return lo

    def expand(self, codes: dict[str, np.ndarray], n: int, i: int) -> None:
        """Bind parameter `i` of the order below each of the `n` rows of `codes`, in blocks, and go on below the
        rows kept (the last parameter: keep them)."""
        engine = self.engine
        d = engine.sizes[self.order[i]]
        per = max(1, engine.chunk // d)
        for lo in range(0, n, per):
            hi = min(n, lo + per)
            engine.spend((hi - lo) * d, self.order[: i + 1], 0, None)
            block = self._block(codes, lo, hi, i)
            if block is None:
                continue
            if i == self.last and self.out is not None:
                self._write(block, self.emit(block.m))
                continue
            new = self._gathered(block)
            if i == self.last:
                self.emit(block.m)
                self.pieces.append(new)
                continue
            engine.spend(0, self.order[: i + 1], block.m, block.m * self.certain[i + 1])
            self.expand(new, block.m, i + 1)

    def _block(self, codes: dict[str, np.ndarray], lo: int, hi: int, i: int) -> _Block | None:
        """Rows `lo:hi` of `codes` expanded by parameter `i` and filtered by the constraints it decides (None: no row
        kept)."""
        engine = self.engine
        p, d = self.order[i], engine.sizes[self.order[i]]
        m = (hi - lo) * d
        if not self.at_step[i]:
            return _Block(codes, lo, hi, d, {p: np.tile(engine.value_codes[p], hi - lo)}, m, None, list(codes))
        # only the columns the constraints read are expanded; the kept rows gather the others
        sub = {q: np.repeat(codes[q][lo:hi], d) for q in self.reads[i]}
        sub[p] = np.tile(engine.value_codes[p], hi - lo)
        new, m, pos = engine.select(self.at_step[i], sub, m)
        if not m:
            return None
        # int32 division is several times faster than int64; take() wants intp indices
        parent = (
            (
                pos.astype(np.int32) // np.int32(d)
                if pos is not None
                else np.repeat(np.arange(hi - lo, dtype=np.int32), d)
            )
            + np.int32(lo)
        ).astype(np.intp)
        return _Block(codes, lo, hi, d, new, m, parent, [q for q in codes if q not in new])

    def _write(self, block: _Block, at: int) -> None:
        """The block's rows into the output arrays from row `at`."""
        assert self.out is not None
        out, m = self.out, block.m
        for q, a in block.new.items():
            out[q][at : at + m] = a
        for q in block.others:
            if block.parent is None:
                out[q][at : at + m].reshape(block.hi - block.lo, block.d)[:] = block.codes[q][block.lo : block.hi, None]
            else:
                np.take(block.codes[q], block.parent, out=out[q][at : at + m], mode="clip")

    def _gathered(self, block: _Block) -> dict[str, np.ndarray]:
        """The block's rows with every column bound so far."""
        new = block.new
        for q in block.others:
            new[q] = (
                np.take(block.codes[q], block.parent, mode="clip")
                if block.parent is not None
                else np.repeat(block.codes[q][block.lo : block.hi], block.d)
            )
        return new

    def result(self) -> dict[str, np.ndarray]:
        sizes, order = self.engine.sizes, self.order
        if self.out is not None:
            if self.kept_total != len(self.out[order[0]]):
                raise AssertionError(
                    f"enumeration found {self.kept_total:,} rows, counting {len(self.out[order[0]]):,}"
                )
            return self.out
        if not self.pieces:
            return {p: np.zeros(0, dtype=code_dtype(sizes[p])) for p in order}
        joined = {p: np.concatenate([pc[p] for pc in self.pieces]) for p in order}
        self.pieces.clear()
        return joined
