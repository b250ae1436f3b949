"""The fixed-point logarithm of the dispatch lookup (runtime.py) and the selection model's integer features of a
problem (rule 4''), with their evaluation for every answer of a group at once in the lanes of one integer
(`ModelLanes`). Integers only, identical in the C++ header.

Standard library only: every generated Python module carries a copy of this code (emit.py).
"""

from __future__ import annotations

import math
from operator import mul
from typing import Sequence

from autotune.dispatch.lanes import Checks, Invalid, lane_width, tabulated, unpack

FX_BITS = 16
MODEL_ALIGN = 8  # model feature: each table size rounded up to a multiple of this
MODEL_SATURATE = 1 << 62  # the sum of pairwise products saturates here (C++ long long)


def _ilog2_loop(x: int) -> int:
    """floor(log2(x) * 2**16) computed on integers (x >= 1): the definition, identical in the C++ header."""
    n = x.bit_length() - 1
    y = x << (30 - n) if n <= 30 else x >> (n - 30)  # mantissa in [2**30, 2**31)
    r = n << FX_BITS
    for i in range(FX_BITS):
        y = (y * y) >> 30
        if y >= (1 << 31):
            y >>= 1
            r |= 1 << (FX_BITS - 1 - i)
    return r


def ilog2_fx(x: int) -> int:
    """`_ilog2_loop(x)` (floor(log2(x) * 2**16) on integers, as the C++ header computes it), 10 times faster: the
    loop's truncations move its result off floor(2**16 * log2(x)) only where that is within 3e-4 of an integer,
    so a float log2 farther than 0.01 from one gives the same integer, and the loop answers the rest
    (tests/test_lookup_speed.py compares both on every x up to 2**17 and on random x up to 2**62)."""
    v = math.log2(x) * _FX_ONE
    f = int(v)
    if 0.01 < v - f < 0.99:
        return f
    return (x.bit_length() - 1) << FX_BITS if not x & (x - 1) else _ilog2_loop(x)  # a power of two: as the loop


_FX_ONE = float(1 << FX_BITS)


_SMALL_LOGS = [0, *(_ilog2_loop(x) for x in range(1, 1 << 12))]  # ilog2_fx(x) for x < 4096, by index


def _logs(values: Sequence[int]) -> list[int]:
    """ilog2_fx of each value."""
    small, n = _SMALL_LOGS, len(_SMALL_LOGS)
    return [small[v] if v < n else ilog2_fx(v) for v in values]


def model_features(dims: Sequence[int], table_dims: Sequence[int], tiles: Sequence[int]) -> list[int]:
    """The selection model's features of a problem for a kernel whose tiles over the table sizes are `tiles` (1
    for the library), each a fixed-point log2 (`ilog2_fx`, 16 fractional bits): 1 (the intercept), every size,
    every table size rounded up to MODEL_ALIGN, padded to the kernel's tile, and its tile count, 1 where the
    table size is a multiple of MODEL_ALIGN (else 0), 1 where it is even (else 0), and the sum of
    the pairwise products of the table sizes (the size itself for a kind with one table size; saturated at
    MODEL_SATURATE). Integers only, identical in the C++ header."""
    table = [dims[j] for j in table_dims]
    return _model_head(dims, table) + _model_tiled(table, tiles) + _model_tail(table)


