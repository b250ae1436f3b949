"""The generated C++ header's cost mode (rule 4' of runtime.py): its spatial index, per group a grid over the table
sizes' logs and per cell its nearest tuned points, emitted as constant arrays (emit_cpp.emit_cpp calls emit_index),
and its code (`cpp_walk.COST`: `cheapest`, and `cheapest_walk` over the index)."""

from __future__ import annotations

from autotune.dispatch.cost import parse_steps, step_class
from autotune.dispatch.features import ilog2_fx
from autotune.dispatch.runtime import LIBRARY, MAX_SIZE
from autotune.dispatch.table import DispatchTable

INDEX_LIST = 48  # the index keeps, per cell, the INDEX_LIST tuned points nearest its centre
INDEX_CELLS = 13  # the finest grid with at most INDEX_CELLS cells per tuned point (tables6 fp16: 17^3 cells for 400
# points, where 12 gave 9^3 and 1.6% of random problems reached the end of their cell's list: C++ p99 1.5 -> 0.8 us)
INDEX_CLASS_LIST = 16  # and per library step class holding less than a third of the group's points (the walk meets
# the others' soon enough), the INDEX_CLASS_LIST points of that class nearest its centre (tables7 fp16, `m,k%2`: C++
# p99 at even M and K 1.47 -> 0.99 us, min of 5 passes on the development VM)
WALK_POINTS = 256  # cost mode with K = 1 and no library steps: groups of more points are walked over the index (the
# tables6 softmax table, 554 points: C++ p50 0.97 -> 0.13 us), the others priced from every point's distance (`cheapest`;
# tc_final, 127 points and 36 kernels measured at few of them: the walk's p99 1.10 us, `cheapest` 0.71)
INDEX_INF = 1 << 40  # a distance beyond every real one (logs are below 2^22 per size)
DE_BRUIJN = 0x03F79D71B4CB0A89  # lowest_bit: the lowest set bit times it, top 6 bits: a position in kDeBruijn


def _de_bruijn() -> list[int]:
    table = [0] * 64
    for i in range(64):
        table[((DE_BRUIJN << i) % (1 << 64)) >> 58] = i
    return table


class _Index:
    """emit_index's arrays, filled group by group (`_add_sets`, `_add_grid`)."""

    def __init__(self, points: int) -> None:
        self.point_sets: list[list[int]] = [[] for _ in range(points)]  # per point, its group's sets
        self.shift: list[int] = []  # per group (-1: no grid); lo, hi, stride: per group and table size
        self.lo: list[list[int]] = []
        self.hi: list[list[int]] = []
        self.stride: list[list[int]] = []
        self.cell_begin, self.list_begin, self.set_begin = [0], [0], [0]
        self.list_g: list[int] = []
        self.reach: list[int] = []
        self.masks: list[int] = []  # per cell, the sets that may compete there (bit k: the group's set k)
        self.set_size: list[int] = []
        self.answer_set: list[list[int]] = []
        self.set_points: list[list[int]] = []  # per set, its points' group positions
        self.position = 0  # the group position of the group's first point (kGroupPoints)
        self.classes = 1  # the most step classes the library was measured in, in a group (kMaxClasses)
        self.class_begin: list[int] = [0]  # per cell and class: its class list (kCellClassBegin, ...)
        self.class_g: list[int] = []
        self.class_reach: list[int] = []
        self.largest = 1  # the most points a group has


