"""Cost mode's lookup (rule 4' of runtime.py), integers only: the tuned points walked in the rules' order
(`lanes.Keys.bands`), each answer priced by its cost at the nearest point where it was measured (`_cheapest`) or by
the mean log cost of its K nearest measurements, with the library's counted in the problem's step class where the
structure has `library_steps` (`_cheapest_mean`, in the lanes of `Means`). `runtime.Lookup` takes these methods
from `CostRules`; the answers' names (LIBRARY, ...) are defined here and imported by runtime.py.

Standard library only: every generated Python module carries a copy of this code before runtime.py's (emit.py).
"""

from __future__ import annotations

import sys
from array import array
from itertools import islice
from typing import Callable, Iterable, Sequence

from autotune.dispatch.features import ModelLanes
from autotune.dispatch.lanes import Boxes, Invalid, Keys

GENERIC, LIBRARY, INVALID, NONE = -1, -2, -3, -4


def parse_steps(steps: Sequence[str], names: Sequence[str]) -> list[tuple[str, list[int], int]]:
    """A structure's `library_steps` as (operator, size positions, value): "m,k%2" holds where every listed size is
    a multiple of 2; "cols<=2048" and "rows<16000" compare one size. ValueError for anything else."""
    out = []
    for text in steps:
        step = str(text).replace(" ", "")
        op = "%" if "%" in step else "<=" if "<=" in step else "<" if "<" in step else None
        left, _, right = step.partition(op) if op else ("", "", "")
        sizes = left.split(",") if op == "%" else [left]
        if op is None or not right.isdigit() or int(right) < 1 or not all(n in names for n in sizes):
            raise ValueError(
                f"unknown library step {text!r}: use SIZE[,SIZE...]%N, SIZE<=N or SIZE<N with sizes of "
                f"{', '.join(names)} and N >= 1"
            )
        out.append((op, [list(names).index(n) for n in sizes], int(right)))
    return out


def step_class(steps: Sequence[tuple[str, list[int], int]], dims: Sequence[int]) -> int:
    """The step class of a problem: bit i set where predicate i of `parse_steps` holds."""
    out = 0
    for i, (op, where, value) in enumerate(steps):
        if op == "%":
            holds = all(dims[d] % value == 0 for d in where)
        elif op == "<=":
            holds = dims[where[0]] <= value
        else:
            holds = dims[where[0]] < value
        out |= int(holds) << i
    return out


def step_failures(steps: Sequence[tuple[str, list[int], int]], limits: Sequence[int]) -> Invalid:
    """The steps that fail at a problem, as bits (`Invalid.at`; the step class is every step's bit but those): a
    step is a bound or a multiple of its sizes, tabulated per size up to `limits` like the kernels' predicates."""
    bounds = {"%": lambda d, v: (d, v, 1, 1 << 62), "<=": lambda d, v: (d, 1, 1, v), "<": lambda d, v: (d, 1, 1, v - 1)}
    return Invalid([(tuple(bounds[op](d, v) for d in where), 1 << i) for i, (op, where, v) in enumerate(steps)], limits)


class Group:
    """One (precision, shape) of a table, prepared: its tuned points' answers (rule 2), regions (rule 3), points'
    keys and near lists (rule 4), priced measurements (rule 4') and packed models (rule 4'')."""

    def __init__(self) -> None:
        self.exact: dict[tuple[int, ...], int] = {}
        self.near: list[list[int]] = []
        self.near_bits: list[int] = []  # per point: its near list's kernels as bits, -1 where it holds the library
        self.sizes: list[tuple[int, ...]] = []  # per point: its sizes
        self.costs: list[list[tuple[int, int, int]]] = []  # per point: (cost * price, code, bit), cheapest first
        self.priced: list[
            list[tuple[int, int]]
        ] = []  # the same as (cost * price, distance 0, code) in one integer, bit
        self.measured: list[int] = []  # per point: the bits of the answers it priced
        self.log_costs: list[list[tuple[int, int]]] = []  # per point: [(answer, ilog2_fx(cost))]
        self.boxes: list[tuple[list[int], list[int], int]] = []
        self.regions: Boxes | None = None
        self.keys: Keys | None = None  # the points in the rules' order: distance, tie sizes' distance, table order
        self.model: ModelLanes | None = None
        self.classes: list[int] = []  # per point: its step class (library_steps)
        self.library_classes: set[int] = set()  # the step classes where the library was measured
        self.union = 0  # the bits of every answer priced at some point
        self.everywhere = 0  # the lanes of the answers priced at every point (`_prepare_means`); the others'
        self.somewhere = 0
        self.lanes: list[int] = []  # per point: the lanes of the answers it priced
        # rule 4' with K neighbours or steps (`_cheapest_mean`), per step class (-1: every class): per point, the bits
        # of the answers whose measurement there counts; the sums and counts of log costs to start from (of every
        # measurement, for the answers measured K times or fewer: their mean is the same everywhere); the others
        self.counted: dict[int, list[int]] = {}
        self.start: dict[int, int] = {}
        self.dense: dict[int, int] = {}