def _model_head(dims: Sequence[int], table: Sequence[int]) -> list[int]:
    """The intercept, every size and every table size rounded up to MODEL_ALIGN (model_features)."""
    return [1 << FX_BITS, *_logs([*dims, *(-(-x // MODEL_ALIGN) * MODEL_ALIGN for x in table)])]


def _model_tiled(table: Sequence[int], tiles: Sequence[int]) -> list[int]:
    """Every table size padded to the kernel's tile, then its tile count (model_features)."""
    counts = [-(-x // t) for x, t in zip(table, tiles, strict=True)]
    return _logs([c * t for c, t in zip(counts, tiles, strict=True)] + counts)


def _model_tail(table: Sequence[int]) -> list[int]:
    """Whether each table size is a multiple of MODEL_ALIGN, whether it is even, and the pairs (model_features): the
    C++ header adds the pairwise products one by one, saturating at MODEL_SATURATE; each is below it, so that is
    the smaller of MODEL_SATURATE and their sum."""
    one = 1 << FX_BITS
    return [
        *[one if x % MODEL_ALIGN == 0 else 0 for x in table],
        *[one if x % 2 == 0 else 0 for x in table],
        _pairs(table),
    ]


def _pairs(table: Sequence[int]) -> int:
    """The last feature of model_features: ilog2_fx of the saturated sum of the table sizes' pairwise products."""
    s = sum(table)
    pairs = table[0] if len(table) == 1 else (s * s - sum(map(mul, table, table))) >> 1
    return ilog2_fx(pairs if 0 < pairs < MODEL_SATURATE else max(1, min(MODEL_SATURATE, pairs)))


def model_count(num_sizes: int, num_table_sizes: int) -> int:
    """How many features `model_features` gives."""
    return 2 + num_sizes + 5 * num_table_sizes


def model_time(coef: Sequence[int], features: Sequence[int]) -> int:
    """Predicted log2 time (32 fractional bits): the sum of coefficients (16 fractional bits) times features."""
    return sum(int(c) * int(x) for c, x in zip(coef, features, strict=True))


def model_margin(library_margin: float) -> int:
    """log2(1 + library_margin) in the units of `model_time` (what a kernel's price is raised by)."""
    return int(round(math.log2(1.0 + float(library_margin)) * (1 << (2 * FX_BITS))))


def cost_log_margin(library_margin: float) -> int:
    """log2(1 + library_margin) with 16 fractional bits: what a kernel's mean log cost is raised by in cost mode
    with neighbours (rule 4'; the C++ header takes this integer as written by emit)."""
    return int(round(math.log2(1.0 + float(library_margin)) * (1 << FX_BITS)))


class ModelLanes:
    """The selection models of one group's answers evaluated at once, exactly: `model_time` of answer i plus
    `raised[i]` (the table's model margin for a kernel, 0 for the library) is lane i (`width` bits, offset by `bias`)
    of one integer, the sum over the features of each feature times the integer whose lanes are the answers'
    coefficients of that feature (Python integers have no overflow; a lane holds any sum its coefficients can give,
    so lanes never spill into each other). Lanes run the library first, then the kernels by index: the lowest lane
    of the smallest value is the rules' winner. An answer not valid at a problem has its lane set to all ones.

    Every feature but the pairs' depends on one size: per table size (`near`: which of a problem's sizes), the sum
    of its terms is tabulated for every value up to `limits[size]` (`tabulated`), so a problem
    within them costs one index per table size, the other sizes' logs and the pairs."""

    def __init__(
        self,
        entries: list[tuple[int, tuple[int, ...], list[int]]],
        nsizes: int,
        near: Sequence[int],
        raised: list[int],
        checks: Sequence[Checks | None],
        limits: Sequence[int],
    ) -> None:
        ntab = len(near)
        head = 1 + nsizes + ntab  # model_features: head, then padded and count per table size, then the tail
        bound = max(sum(abs(int(c)) for c in coef) for _, _, coef in entries) << 23  # every feature < 2**23
        self.width = lane_width((bound + max(map(abs, raised))).bit_length() + 2)
        self.bias = 1 << (self.width - 1)
        self.full = (1 << self.width) - 1
        self.answers = [answer for answer, _, _ in entries]
        self.raised = raised
        lanes = [self.width * lane for lane in range(len(entries))]
        self.invalid = Invalid([(c, self.full << at) for c, at in zip(checks, lanes, strict=True)], limits)
        # per feature of model_features, the integer whose lanes are the answers' coefficients of it
        coef = [
            sum(int(c[f]) << at for (_, _, c), at in zip(entries, lanes, strict=True))
            for f in range(len(entries[0][2]))
        ]
        tail = head + 2 * ntab
        self.start = sum((self.bias + r) << at for r, at in zip(self.raised, lanes, strict=True)) + (coef[0] << FX_BITS)
        self.near = list(near)
        self.logged = [(d, coef[1 + d]) for d in range(nsizes) if d not in near and coef[1 + d]]  # the other sizes
        # per table size: its log's coefficients and its log rounded up's, its flags', and per tile the kernels' (the
        # padded size and the tile count; a feature the fit left out, constant where it was measured, weighs 0)
        self.per_size: list[tuple[int, list[int], tuple[int, int, int, int, list[tuple[int, int, int]]]]] = []
        for j, d in enumerate(near):
            tiled = []
            for tile in sorted({tiles[j] for _, tiles, _ in entries}):
                pad = cnt = 0
                for (_, tiles, c), at in zip(entries, lanes, strict=True):
                    if tiles[j] == tile:
                        pad += int(c[head + j]) << at
                        cnt += int(c[head + ntab + j]) << at
                if pad or cnt:
                    tiled.append((int(tile), pad, cnt))
            terms = (
                coef[1 + d],
                coef[1 + nsizes + j],
                coef[tail + j] << FX_BITS,
                coef[tail + ntab + j] << FX_BITS,
                tiled,
            )
            top = tabulated(limits[d], len(entries))
            self.per_size.append((d, [_size_term(x, terms) for x in range(top + 1)], terms))
        self.pairs = coef[tail + 2 * ntab]

    def lanes(self, dims: Sequence[int]) -> list[int]:
        """Every answer's raised model time plus `bias` at a problem, all ones where the answer is not valid:
        model_features' terms, the flags added where they are 1."""
        v = self.start + self.pairs * _pairs([dims[d] for d in self.near])
        for d, c in self.logged:
            v += c * ilog2_fx(dims[d])
        for d, table, terms in self.per_size:
            x = dims[d]
            v += table[x] if x < len(table) else _size_term(x, terms)
        return unpack(v | self.invalid.at(dims), len(self.answers), self.width)


def _size_term(x: int, terms: tuple[int, int, int, int, list[tuple[int, int, int]]]) -> int:
    """The lanes of the features of one table size at value x (`ModelLanes`): its log, its log rounded up to
    MODEL_ALIGN, its flags, and per tile the padded size's and tile count's logs."""
    own, rounded, aligned, even, tiled = terms
    v = own * ilog2_fx(x) + rounded * ilog2_fx(-(-x // MODEL_ALIGN) * MODEL_ALIGN) if x else 0
    if x % MODEL_ALIGN == 0:
        v += aligned
    if x % 2 == 0:
        v += even
    for tile, pad, cnt in tiled:
        count = -(-x // tile)
        v += pad * ilog2_fx(count * tile) + cnt * ilog2_fx(count) if count else 0
    return v