def emit_index(w, table: DispatchTable) -> None:
    """The spatial index of cheapest_walk (cost mode with kNeighbours >= 2 or library steps): per group, a grid of
    cells over the table sizes' logs (2^shift wide, over the group's tuned range) and per cell the INDEX_LIST tuned
    points nearest its centre, by distance from it (then group position); kCellReach: the distance of the
    first point left out (INDEX_INF where none is), kCellSets: the sets that may compete there. The group's answers
    in sets measured at the same points (kGroupSetBegin, kSetSize, kSetPoints; kPointSetBits: per point its sets as
    bits; kAnswerSet: per group and answer + 2 its set or -1), kCostLogAt: per point and answer + 2, the log2 cost
    (ilog2_fx) where measured, and the bits of cheapest_walk's keys (kKeyDistShift, kKeyTieShift)."""
    d = table.data
    nk, ntab = len(d["kernels"]), len(table.table_sizes)
    st = d.get("structure") or {}
    use = st.get("mode") == "cost"
    walk_all = int(st.get("neighbours", 1)) > 1 or bool(st.get("library_steps"))  # else only large groups (WALK_POINTS)
    points = d["points"]
    measured = [
        sorted({int(a) for a, _ in p.get("costs", []) if int(a) == LIBRARY or 0 <= int(a) < nk}) for p in points
    ]
    ix = _Index(len(points))
    span = round(float(st.get("reach", 1.0)) * 65536)
    steps = parse_steps([str(x) for x in st.get("library_steps", [])], list(table.size_names))
    classes = [step_class(steps, [int(p["sizes"][n]) for n in table.size_names]) for p in points]
    groups = [(p, s) for p in table.precisions for s in table.shapes]
    per_group = [[i for i, x in enumerate(points) if (x["precision"], x["shape"]) == g] for g in groups]
    by_class = [sorted({classes[i] for i in members if LIBRARY in measured[i]}) for members in per_group]
    ix.classes = max([1] + [len(c) for c in by_class]) if steps else 1
    for members, library_classes in zip(per_group, by_class, strict=True):
        ix.largest = max(ix.largest, len(members))
        local_sets = _add_sets(ix, members, measured, nk)
        if use and members and (walk_all or len(members) > WALK_POINTS):
            sizes = [[int(points[i]["sizes"][n]) for n in table.table_sizes] for i in members]
            at = [
                [k for k, i in enumerate(members) if classes[i] == c and LIBRARY in measured[i]]
                for c in library_classes
            ]
            at = [mine if 3 * len(mine) < len(members) else [] for mine in at]  # an empty list: the walk reads them
            _add_grid(ix, sizes, local_sets, span, at if steps else [])
        else:
            ix.shift.append(-1)
            for array in (ix.lo, ix.hi, ix.stride):
                array.append([0] * max(1, ntab))
            ix.cell_begin.append(ix.cell_begin[-1])
        ix.position += len(members)
    _write_index(w, table, ix, use)


def _add_sets(ix: _Index, members: list[int], measured: list[list[int]], nk: int) -> list[list[int]]:
    """A group's answers in sets measured at the same points; per set, its points' positions in the group."""
    local = {i: k for k, i in enumerate(members)}  # table order -> position in the group
    sets: dict[tuple[int, ...], list[int]] = {}
    for a in sorted({a for i in members for a in measured[i]}):
        sets.setdefault(tuple(i for i in members if a in measured[i]), []).append(a)
    row = [-1] * (nk + 2)
    for k, (at, answers) in enumerate(sets.items()):
        ix.set_size.append(len(at))
        ix.set_points.append([ix.position + local[i] for i in at])
        for a in answers:
            row[a + 2] = k
        for i in at:
            ix.point_sets[i].append(k)
    ix.answer_set.append(row)
    ix.set_begin.append(ix.set_begin[-1] + len(sets))
    return [[local[i] for i in at] for at in sets]


