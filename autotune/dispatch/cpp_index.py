"""The spatial index of the generated C++ header's cost lookup (cheapest_walk): per group a grid over the table
sizes' logs and per cell its nearest tuned points, emitted as constant arrays (emit_cpp.emit_cpp calls emit_index)."""

from __future__ import annotations

from autotune.dispatch.features import ilog2_fx
from autotune.dispatch.runtime import LIBRARY, MAX_SIZE
from autotune.dispatch.table import DispatchTable

INDEX_LIST = 48  # the index keeps, per cell, the INDEX_LIST tuned points nearest its centre
INDEX_CELLS = 12  # the finest grid with at most INDEX_CELLS cells per tuned point
INDEX_INF = 1 << 40  # a distance beyond every real one (logs are below 2^22 per size)
DE_BRUIJN = 0x03F79D71B4CB0A89  # lowest_bit: the lowest set bit times it, top 6 bits: a position in kDeBruijn


def _de_bruijn() -> list[int]:
    table = [0] * 64
    for i in range(64):
        table[((DE_BRUIJN << i) % (1 << 64)) >> 58] = i
    return table


def emit_index(w, table: DispatchTable) -> None:
    """The spatial index of cheapest_walk (cost mode with kNeighbours >= 2 or library steps): per group, a grid of
    cells over the table sizes' logs (2^shift wide, over the group's tuned range) and per cell the INDEX_LIST tuned
    points nearest its centre, by distance from it (then group position); kCellReach: the distance of the
    first point left out (INDEX_INF where none is), kCellSets: the sets that may compete there. The group's answers
    in sets measured at the same points (kGroupSetBegin, kSetSize, kSetPoints; kPointSetBits: per point its sets as
    bits; kAnswerSet: per group and answer + 2 its set or -1), kCostLogAt: per point and answer + 2, the log2 cost
    (ilog2_fx) where measured, and the bits of cheapest_walk's keys (kKeyDistShift, kKeyTieShift)."""
    import numpy as np

    d = table.data
    table_sizes = list(table.table_sizes)
    nk, ntab = len(d["kernels"]), len(table_sizes)
    st = d.get("structure") or {}
    use = st.get("mode") == "cost" and (int(st.get("neighbours", 1)) > 1 or bool(st.get("library_steps")))
    groups = [(p, s) for p in table.precisions for s in table.shapes]
    points = d["points"]
    measured = [
        sorted({int(a) for a, _ in p.get("costs", []) if int(a) == LIBRARY or 0 <= int(a) < nk}) for p in points
    ]
    shift, lo, hi, stride, cell_begin = [], [], [], [], [0]
    list_g: list[int] = []
    list_begin = [0]
    reach: list[int] = []
    masks: list[int] = []  # per cell, the sets that may compete there (bit k: the group's set k)
    span = round(float(st.get("reach", 1.0)) * 65536)
    set_begin, set_size, answer_set = [0], [], []
    point_sets: list[list[int]] = [[] for _ in points]  # per point, its group's sets
    set_points: list[list[int]] = []  # per set, its points' group positions
    position = 0  # the group position of the group's first point (kGroupPoints)
    largest = 1  # the most points a group has
    for g in groups:
        members = [i for i, x in enumerate(points) if (x["precision"], x["shape"]) == g]
        local = {i: k for k, i in enumerate(members)}  # table order -> position in the group
        largest = max(largest, len(members))
        sets: dict[tuple[int, ...], list[int]] = {}  # the answers measured at the same points
        for a in sorted({a for i in members for a in measured[i]}):
            sets.setdefault(tuple(i for i in members if a in measured[i]), []).append(a)
        row = [-1] * (nk + 2)
        for k, (at, answers) in enumerate(sets.items()):
            set_size.append(len(at))
            set_points.append([position + local[i] for i in at])
            for a in answers:
                row[a + 2] = k
            for i in at:
                point_sets[i].append(k)
        answer_set.append(row)
        set_begin.append(set_begin[-1] + len(sets))
        if not use or not members:
            shift.append(-1)
            lo.append([0] * max(1, ntab))
            hi.append([0] * max(1, ntab))
            stride.append([0] * max(1, ntab))
            cell_begin.append(cell_begin[-1])
            position += len(members)
            continue
        logs = np.array([[ilog2_fx(int(points[i]["sizes"][n])) for n in table_sizes] for i in members], np.int64)
        logs = logs.reshape(len(members), ntab)
        gmin, gmax = logs.min(0), logs.max(0)
        s = 20  # the finest cells (2^12 wide at the least) that leave no more cells than points
        while s > 12 and int(np.prod(((gmax - gmin) >> (s - 1)) + 1)) <= INDEX_CELLS * len(members):
            s -= 1
        count = ((gmax - gmin) >> s) + 1
        steps = [int(np.prod(count[j + 1 :])) for j in range(ntab)]
        shift.append(s)
        lo.append([int(x) for x in gmin] or [0])
        hi.append([int(x) for x in gmax] or [0])
        stride.append(steps or [0])
        order = np.arange(len(members))
        local_sets = [np.array([local[i] for i in at]) for at in sets]
        for cell in np.ndindex(*[int(c) for c in count]):
            centre = gmin + (np.array(cell, np.int64) << s) + ((1 << s) >> 1)
            pd = np.abs(logs - centre).sum(1) if ntab else np.zeros(len(members), np.int64)
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
            masks.append(mask if len(sets) <= 64 else (1 << 64) - 1)
            keep = ranked[:INDEX_LIST]
            list_g += [position + int(i) for i in keep]
            list_begin.append(len(list_g))
            reach.append(int(pd[ranked[INDEX_LIST]]) if len(ranked) > INDEX_LIST else INDEX_INF)
        cell_begin.append(len(reach))
        position += len(members)
    words = max(1, -(-max([b - a for a, b in zip(set_begin, set_begin[1:], strict=False)] + [1]) // 64))
    bits = [[sum(1 << k % 64 for k in row if k // 64 == w) for w in range(words)] for row in point_sets]
    bits = bits or [[0] * words]
    costs = [[0] * (nk + 2) for _ in points] or [[0] * (nk + 2)]
    for i, p in enumerate(points):
        for a, c in p.get("costs", []):
            if int(a) == LIBRARY or 0 <= int(a) < nk:
                costs[i][int(a) + 2] = ilog2_fx(max(1, int(c)))
    nt = max(1, ntab)
    # cheapest_walk's keys in 64 bits: the distance (the problem's logs clamped to the group's range) << dist_shift |
    # the tie distance (at most the log of MAX_SIZE per tie size) << tie_shift | the group order
    tie_shift = max(1, (largest - 1).bit_length())
    dist_shift = tie_shift + ((len(table.size_names) - ntab) * ilog2_fx(MAX_SIZE)).bit_length()
    if use and dist_shift + max(sum(h) - sum(low) for low, h in zip(lo, hi, strict=True)).bit_length() > 64:
        raise ValueError("the C++ header's cost walk keys a point in 64 bits: too many sizes or tuned points per group")
    rows = lambda m: "{" + ", ".join("{" + ", ".join(map(str, r)) + "}" for r in m) + "}"  # noqa: E731
    w(
        f"inline constexpr int kIdxShift[{len(groups)}] = {{{', '.join(map(str, shift))}}};  // per group (-1: none)\n"
        f"inline constexpr long long kIdxLo[{len(groups)}][{nt}] = {rows(lo)};  // per group, its tuned logs' range\n"
        f"inline constexpr long long kIdxHi[{len(groups)}][{nt}] = {rows(hi)};\n"
        f"inline constexpr int kIdxStride[{len(groups)}][{nt}] = {rows(stride)};  // cell index = sum of i_j * stride\n"
        f"inline constexpr int kIdxCellBegin[{len(cell_begin)}] = {{{', '.join(map(str, cell_begin))}}};\n"
        f"inline constexpr int kCellListBegin[{len(list_begin)}] = {{{', '.join(map(str, list_begin))}}};\n"
        f"inline constexpr long long kCellReach[{max(1, len(reach))}] = {{{', '.join(map(str, reach)) or '0'}}};"
        f"  // per cell, the distance from its centre of the first point its list leaves out (kIdxAll: none)\n"
        f"inline constexpr long long kIdxAll = {INDEX_INF};\n"
        f"inline constexpr int kListN = {max(b - a for a, b in [(0, 1), *zip(list_begin, list_begin[1:], strict=False)])};"
        "  // the longest list\n"
        f"inline constexpr int kKeyTieShift = {tie_shift}, kKeyDistShift = {dist_shift};  // cheapest_walk's keys\n"
        f"inline constexpr unsigned long long kCellSets[{max(1, len(masks))}] = "
        f"{{{', '.join(f'{m}ULL' for m in masks) or '0ULL'}}};  // per cell, the sets that may compete there\n"
        f"inline constexpr {'unsigned short' if position < 1 << 16 else 'int'} kCellG[{max(1, len(list_g))}] = "
        f"{{{','.join(map(str, list_g)) or '0'}}};  // per cell, its list: group positions g\n"
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
        f"inline constexpr int kAnswerSet[{len(groups)}][{nk + 2}] = {rows(answer_set)};\n"
        f"inline constexpr int kCostLogAt[{len(costs)}][{nk + 2}] = {rows(costs)};\n\n"
    )
