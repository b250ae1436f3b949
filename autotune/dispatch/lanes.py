"""Packed integers for the dispatch lookup (runtime.py): one Python integer holds one value per tuned point, region or
answer, each in its own lane of bits, so a lookup runs a few big-integer operations where a loop would run Python
code per point. Every value is exact (integers only): the answers are those of the rules, bit for bit.

Standard library only: every generated Python module carries a copy of this code before runtime.py's (emit.py).
"""

from __future__ import annotations

import sys
from array import array
from bisect import bisect_left, bisect_right
from functools import lru_cache
from itertools import compress, product, repeat
from operator import eq, itemgetter, rshift, sub
from typing import Callable, Iterable, Iterator, Sequence

KEY_BUDGET = 1 << 19  # per group: points x positions of the precomputed distance lanes (16 bytes each at 64-bit
# lanes, 8 at 32-bit ones) at most, counted in 64-bit lanes
BAND_POINTS = 8  # `Keys.bands`: about this many points per band after the first
SORT_ALL = 160  # `Keys.bands` sorts every key of a group of this many points or fewer (cheaper than bands)
CELL_COUNT, CELL_POINTS, CELL_FIRST = 4096, 64, 40  # `Keys.index`: cells at most, tuned points listed per cell, of
# them read first (most walks need no more)
TABLE_LIMIT, TABLE_BUDGET = 1 << 12, 1 << 18  # per size: the largest value tabulated, and times the lanes at most


def tabulated(top: int, lanes: int) -> int:
    """Up to which value a per-size table of `lanes` lanes is made (0: none)."""
    return top if top <= TABLE_LIMIT and top * lanes <= TABLE_BUDGET else 0


Checks = tuple[tuple[int, int, int, int], ...]  # per constrained size: (size, multiple of, min, max)