def _add_grid(
    ix: _Index, sizes: list[list[int]], local_sets: list[list[int]], span: int, class_points: list[list[int]]
) -> None:
    """A group's grid of cells over its points' table sizes (`sizes`, in group order) and per cell its list, reach
    and the sets (`local_sets`: each its points' group positions) that may compete there; per cell and library step
    class (`class_points`: each the group positions of its points where the library was measured, in kLibraryClass
    order) its INDEX_CLASS_LIST points nearest the centre and its reach."""
    import numpy as np

    ntab = len(sizes[0])
    logs = np.array([[ilog2_fx(x) for x in row] for row in sizes], np.int64).reshape(len(sizes), ntab)
    gmin, gmax = logs.min(0), logs.max(0)
    s = 20  # the finest cells (2^12 wide at the least) that leave no more cells than points
    while s > 12 and int(np.prod(((gmax - gmin) >> (s - 1)) + 1)) <= INDEX_CELLS * len(sizes):
        s -= 1
    count = ((gmax - gmin) >> s) + 1
    ix.shift.append(s)
    ix.lo.append([int(x) for x in gmin] or [0])
    ix.hi.append([int(x) for x in gmax] or [0])
    ix.stride.append([int(np.prod(count[j + 1 :])) for j in range(ntab)] or [0])
    order = np.arange(len(sizes))
    for cell in np.ndindex(*[int(c) for c in count]):
        centre = gmin + (np.array(cell, np.int64) << s) + ((1 << s) >> 1)
        pd = np.abs(logs - centre).sum(1) if ntab else np.zeros(len(sizes), np.int64)
        ranked = np.lexsort((order, pd))
        box_lo = gmin + (np.array(cell, np.int64) << s)
        box_hi = np.minimum(box_lo + (1 << s) - 1, gmax)
        near = np.maximum(0, np.maximum(box_lo - logs, logs - box_hi)).sum(1)  # nearest any problem of the cell
        far = np.maximum(np.abs(box_lo - logs), np.abs(box_hi - logs)).sum(1)  # farthest
        bound = int(far.min()) + span  # no set measured only beyond it competes
        mask = 0
        for k, local_at in enumerate(local_sets):
            if k >= 64 or int(near[local_at].min()) <= bound:
                mask |= 1 << min(k, 63)
        ix.masks.append(mask if len(local_sets) <= 64 else (1 << 64) - 1)
        keep = ranked[:INDEX_LIST]
        ix.list_g += [ix.position + int(i) for i in keep]
        ix.list_begin.append(len(ix.list_g))
        ix.reach.append(int(pd[ranked[INDEX_LIST]]) if len(ranked) > INDEX_LIST else INDEX_INF)
        for c in range(ix.classes if class_points else 0):
            mine = np.array(class_points[c] if c < len(class_points) else [], np.int64)
            ranked_c = mine[np.lexsort((mine, pd[mine]))] if len(mine) else mine
            ix.class_g += [ix.position + int(i) for i in ranked_c[:INDEX_CLASS_LIST]]
            ix.class_begin.append(len(ix.class_g))
            ix.class_reach.append(
                int(pd[ranked_c[INDEX_CLASS_LIST]]) if len(ranked_c) > INDEX_CLASS_LIST else INDEX_INF
            )
    ix.cell_begin.append(len(ix.reach))