MEAN_LANE = 64  # bits per answer in `_cheapest_mean`'s lanes: a count in the top 16 bits, a sum of log costs below
_LANE, _COUNT = (1 << MEAN_LANE) - 1, MEAN_LANE - 16


class Means:
    """The lanes of `_cheapest_mean` (MEAN_LANE bits per answer, lane j: kernel j, lane `kernels`: the library):
    the counts' bias (a lane's top bit is set once it counted K) and top bits, the sums' bits, the kernels' margin and
    ranks, and the answer of the smallest price."""

    def __init__(self, kernels: int, k: int, log_margin: int) -> None:
        self.lanes, self.k, w = kernels + 1, k, MEAN_LANE
        self.rank_bits = self.lanes.bit_length()  # rank 0: the library, kernel j: j + 1
        self.top = sum(1 << w * j + w - 1 for j in range(self.lanes))
        self.bias = sum(((1 << w - 1 - _COUNT) - k) << w * j + _COUNT for j in range(self.lanes))
        self.sums = sum(((1 << _COUNT) - 1) << w * j for j in range(self.lanes))
        self.all = sum(_LANE << w * j for j in range(self.lanes))
        self.margin = sum(log_margin << w * j for j in range(kernels))
        self.ranks = sum(j + 1 << w * j for j in range(kernels))
        self.shift = k.bit_length() - 1 if k & (k - 1) == 0 else -1  # the mean of K: a shift where K is 2**shift
        self.low = sum((_LANE >> max(0, self.shift)) << w * j for j in range(self.lanes))
        self.valid: dict[int, int] = {}  # invalid kernels as bits -> the valid answers' lanes (`valid_lanes`)
        self.ones = sum(1 << w * j for j in range(self.lanes))  # each lane's lowest bit
        self.spread = [sum(1 << w * j for j in range(8) if b >> j & 1) for b in range(256)]  # a byte's bits in lanes

    def valid_lanes(self, bad: int) -> int:
        """The lanes of the answers whose bits are not in `bad` (kernel j: bit j), each lane all ones: the bits
        spread eight at a time into the lanes' lowest bits, then filled."""
        spread, at = 0, 0
        while bad:
            spread |= self.spread[bad & 255] << at
            bad >>= 8
            at += 8 * MEAN_LANE
        return (self.ones & ~spread) * _LANE

    def cheapest(self, sums: int, start: int, ok: int) -> int:
        """The answer of the smallest price among the lanes `ok` (ties: the library, then the smaller index): the
        mean of K log costs (`sums`) or the one in `start`, kernels' raised by the margin."""
        if self.shift >= 0:
            price = ((sums >> self.shift) & self.low) + start + self.margin
        else:
            raw = array("Q", sums.to_bytes(8 * self.lanes, "little"))
            if sys.byteorder == "big":
                raw.byteswap()
            price = sum(v // self.k << MEAN_LANE * j for j, v in enumerate(raw)) + start + self.margin
        value = array(
            "Q", ((price << self.rank_bits | self.ranks) | (self.all ^ ok)).to_bytes(8 * self.lanes, "little")
        )
        if sys.byteorder == "big":
            value.byteswap()
        rank = min(value) & ((1 << self.rank_bits) - 1)
        return rank - 1 if rank else LIBRARY


class CostRules:
    """Rule 4' for `runtime.Lookup` (which sets the attributes below)."""

    kernels: list[dict]
    reach: int
    neighbours: int
    steps: list[tuple[str, list[int], int]]
    fallback: int
    _code_bits: int
    _invalid: Invalid
    _step_fails: Invalid
    _mean: Means
    _rule4: Callable[[Group, tuple[int, ...]], int]

    def _prepare_means(self, g: Group) -> None:
        """What `_cheapest_mean` reads, in lanes of MEAN_LANE bits (lane j: the answer of bit j, the library's
        above the kernels'): the answers priced at every point (`everywhere`), the others (`somewhere`), per point
        those it priced (`lanes`);
        per step class, per point the answers counted there and their log costs (`counted`), the means of the
        answers priced K times or fewer (`start`: all of them count) and the others (`dense`)."""
        lib, w = len(self.kernels), MEAN_LANE  # the library's bit position
        big = len(g.measured) >= 1 << (MEAN_LANE - 1 - _COUNT)  # `_cheapest_mean` adds every point's counts to a lane
        if big and self._rule4 == self._cheapest_mean:
            raise ValueError(f"cost mode keeps fewer than {1 << (MEAN_LANE - 1 - _COUNT)} tuned points per group")
        g.union = 0
        for m in g.measured:
            g.union |= m
        everywhere = g.union
        for m in g.measured:
            everywhere &= m
        g.everywhere = sum(_LANE << w * j for j in range(lib + 1) if everywhere >> j & 1)
        g.somewhere = sum(_LANE << w * j for j in range(lib + 1) if (g.union & ~everywhere) >> j & 1)
        g.lanes = [sum(_LANE << w * j for j in range(lib + 1) if m >> j & 1) for m in g.measured]
        logs = [{(lib if a == LIBRARY else a): lc for a, lc in p} for p in g.log_costs]
        for at in [-1, *sorted(g.library_classes)] if self.steps else [-1]:
            counted = [m if at < 0 or c == at else m & ~(1 << lib) for m, c in zip(g.measured, g.classes, strict=True)]
            sums, counts = [0] * (lib + 1), [0] * (lib + 1)
            for bits, point in zip(counted, logs, strict=True):
                for j, lc in point.items():
                    if bits >> j & 1:
                        sums[j] += lc
                        counts[j] += 1
            dense = {j for j in range(lib + 1) if counts[j] > self.neighbours}
            lanes = g.dense[at] = sum(_LANE << w * j for j in dense)
            g.start[at] = sum(sums[j] // counts[j] << w * j for j in range(lib + 1) if counts[j] and j not in dense)
            g.counted[at] = [
                sum((1 << _COUNT | lc) << w * j for j, lc in point.items() if bits >> j & 1) & lanes
                for bits, point in zip(counted, logs, strict=True)
            ]

    def _calibrate(self, g: Group) -> None:
        """The first band of a walk (`Keys.bands`): as wide as walks read at problems between two tuned points."""
        spans = []
        for a, b in zip(g.sizes[::7], g.sizes[3::7], strict=False):
            self._rule4(g, tuple(int((x * y) ** 0.5) for x, y in zip(a, b, strict=True)))
            spans.append(g.keys.span if g.keys is not None else 0)
        if g.keys is not None and spans:
            g.keys.spread = sorted(spans)[3 * len(spans) // 4]

    def _cheapest(self, g: Group, dims: tuple[int, ...]) -> int:
        """Cost mode (rule 4'): each valid answer's cost at the tuned point nearest the problem where it was
        measured (distance, then the tie sizes' distance, then table order); answers measured within `reach` of
        the nearest tuned point compete; the cheapest wins (kernel costs times 1 + margin against the library's;
        ties: the nearer measurement, then the library, then the smaller index). The points are walked nearest
        first (`Keys.bands`), each giving its cheapest answer not measured nearer (`blocked`) nor invalid,
        until the reach or until every answer measured anywhere is blocked."""
        if g.keys is None:
            return self.fallback
        shift, mask = g.keys.shift, g.keys.order_mask
        blocked, best, code, every, priced = self._invalid.at(dims), None, self._code_bits, g.measured, g.priced
        union, limit = g.union | blocked, -1
        for band in g.keys.bands(dims, True):
            for key in band:
                if limit < 0:
                    limit = ((key >> shift) + self.reach + 1) << shift  # keys below: within reach of the nearest
                elif key >= limit:
                    break
                measured = every[key & mask]  # per point, the cheapest answer neither invalid nor measured nearer
                if blocked & measured != measured:
                    for price, bit in priced[key & mask]:
                        if not blocked & bit:
                            price |= key >> shift << code  # (price, distance, code) in one integer
                            best = price if best is None or price < best else best
                            break
                    blocked |= measured
                    if blocked == union:
                        break
            else:
                continue
            break
        if best is None:
            return self.fallback
        return best % (1 << code) - 1 if best % (1 << code) else LIBRARY

    def _cheapest_mean(self, g: Group, dims: tuple[int, ...]) -> int:
        """Cost mode with neighbours K >= 2 (rule 4'): the answers measured within `reach` of the nearest tuned
        point compete, each priced by the mean log2 cost of its K nearest measurements; kernels' raised by
        `log_margin`; the cheapest wins (ties: the library, then the smaller index). With `library_steps`, the
        library's measurements count only at points of the problem's step class (where the group has one).

        The points are walked in the rules' order (`Keys.bands`), every answer at once in the lanes of one integer
        (`_prepare_means`): one measured at every point competes, another from its first measurement if that is
        within reach of the first point (`undecided` until then, or until the walk is past the reach); an answer
        measured K times or fewer in the group is priced from all of them (`Group.start`), the others from their
        first K (`need` until then, counted at points of the problem's class for the library)."""
        if g.keys is None:
            return self.fallback
        mask, shift, m = g.keys.order_mask, g.keys.shift, self._mean
        bad = self._invalid.at(dims)
        valid = m.valid.get(bad)
        if valid is None:  # the lanes of the valid answers, per distinct set of invalid kernels
            valid = m.valid[bad] = m.valid_lanes(bad)
        at = (1 << len(self.steps)) - 1 ^ self._step_fails.at(dims) if self.steps else -1  # step_class
        at = at if at in g.dense else -1
        ok, undecided = g.everywhere & valid, g.somewhere & valid
        need, counted, lanes, top = g.dense[at] & (ok | undecided), g.counted[at], g.lanes, m.top
        # every point's counts and log costs are added to `total` (below 2**15 points, no lane overflows into the
        # next: `_prepare_means`), and each lane of `need` is taken into `first` when its count reaches K (the sum of
        # its first K): two operations per point, not a mask of each point's lanes by `need` first
        total, first, limit, watch = m.bias & g.dense[at], 0, -1, top & need
        # where the tie sizes are settled apart (`Keys.ties`), the keys come sorted by distance and table order, and a
        # run of equally near points is put in the rules' order (`Keys.tie`) only where a lane counts its K-th at
        # one of them but the last (only there can their order change a sum): the run's keys walked so far are taken
        # out of `total` (no lane counted its K-th before in the run, and the other lanes' updates are unions, the
        # same in any order) and the walk goes on from the run's first key, in the rules' order
        check = g.keys.ties is not None
        bands: Iterable[list[int]] = ()
        if need or undecided:  # where the group has cells, its problem's cell's keys first, a few at a time
            bands = g.keys.nearest(dims) if g.keys.cells else g.keys.bands(dims, True, not check)
        for band in bands:
            at_run, settled = 0, 0  # the walk goes on from band[at_run]; band[:settled] is in the rules' order
            while True:
                run = None
                for key in islice(band, at_run, None) if at_run else band:
                    if undecided:
                        if limit < 0:
                            limit = (key >> shift) + self.reach
                        if key >> shift > limit:  # past the reach: an answer not measured yet does not compete
                            need &= ~undecided
                            watch &= need
                            undecided = 0
                        else:  # measured here first, within reach: it competes
                            ok |= lanes[key & mask] & undecided
                            undecided &= ~lanes[key & mask]
                    total += counted[key & mask]
                    if total & watch:  # lanes counted K: their sums are those of their first K
                        run = check and _tied_run(band, key, shift, settled)
                        if run:
                            break
                        done = ((total & watch) >> (MEAN_LANE - 1)) * _LANE
                        first |= total & done
                        need ^= done
                        watch &= need
                    if not need and not undecided:
                        break
                if not run:
                    break
                at_run, here, settled = run
                for k in band[at_run : here + 1]:
                    total -= counted[k & mask]
                band[at_run:settled] = sorted(band[at_run:settled], key=g.keys.tie(dims))
            if not need and not undecided:
                break
        return m.cheapest(first & m.sums, g.start[at], ok)


def _tied_run(band: list[int], key: int, shift: int, settled: int) -> tuple[int, int, int] | None:
    """Where the key after `key` in its band is as near (`key >> shift`: the distance) and past `settled`: the run of
    equally near keys around it (first, `key`'s position, end); else None."""
    here = band.index(key)
    far = key >> shift
    if here < settled or here + 1 == len(band) or band[here + 1] >> shift != far:
        return None
    first, end = here, here + 2
    while first and band[first - 1] >> shift == far:
        first -= 1
    while end < len(band) and band[end] >> shift == far:
        end += 1
    return first, here, end