def unpack(value: int, count: int, width: int) -> list[int]:
    """The `count` lanes of `width` bits (`lane_width`) of a packed non-negative integer, lowest lane first."""
    raw = value.to_bytes(count * width // 8, "little")
    if width <= 64:
        lanes = array("I" if width == 32 else "Q", raw)
        if sys.byteorder == "big":  # the lanes were written little-endian
            lanes.byteswap()
        return lanes.tolist()
    step = width // 8
    return [int.from_bytes(raw[i : i + step], "little") for i in range(0, len(raw), step)]


def lane_width(bits: int) -> int:
    """The lane width for values of `bits` bits: 32, 64 or a multiple of 64 (what `unpack` reads)."""
    return 32 if bits <= 32 else -(-bits // 64) * 64


class Invalid:
    """The answers whose validity predicates fail at a problem, as one integer: the OR of their masks (`at`). Per
    constrained size, the distinct minima and maxima are bisected (the answers failing at a size are a suffix of
    the minima and a prefix of the maxima), then the distinct multiples tried; an answer whose checks are None
    (tuned_only) fails everywhere. Per size whose `limits` entry (the largest value to tabulate) is small enough
    (`tabulated`), the failing answers are tabulated for every value up to it."""

    def __init__(self, answers: Sequence[tuple[Checks | None, int]], limits: Sequence[int] = ()) -> None:
        self.always = 0
        per: dict[int, tuple[dict[int, int], dict[int, int], dict[int, int]]] = {}
        for checks, mask in answers:
            if checks is None:
                self.always |= mask
                continue
            for d, mult, lo, hi in checks:
                mults, lows, highs = per.setdefault(d, ({}, {}, {}))
                mults[mult] = mults.get(mult, 0) | mask
                lows[lo] = lows.get(lo, 0) | mask
                highs[hi] = highs.get(hi, 0) | mask
        Size = tuple[int, list[int], list[int], list[int], list[int], list[int], tuple[tuple[int, int], ...]]
        self.sizes: list[Size] = []
        for d, (mults, lows, highs) in sorted(per.items()):
            lo_keys, hi_keys = sorted(lows), sorted(highs)
            above = [0] * (len(lo_keys) + 1)  # above[i]: the answers whose minimum is lo_keys[i] or more
            for i in range(len(lo_keys) - 1, -1, -1):
                above[i] = above[i + 1] | lows[lo_keys[i]]
            below = [0]  # below[i]: the answers whose maximum is below hi_keys[i]
            for h in hi_keys:
                below.append(below[-1] | highs[h])
            size: Size = (d, [], lo_keys, above, hi_keys, below, tuple((m, k) for m, k in mults.items() if m != 1))
            top = tabulated(limits[d], len(answers)) if d < len(limits) else 0
            size[1].extend(_failing(x, size) for x in range(top + 1) if top)
            self.sizes.append(size)

    def at(self, dims: Sequence[int]) -> int:
        bad = self.always
        for size in self.sizes:
            x = dims[size[0]]
            bad |= size[1][x] if x < len(size[1]) else _failing(x, size)
        return bad


@lru_cache(maxsize=4096)
def _band(low: int, high: int) -> bytes:
    """A `bytes.translate` table giving 1 for the byte values low..high, 0 for the others."""
    return bytes(low) + b"\1" * (high - low + 1) + bytes(255 - high)


def _failing(x: int, size: tuple) -> int:
    """The answers failing at value x of one size (`Invalid.sizes`)."""
    _, _, lo_keys, above, hi_keys, below, mults = size
    bad = above[bisect_right(lo_keys, x)] | below[bisect_left(hi_keys, x)]
    for mult, mask in mults:
        if x % mult:
            bad |= mask
    return bad


class Boxes:
    """One group's merged regions (rule 3): per table size, the sorted values where a region starts or ends and, per
    interval between two of them, the regions covering it as bits (region i of the table's order: bit i)."""

    def __init__(self, boxes: Sequence[tuple[Sequence[int], Sequence[int], int]], near_dims: Sequence[int]) -> None:
        self.kernels = [kernel for _, _, kernel in boxes]
        self.axes: list[tuple[int, list[int], list[int]]] = []
        for j, d in enumerate(near_dims):
            cuts = sorted({lo[j] for lo, _, _ in boxes} | {hi[j] + 1 for _, hi, _ in boxes})
            covering = [sum(1 << i for i, (lo, hi, _) in enumerate(boxes) if lo[j] <= c <= hi[j]) for c in cuts]
            self.axes.append((d, cuts, [0, *covering]))  # below the first cut: none

    def at(self, dims: Sequence[int]) -> int:
        """The regions containing a problem, as bits."""
        inside = -1
        for d, cuts, covering in self.axes:
            inside &= covering[bisect_right(cuts, dims[d])]
        return inside


class Keys:
    """The tuned points of one group ranked at a problem: one key per point, packed into one integer (`packed`, lane
    i: point i's key; `at`: the keys in table order). A key is distance << shift | tie distance << tie_shift | order:
    the log-ratio distance over the sizes `dims[:near]`, the same over the others (the tie sizes) and the table
    order, so keys sorted run in the rules' order (nearest first, then by the tie sizes, then by table order);
    key >> shift: the distance; key & order_mask: the point. Where the tie distance would double the lanes of a
    group read by bands (more than SORT_ALL points; `ties`: per point, its tie sizes' logs), keys leave it out and
    `bands` orders the points at equal distances by it (`in_order`). `rows`: per point, the logs (`log`) of its
    `sizes`.

    A problem's log beyond the points' range over a size is taken at its end: that moves every point's distance by
    the same amount (relative distances and the order stay exact), and bounds the distances by the sums of the
    ranges; a key takes the low bits of its lane (keys below 2**30 are the integers Python compares and sorts
    fastest), the distance padded so that a key's top 8 bits are the top byte of its `bits` (`_bands` reads the
    points nearest first by bands of those bytes, without an integer per point; of the distance alone where ties
    are settled apart).

    The distance of point i is the sum over the sizes of |a - x_i| (a: the problem's log, x_i: the point's). Below,
    above or at each x_i that is +-(a - x_i): per size, the points' distinct logs cut the axis into intervals where
    every sign is fixed, and per interval the lanes of sign(a - x_i) (`slopes`) and of -sign(a - x_i) * x_i
    (`offsets`; the first size's also hold the order) are precomputed, so a problem's keys are the sum of
    a * slope + offset over the sizes: one bisection, one product and two sums per size; per size whose largest
    tuned value is small enough (`tabulated`), that term is tabulated for every value up to it (beyond it the term
    is the last one), so the sum takes one index per size. Where that would take more than KEY_BUDGET lane
    positions, a loop over the points gives the same keys."""

    def __init__(
        self, sizes: Sequence[Sequence[int]], dims: Sequence[int], log: Callable[[int], int], near: int
    ) -> None:
        rows = self.rows = [[log(x) for x in row] for row in sizes]
        n = self.count = len(rows)
        self.dims, self.log, self.near = list(dims), log, near
        self.order_mask = (1 << max(1, (n - 1).bit_length())) - 1
        axes = range(len(dims))
        self.low, self.high = [min(r[j] for r in rows) for j in axes], [max(r[j] for r in rows) for j in axes]
        spans = [sum(self.high[:near]) - sum(self.low[:near]), sum(self.high[near:]) - sum(self.low[near:])]
        order, far, tie = self.order_mask.bit_length(), max(8, spans[0].bit_length()), spans[1].bit_length()
        apart = n > SORT_ALL and tie > 0 and lane_width(-(-(order + far) // 8) * 8) < lane_width(order + tie + far)
        self.ties = [row[near:] for row in rows] if apart else None  # settled by `bands` (`in_order`)
        self.keyed = near if apart else len(dims)  # the sizes in the keys: dims[:keyed]
        self.tie_shift = order
        self.shift = self.tie_shift + (0 if apart else tie)
        far = far if apart else spans[0].bit_length()  # apart: the top byte of the distance's bits alone
        self.shift += -(self.shift + far) % 8  # a key's top 8 bits: the top byte of its lane's bytes
        self.bits = self.shift + far  # every key is below 2**bits
        w = self.width = lane_width(self.bits)
        self.axes: list[tuple[int, list[int], list[int], list[int], list[int]]] | None = []
        self.cuts: list[list[int]] = []  # `index`: per size of the distance, where its intervals start
        self.cells: list[tuple[Callable, int, Callable, int]] = []  # per cell: its first and other listed points'
        # getters, each with its bound << shift
        self.spread = self.span = 0  # `bands`: a wide first band's values of the top byte; the last bands' span
        if (
            not self.keyed
            or n * sum(len({row[j] for row in rows}) + 1 for j in range(self.keyed)) * w // 64 > KEY_BUDGET
        ):
            self.axes = None
            return
        for j, d in enumerate(dims[: self.keyed]):
            at: dict[int, int] = {}  # log -> the lanes (1 << shift or tie_shift) of the points there
            for i, row in enumerate(rows):
                at[row[j]] = at.get(row[j], 0) + (1 << (w * i + (self.shift if j < near else self.tie_shift)))
            slope, offset = -sum(at.values()), sum(x * lanes for x, lanes in at.items())  # below every point
            if not self.axes:
                offset += sum(i << (w * i) for i in range(n))  # the points' order, in the first size's offsets
            coords, slopes, offsets = sorted(at), [0], [0]
            for x in coords:  # at or above x: the points there turn to +(a - x)
                slope += 2 * at[x]
                offset -= 2 * x * at[x]
                slopes.append(slope)
                offsets.append(offset)
            # beyond the range: as at its ends (the problem's log taken there)
            offsets[0], offsets[-1] = coords[0] * slopes[1] + offsets[1], coords[-1] * slope + offset
            slopes[-1] = 0
            top = max(row[j] for row in sizes)  # from it on, the term is offsets[-1]
            table = []
            if tabulated(top, n):
                for a in map(log, range(1, top + 1)):
                    p = bisect_right(coords, a)
                    table.append(a * slopes[p] + offsets[p])
                table.insert(0, table[0])  # index 0: no size is 0
            self.axes.append((d, table, coords, slopes, offsets))

    def packed(self, dims: Sequence[int]) -> int:
        """Every point's key at a problem (all its sizes: `dims`), lane i holding point i's."""
        if self.axes is None:
            logs = [self.log(dims[d]) for d in self.dims]
            logs = [lo if a < lo else hi if a > hi else a for a, lo, hi in zip(logs, self.low, self.high, strict=True)]
            near, ties = logs[: self.near], logs[self.near : self.keyed]
            keys = [
                sum(map(abs, map(sub, near, row))) << self.shift
                | sum(map(abs, map(sub, ties, row[self.near :]))) << self.tie_shift
                | i
                for i, row in enumerate(self.rows)
            ]
            return int.from_bytes(array("I" if self.width == 32 else "Q", keys).tobytes(), "little")
        key = 0
        for d, table, coords, slopes, offsets in self.axes:
            x = dims[d]
            if table:
                key += table[x] if x < len(table) else table[-1]
            else:
                a = self.log(x)
                p = bisect_right(coords, a)
                key += a * slopes[p] + offsets[p]
        return key

    def index(self) -> None:
        """Per cell of the problems' space (per size of the distance, `splits` intervals equal in log, about
        CELL_COUNT cells in all; a problem's log taken into the points' range), the CELL_POINTS points nearest the
        cell (the distance to a box: per size, to its interval) and a bound, the distance to the cell of the nearest
        one left out: no point left out is nearer any problem of the cell, so the listed points nearer than the bound
        are every point nearer (`nearest`); the same for its CELL_FIRST nearest. `cuts`: per size, the first size of
        each interval after the first."""
        if self.axes is None or self.count <= CELL_POINTS or not self.near:
            return
        splits = 1
        while (splits + 1) ** self.near <= CELL_COUNT:
            splits += 1
        axes = []  # per size, per interval: every point's distance to it
        for j in range(self.near):
            lo, hi = self.low[j], self.high[j]
            edges = sorted({lo + (hi - lo) * i // splits for i in range(splits)})
            self.cuts.append([self._first_at(e) for e in edges[1:]])
            ends = zip(edges, [e - 1 for e in edges[1:]] + [hi], strict=True)
            axes.append([[max(0, a - row[j], row[j] - b) for row in self.rows] for a, b in ends])
        for cell in product(*axes):
            far = list(map(sum, zip(*cell, strict=True)))  # per point, its distance to the cell
            chosen = sorted(range(self.count), key=far.__getitem__)
            first, other = itemgetter(*chosen[:CELL_FIRST]), itemgetter(*chosen[CELL_FIRST:CELL_POINTS])
            self.cells.append(
                (first, far[chosen[CELL_FIRST]] << self.shift, other, far[chosen[CELL_POINTS]] << self.shift)
            )

    def _first_at(self, log: int) -> int:
        """The smallest size whose log is `log` or more (`log`: at most a point's)."""
        low, high = 1, 1 << 62
        while low < high:
            mid = (low + high) // 2
            low, high = (mid + 1, high) if self.log(mid) < log else (low, mid)
        return low

    def nearest(self, dims: Sequence[int]) -> Iterator[list[int]]:
        """The keys at a problem of a group with cells (`index`) sorted (equally near points in table order), as
        bands (lists): those nearer than the first bound of the problem's cell, then those nearer than its second,
        then the others (`bands`, not `settled`)."""
        cell = 0
        for d, cuts in zip(self.dims, self.cuts, strict=False):  # the sizes of the distance: dims[:near]
            cell = cell * (len(cuts) + 1) + bisect_right(cuts, dims[d])
        pick, bound, more, far = self.cells[cell]
        lanes = array(
            "I" if self.width == 32 else "Q", self.packed(dims).to_bytes(self.count * self.width // 8, "little")
        )
        if sys.byteorder == "big":  # the lanes were written little-endian
            lanes.byteswap()
        keys = sorted(pick(lanes))
        at = bisect_left(keys, bound)
        yield keys[:at]
        keys = sorted(keys[at:] + list(more(lanes)))
        yield keys[: bisect_left(keys, far)]
        yield from (b[bisect_left(b, far) :] for b in self.bands(dims, False, False, far))

    def at(self, dims: Sequence[int]) -> list[int]:
        """Every point's key at a problem (all its sizes: `dims`), in table order."""
        return unpack(self.packed(dims), self.count, self.width)

    def bands(
        self, dims: Sequence[int], wide: bool = False, settled: bool = True, after: int = 0
    ) -> Iterable[list[int]]:
        """The keys at a problem in the rules' order, as bands (lists): the smallest key's top byte (`wide`: up to
        `spread` more), then bands of about BAND_POINTS points. Lanes wider than 64 bits, or SORT_ALL points or fewer:
        one band of every key. Not `settled`: keys sorted (equally near points in table order where the tie sizes
        are settled apart), for a walk that tells where they would decide. `after`: from the top byte of that key on
        (the keys below it may be left out)."""
        packed = self.packed(dims)
        if self.width > 64 or self.count <= SORT_ALL:
            keys = unpack(packed, self.count, self.width)
            return (self.in_order(keys, dims) if settled else sorted(keys),)
        return self._bands(packed, dims, wide, settled, after >> (self.bits - 8))

    def in_order(self, keys: list[int], dims: Sequence[int]) -> list[int]:
        """Keys sorted in the rules' order: where ties are settled apart (`ties`), the runs of equal distances are
        ordered by the distance over the tie sizes (the problem's logs not taken into the points' range: that
        moves every point's by the same amount), then table order."""
        keys.sort()
        shift = self.shift
        if self.ties is None or len(keys) < 2 or len({k >> shift for k in keys}) == len(keys):
            return keys
        far = list(map(rshift, keys, repeat(shift)))
        tie = self.tie(dims)
        runs: list[list[int]] = []  # the runs of equal distances: [first, end)
        for i in compress(range(1, len(far)), map(eq, far[1:], far)):  # key i at the distance of key i - 1
            if runs and runs[-1][1] == i:
                runs[-1][1] = i + 1
            else:
                runs.append([i - 1, i + 1])
        for first, end in runs:
            keys[first:end] = sorted(keys[first:end], key=tie)
        return keys

    def tie(self, dims: Sequence[int]) -> Callable[[int], tuple[int, int]]:
        """The sort key of equally near keys at a problem, where ties are settled apart (`in_order`): the distance
        over the tie sizes, then the key (table order)."""
        logs, rows, mask = [self.log(dims[d]) for d in self.dims[self.near :]], self.ties or [], self.order_mask
        return lambda k: (sum(map(abs, map(sub, logs, rows[k & mask]))), k)

    def _bands(self, packed: int, dims: Sequence[int], wide: bool, settled: bool, low: int) -> Iterator[list[int]]:
        step = self.width // 8
        raw = packed.to_bytes(self.count * step, "little")
        keys = array("I" if step == 4 else "Q", raw)
        if sys.byteorder == "big":  # the lanes were written little-endian
            keys.byteswap()
        tops = raw[self.bits // 8 - 1 :: step]  # per point, its key's top 8 bits (the layout keeps them a byte)
        while low < 256 and low not in tops:  # the smallest top (from `low`): a C-level search per value (min()
            low += 1  # iterates in Python objects)
        if low == 256:
            return
        start, high, width = low, min(255, low + self.spread) if wide else low, 1
        while True:
            band, value = (tops, low) if low == high else (tops.translate(_band(low, high)), 1)
            found = []
            at = band.find(value)
            while at >= 0:
                found.append(keys[at])
                at = band.find(value, at + 1)
            if settled:
                self.in_order(found, dims)
            else:
                found.sort()
            self.span = high - start
            yield found
            if high == 255:
                return
            # the next band: as wide as this one's density says for BAND_POINTS points, at most twice the last one
            # after the first (the points get denser farther out)
            width = max(1, min(2 * width, BAND_POINTS * (high - low + 1) // max(1, len(found))))
            low, high = high + 1, min(255, high + width)