def _write_index(w, table: DispatchTable, ix: _Index, use: bool) -> None:
    """emit_index's constant arrays, with the per-point sets as bits, the log costs and cheapest_walk's key bits."""
    points, nk, ntab = table.data["points"], len(table.data["kernels"]), len(table.table_sizes)
    groups, nt = len(table.precisions) * len(table.shapes), max(1, ntab)
    set_begin, set_size, set_points, list_begin = ix.set_begin, ix.set_size, ix.set_points, ix.list_begin
    words = max(1, -(-max([b - a for a, b in zip(set_begin, set_begin[1:], strict=False)] + [1]) // 64))
    bits = [[sum(1 << k % 64 for k in row if k // 64 == w) for w in range(words)] for row in ix.point_sets]
    bits = bits or [[0] * words]
    costs = [[0] * (nk + 2) for _ in points] or [[0] * (nk + 2)]
    for i, p in enumerate(points):
        for a, c in p.get("costs", []):
            if int(a) == LIBRARY or 0 <= int(a) < nk:
                costs[i][int(a) + 2] = ilog2_fx(max(1, int(c)))
    # cheapest_walk's keys in 64 bits: the distance (the problem's logs clamped to the group's range) << dist_shift |
    # the tie distance (at most the log of MAX_SIZE per tie size) << tie_shift | the group order
    tie_shift = max(1, (ix.largest - 1).bit_length())
    dist_shift = tie_shift + ((len(table.size_names) - ntab) * ilog2_fx(MAX_SIZE)).bit_length()
    if use and dist_shift + max(sum(h) - sum(low) for low, h in zip(ix.lo, ix.hi, strict=True)).bit_length() > 64:
        raise ValueError("the C++ header's cost walk keys a point in 64 bits: too many sizes or tuned points per group")
    rows = lambda m: "{" + ", ".join("{" + ", ".join(map(str, r)) + "}" for r in m) + "}"  # noqa: E731
    w(
        f"inline constexpr int kIdxShift[{groups}] = {{{', '.join(map(str, ix.shift))}}};  // per group (-1: none)\n"
        f"inline constexpr long long kIdxLo[{groups}][{nt}] = {rows(ix.lo)};  // per group, its tuned logs' range\n"
        f"inline constexpr long long kIdxHi[{groups}][{nt}] = {rows(ix.hi)};\n"
        f"inline constexpr int kIdxStride[{groups}][{nt}] = {rows(ix.stride)};  // cell index = sum of i_j * stride\n"
        f"inline constexpr int kIdxCellBegin[{len(ix.cell_begin)}] = {{{', '.join(map(str, ix.cell_begin))}}};\n"
        f"inline constexpr int kCellListBegin[{len(list_begin)}] = {{{', '.join(map(str, list_begin))}}};\n"
        f"inline constexpr long long kCellReach[{max(1, len(ix.reach))}] = {{{', '.join(map(str, ix.reach)) or '0'}}};"
        f"  // per cell, the distance from its centre of the first point its list leaves out (kIdxAll: none)\n"
        f"inline constexpr long long kIdxAll = {INDEX_INF};\n"
        f"inline constexpr int kListN = {max(b - a for a, b in [(0, 1), *zip(list_begin, list_begin[1:], strict=False)])};"
        "  // the longest list\n"
        f"inline constexpr int kKeyTieShift = {tie_shift}, kKeyDistShift = {dist_shift};  // cheapest_walk's keys\n"
        f"inline constexpr unsigned long long kCellSets[{max(1, len(ix.masks))}] = "
        f"{{{', '.join(f'{m}ULL' for m in ix.masks) or '0ULL'}}};  // per cell, the sets that may compete there\n"
        f"inline constexpr {'unsigned short' if ix.position < 1 << 16 else 'int'} kCellG[{max(1, len(ix.list_g))}] = "
        f"{{{','.join(map(str, ix.list_g)) or '0'}}};  // per cell, its list: group positions g\n"
        f"inline constexpr int kGroupSetBegin[{len(set_begin)}] = {{{', '.join(map(str, set_begin))}}};\n"
        f"inline constexpr int kMaxSets = {max([b - a for a, b in zip(set_begin, set_begin[1:], strict=False)] + [1])};\n"
        f"inline constexpr int kSetPointBegin[{len(set_size) + 1}] = "
        f"{{{', '.join(str(sum(map(len, set_points[:i]))) for i in range(len(set_size) + 1))}}};\n"
        f"inline constexpr int kSetPoints[{max(1, sum(map(len, set_points)))}] = "
        f"{{{', '.join(str(x) for r in set_points for x in r) or '0'}}};  // per set, its points' group positions\n"
        f"inline constexpr int kSetSize[{max(1, len(set_size))}] = {{{', '.join(map(str, set_size)) or '0'}}};\n"
        f"inline constexpr int kSetWords = {words};  // 64 sets a word\n"
        f"inline constexpr unsigned long long kPointSetBits[{len(bits)}][{words}] = {rows([[f'{x}ULL' for x in r] for r in bits])};"
        "  // per point, its sets (bit k of word k / 64: the group's set k)\n"
        f"inline constexpr unsigned long long kDeBruijnMul = {DE_BRUIJN}ULL;  // lowest_bit\n"
        f"inline constexpr int kDeBruijn[64] = {{{', '.join(map(str, _de_bruijn()))}}};\n"
        f"inline constexpr int kAnswerSet[{groups}][{nk + 2}] = {rows(ix.answer_set)};\n"
        f"inline constexpr int kCostLogAt[{len(costs)}][{nk + 2}] = {rows(costs)};\n"
        f"inline constexpr int kMaxClasses = {ix.classes};  // per cell, a list per library step class (cell * kMaxClasses + i)\n"
        f"inline constexpr int kCellClassBegin[{len(ix.class_begin)}] = {{{', '.join(map(str, ix.class_begin))}}};\n"
        f"inline constexpr {'unsigned short' if ix.position < 1 << 16 else 'int'} kCellClassG[{max(1, len(ix.class_g))}] = "
        f"{{{','.join(map(str, ix.class_g)) or '0'}}};  // per cell and class, its list: group positions g\n"
        f"inline constexpr long long kCellClassReach[{max(1, len(ix.class_reach))}] = "
        f"{{{', '.join(map(str, ix.class_reach)) or '0'}}};\n\n"
    )
