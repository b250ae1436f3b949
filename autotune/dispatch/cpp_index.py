"""The generated C++ header's cost mode (rule 4' of runtime.py): its spatial index, per group a grid over the table
sizes' logs and per cell its nearest tuned points, emitted as constant arrays (emit_cpp.emit_cpp calls emit_index),
and its code (COST: `cheapest`, and `cheapest_walk` over the index; emit_cpp writes it between cpp_text.LOOKUP and
cpp_text.LOOKUP_END)."""

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
        self.class_begin, self.class_g, self.class_reach = [0], [], []  # per cell and class: its class list
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


COST = """\
constexpr int lowest_bit(unsigned long long x) { return kDeBruijn[((x & (~x + 1)) * kDeBruijnMul) >> 58]; }  // x != 0
// Cost mode: each valid answer priced at the tuned point nearest the problem where it was measured; answers
// measured within kReach of the nearest tuned point compete; the cheapest wins (ties: nearer, library, index).
// Answers measured at the same points form a set (kAnswerSet) and share that point: per set, the first of its points
// at the smallest distance (one pass), or where several are at it, the one of the smallest tie distance among them.
constexpr int cheapest(int group, const long long (&d)[kNumSizes], const long long (&lt)[kTableN]) {
  const int begin = kGroupPointBegin[group], end = kGroupPointBegin[group + 1];
  if (begin == end) return kFallback;
  int dists[kPointsN + kLanes] = {};
  const int dmin = group_distances(begin, end, lt, dists), sb = kGroupSetBegin[group];
  long long lb[kTieN] = {};
  tie_logs(d, lb);
  int near[kMaxSets] = {}, nd[kMaxSets] = {};  // per set: its nearest point (group position), its distance
  for (int s = 0; s < kGroupSetBegin[group + 1] - sb; ++s) {
    const int first = kSetPointBegin[sb + s], last = kSetPointBegin[sb + s + 1];
    int dist = dists[kSetPoints[first] - begin], at = kSetPoints[first];
    bool tied = false;  // another point at that distance: the tie sizes decide
    for (int i = first + 1; i < last; ++i) {
      const int v = dists[kSetPoints[i] - begin];
      tied = v == dist || (tied && v > dist);
      at = v < dist ? kSetPoints[i] : at;
      dist = v < dist ? v : dist;
    }
    long long best_b = tied ? tie_at(at, lb) : 0;
    for (int i = first; i < last && tied && kNumTieSizes > 0; ++i) {
      if (dists[kSetPoints[i] - begin] != dist || kSetPoints[i] == at) continue;
      const long long db = tie_at(kSetPoints[i], lb);
      if (db < best_b) { at = kSetPoints[i]; best_b = db; }  // equal: the first in table order stays
    }
    near[s] = at;
    nd[s] = dist;
  }
  int best = INVALID;
  long long best_price = 0, best_dist = 0;
  for (int a = LIBRARY; a < kNumKernels; ++a) {
    const int s = a == GENERIC ? -1 : kAnswerSet[group][a + 2];
    if (s < 0 || nd[s] > dmin + kReach || !valid(a, d)) continue;
    const Point& p = kPoints[kGroupPoints[near[s]]];
    int j = p.costs_begin;
    while (kCostAnswer[j] != a) ++j;  // the first of its costs there (the set says it was measured)
    const long long price = kCost[j] * (a == LIBRARY ? 1000 : 1000 + kMarginPermille);
    if (best == INVALID || price < best_price || (price == best_price && nd[s] < best_dist)) {
      best = a; best_price = price; best_dist = nd[s];
    }
  }
  return best == INVALID ? kFallback : best;
}

// The step class of a problem (structure library_steps): bit i set where step i holds (runtime.step_class).
constexpr unsigned long long step_class(const long long (&d)[kNumSizes]) {
  unsigned long long c = 0;
  for (int i = 0; i < kNumSteps; ++i) {
    bool holds = true;
    for (int j = 0; j < kNumSizes; ++j)
      if (kStepOn[i][j])
        holds = holds && (kStepOp[i] == 0 ? d[j] % kStepValue[i] == 0 : kStepOp[i] == 1 ? d[j] <= kStepValue[i] : d[j] < kStepValue[i]);
    c |= static_cast<unsigned long long>(holds) << i;
  }
  return c;
}

// Cost mode with kNeighbours >= 2 or library steps (rule 4'): the answers measured within kReach of the nearest
// tuned point compete, each priced by the mean log2 cost (kCostLogAt, sum / count) of its kNeighbours nearest
// measurements (distance, tie distance, table order), kernels' raised by kCostLogMargin; the cheapest wins (ties:
// the library, then index). Answers measured at the same points form a set (kAnswerSet) and share those nearest; an
// answer measured kNeighbours times or fewer is priced from all of them. With library steps, the library's
// measurements count only at points of the problem's step class (kPointClass), where the group has one there.
// The points are visited in the rules' order, so a set's first point decides whether it competes (within kReach of
// the first point visited) and its first kNeighbours are its nearest; the walk stops once every set is decided and
// every competing one has its kNeighbours (sets as bits, kPointSetBits). The order: the points of the problem's cell
// of the group's grid (kIdx*, kCell*) are read nearest its centre first into a buffer, and the buffer's smallest
// key is visited next once it is nearer than the next point of the list can be (its distance from the centre less
// the problem's: the triangle inequality) or, past the list, than kCellReach less the problem's. Where the list
// ends first, or the group has no grid (`all`), every point of the group is read first. The problem's logs are
// clamped to the group's range: the distance to every point of the group changes by the same amount.
// buf[0..n) in descending order (a heap sort), the smallest last.
constexpr void sort_descending(unsigned long long* buf, int n) {
  auto sift = [&](int i, int m) {  // a min-heap over buf[0..m)
    for (int c = 2 * i + 1; c < m; i = c, c = 2 * i + 1) {
      c += c + 1 < m && buf[c + 1] < buf[c];
      if (!(buf[c] < buf[i])) return;
      const unsigned long long t = buf[c]; buf[c] = buf[i]; buf[i] = t;
    }
  };
  for (int i = n / 2 - 1; i >= 0; --i) sift(i, n);
  for (int m = n - 1; m > 0; --m) {
    const unsigned long long t = buf[0]; buf[0] = buf[m]; buf[m] = t;
    sift(0, m);
  }
}

constexpr int kWalkK = kNeighbours > 1 ? kNeighbours : 1;
// The points (into out) of the kWalkK smallest cheapest_walk keys among the group positions at[0..n) (of the
// problem's class only, where `here_only`), from the distances of the group's points (dists, by g - begin) or,
// without them, from the problem's clamped logs q; returns the largest of those keys (~0: fewer than kWalkK).
template <typename G>
constexpr unsigned long long nearest_k(const G* at, int n, int begin, const int* dists, const long long (&q)[kTableN],
                                       const long long (&lb)[kTieN], bool here_only, unsigned long long here,
                                       int (&out)[kWalkK]) {
  unsigned long long keys[kWalkK] = {};  // ascending
  for (int i = 0; i < kWalkK; ++i) keys[i] = ~0ULL;
  for (int i = 0; i < n; ++i) {
    const int g = at[i];
    if (here_only && kPointClass[kGroupPoints[g]] != here) continue;
    long long dist = 0;
    if (dists) dist = dists[g - begin];
    else for (int j = 0; j < kNumTableSizes; ++j) dist += absdiff(q[j], kGroupLogs[j][g]);
    const unsigned long long far = static_cast<unsigned long long>(dist) << kKeyDistShift;
    if (far > keys[kWalkK - 1]) continue;  // the tie and order bits cannot bring it in
    const unsigned long long key = far | static_cast<unsigned long long>(tie_at(g, lb)) << kKeyTieShift | (g - begin);
    if (key >= keys[kWalkK - 1]) continue;
    int j = kWalkK - 1;
    for (; j > 0 && keys[j - 1] > key; --j) keys[j] = keys[j - 1];
    keys[j] = key;
  }
  for (int i = 0; i < kWalkK; ++i) out[i] = kGroupPoints[begin + static_cast<int>(keys[i] & ((1ULL << kKeyTieShift) - 1))];
  return keys[kWalkK - 1];
}

template <bool all>
constexpr int cheapest_walk(int group, const long long (&d)[kNumSizes], const long long (&lt)[kTableN]) {
  constexpr int kK = kWalkK, kBuffer = all ? kPointsN : kListN, kScan = 8;
  const int begin = kGroupPointBegin[group], end = kGroupPointBegin[group + 1];
  if (begin == end) return kFallback;
  if (!all && kIdxShift[group] < 0) return cheapest_walk<true>(group, d, lt);
  const int shift = all ? 0 : kIdxShift[group], sb = kGroupSetBegin[group];
  long long q[kTableN] = {}, centre[kTableN] = {}, delta = 0;  // the problem's logs, its cell's centre's
  int cell = all ? 0 : kIdxCellBegin[group];
  for (int j = 0; j < kNumTableSizes; ++j) {
    const long long lo = kIdxLo[group][j], v = lt[j] < lo ? lo : lt[j] > kIdxHi[group][j] ? kIdxHi[group][j] : lt[j];
    q[j] = v;
    if (all) continue;
    const long long i = (v - lo) >> shift;
    centre[j] = lo + (i << shift) + ((1LL << shift) >> 1);
    cell += static_cast<int>(i) * kIdxStride[group][j];
    delta += absdiff(v, centre[j]);
  }
  long long lb[kTieN] = {};
  tie_logs(d, lb);
  const unsigned long long here = kNumSteps > 0 ? step_class(d) : 0;
  int library_here = 0, li = 0;  // the library's measurements at the group's points of the problem's class
  for (int i = kLibraryClassBegin[group]; kNumSteps > 0 && i < kLibraryClassBegin[group + 1]; ++i)
    if (kLibraryClass[i] == here) { library_here = kLibraryClassCount[i]; li = i - kLibraryClassBegin[group]; }
  const bool by_class = kNumSteps > 0 && library_here > 0;
  const int ls = kAnswerSet[group][0], lw = ls / 64;  // the library's set, its word
  const unsigned long long lbit = 1ULL << (ls & 63), may = all ? ~0ULL : kCellSets[cell];
  bool ok[kNumKernels + 2] = {};  // per answer + 2: valid, and its set may compete (kCellSets)
  // per word of sets: not decided yet, competing, still counting its kNeighbours nearest (of those that need them)
  unsigned long long undecided[kSetWords] = {}, competes[kSetWords] = {}, counting[kSetWords] = {}, wants[kSetWords] = {};
  unsigned long long bad[kInvalidWords] = {};
  invalid_kernels(d, bad);
  for (int a = LIBRARY; a < kNumKernels; ++a) {
    const int s = kAnswerSet[group][a + 2];
    if (a == GENERIC || s < 0 || !(may >> (s < 63 ? s : 63) & 1) || (a >= 0 && (bad[a / 64] >> (a % 64) & 1))) continue;
    ok[a + 2] = true;
    undecided[s / 64] |= 1ULL << (s & 63);
    if (!(a == LIBRARY && by_class) && kSetSize[sb + s] > kK) wants[s / 64] |= 1ULL << (s & 63);
  }
  // the library's nearest kNeighbours in the problem's class (else all of them count: at most kNeighbours)
  int class_want = by_class && ls >= 0 && (undecided[lw] & lbit) && library_here > kK ? kK : 0, class_count = 0;
  int count[kMaxSets] = {}, kp[kMaxSets][kK] = {}, class_kp[kK] = {};
  if (!all && class_want > 0) {  // from the cell's list of the class, where it holds them (else the walk reads them)
    const int c = cell * kMaxClasses + li, b = kCellClassBegin[c];
    const unsigned long long last = nearest_k(kCellClassG + b, kCellClassBegin[c + 1] - b, begin, nullptr, q, lb,
                                              false, here, class_kp);
    class_count = last != ~0ULL && static_cast<long long>(last >> kKeyDistShift) < kCellClassReach[c] - delta ? kK : 0;
  }
  // the points read and not visited yet, unsorted: their keys (distance, tie distance and group order, in the bits of
  // kKeyDistShift and kKeyTieShift), and where the smallest is
  unsigned long long buf[kBuffer + kScan] = {}, low = ~0ULL;
  for (int i = 0; i < kScan; ++i) buf[i] = ~0ULL;
  int n = 0, at = 0, e = all ? begin : kCellListBegin[cell];
  const int stop = all ? end : kCellListBegin[cell + 1];
  const long long outside = all ? (1LL << 62) : kCellReach[cell] - delta;  // no point left out of the list is nearer
  long long next = -(1LL << 62), limit = -1, nearest = 1LL << 62;  // the next point's bound; the nearest's distance
  for (bool more = true; more;) {
    while (e < stop && static_cast<long long>(low >> kKeyDistShift) >= next) {  // it could come before the smallest
      const int g = all ? e : kCellG[e], p = kGroupPoints[g];
      long long dist = 0;
      for (int j = 0; j < kNumTableSizes; ++j) dist += absdiff(q[j], kGroupLogs[j][g]);
      nearest = dist < nearest ? dist : nearest;
      bool useful = class_count < class_want && (kPointSetBits[p][lw] & lbit) && kPointClass[p] == here;
      for (int w = 0; w < kSetWords; ++w) useful = useful || (kPointSetBits[p][w] & (undecided[w] | counting[w]));
      if (useful) {  // a point of no set still asked is not visited (no set is asked again)
        const unsigned long long key = static_cast<unsigned long long>(dist) << kKeyDistShift |
                                       static_cast<unsigned long long>(tie_at(g, lb)) << kKeyTieShift | (g - begin);
        at = key < low ? n : at;
        low = key < low ? key : low;
        buf[n++] = key;
      }
      if (++e < stop && !all) {
        long long pd = 0;
        for (int j = 0; j < kNumTableSizes; ++j) pd += absdiff(centre[j], kGroupLogs[j][kCellG[e]]);
        next = pd - delta;
      }
    }
    if (n == 0 && (all || kCellReach[cell] >= kIdxAll)) break;  // every point visited
    const long long dist = static_cast<long long>(low >> kKeyDistShift);
    if (n == 0 || (!all && e == stop && dist >= outside)) {  // the list ends first: what is left, from every point
      int dists[kPointsN + kLanes] = {};  // the group's points' distances (from the clamped logs, as the keys')
      const long long dmin = group_distances(begin, end, q, dists);
      if (limit < 0) limit = dmin + kReach;  // no point visited yet
      for (int w = 0; w < kSetWords; ++w) {
        for (unsigned long long u = undecided[w]; u; u &= u - 1) {  // competes: its nearest point is within reach
          const int s = 64 * w + lowest_bit(u);
          bool within = false;
          for (int i = kSetPointBegin[sb + s]; i < kSetPointBegin[sb + s + 1] && !within; ++i)
            within = dists[kSetPoints[i] - begin] <= limit;
          competes[w] |= within ? u & (~u + 1) : 0;
          counting[w] |= within ? u & (~u + 1) & wants[w] : 0;
        }
        undecided[w] = 0;
        for (unsigned long long c = counting[w]; c; c &= c - 1) {  // its kNeighbours nearest, afresh
          const int s = 64 * w + lowest_bit(c), b = kSetPointBegin[sb + s];
          nearest_k(kSetPoints + b, kSetPointBegin[sb + s + 1] - b, begin, dists, q, lb, false, here, kp[s]);
          count[s] = kK;
        }
        counting[w] = 0;
      }
      if (class_count < class_want && (competes[lw] & lbit)) {  // the library's nearest in the problem's class
        const int b = kSetPointBegin[sb + ls];
        nearest_k(kSetPoints + b, kSetPointBegin[sb + ls + 1] - b, begin, dists, q, lb, true, here, class_kp);
        class_count = kK;
      }
      break;
    }
    const int p = kGroupPoints[begin + static_cast<int>(low & ((1ULL << kKeyTieShift) - 1))];
    if (all) {  // every point read: sorted once, then the smallest is the last
      if (at >= 0) sort_descending(buf, n);
      low = --n > 0 ? buf[n - 1] : ~0ULL;
      at = -1;
    } else {
      buf[at] = buf[--n];
      buf[n] = ~0ULL;
      low = ~0ULL;
      for (int i = 0, span = n > kScan ? n : kScan; i < span; ++i) {  // a fixed span where it can (no branch to miss)
        at = buf[i] < low ? i : at;
        low = buf[i] < low ? buf[i] : low;
      }
    }
    if (limit < 0) limit = nearest + kReach;  // every point nearer than this one was read
    if (dist > limit) {  // past the reach: a set not met yet does not compete
      class_want = ls >= 0 && (undecided[lw] & lbit) ? 0 : class_want;
      for (int w = 0; w < kSetWords; ++w) undecided[w] = 0;
    }
    more = false;
    for (int w = 0; w < kSetWords; ++w) {
      const unsigned long long met = undecided[w] & kPointSetBits[p][w];  // their nearest point: they compete
      undecided[w] ^= met;
      competes[w] |= met;
      counting[w] |= met & wants[w];
      for (unsigned long long c = counting[w] & kPointSetBits[p][w]; c; c &= c - 1) {
        const int s = 64 * w + lowest_bit(c);
        kp[s][count[s]++] = p;
        counting[w] &= count[s] == kK ? ~(1ULL << (s & 63)) : ~0ULL;
      }
      more = more || undecided[w] || counting[w];
    }
    if (class_count < class_want && (competes[lw] & kPointSetBits[p][lw] & lbit) && kPointClass[p] == here)
      class_kp[class_count++] = p;
    more = more || class_count < class_want;
  }
  int best = INVALID;
  long long best_price = 0, best_dist = 0;
  for (int a = LIBRARY; a < kNumKernels; ++a) {
    const int s = a == GENERIC ? 0 : kAnswerSet[group][a + 2];
    if (!ok[a + 2] || !(competes[s / 64] >> (s & 63) & 1)) continue;
    if constexpr (kNeighbours <= 1 && kNumSteps == 0) {  // K = 1: its cost at its set's nearest point (the first
      // visited), kernels' times 1 + margin; ties: the nearer, then the library, then the smaller index
      const int p = wants[s / 64] >> (s & 63) & 1 ? kp[s][0] : kGroupPoints[kSetPoints[kSetPointBegin[sb + s]]];
      long long dist = 0;
      for (int j = 0; j < kNumTableSizes; ++j) dist += absdiff(lt[j], kPoints[p].logs[kTableDims[j]]);
      int j = kPoints[p].costs_begin;
      while (kCostAnswer[j] != a) ++j;  // the first of its costs there (the set says it was measured)
      const long long price = kCost[j] * (a == LIBRARY ? 1000 : 1000 + kMarginPermille);
      if (best == INVALID || price < best_price || (price == best_price && dist < best_dist)) {
        best = a; best_price = price; best_dist = dist;
      }
      continue;
    }
    const bool in_class = a == LIBRARY && by_class;
    const int* points = in_class ? class_kp : kp[s];
    int m = in_class ? (class_want > 0 ? class_count : 0) : (wants[s / 64] >> (s & 63) & 1 ? count[s] : 0);
    long long sum = 0;
    for (int i = 0; i < m; ++i) sum += kCostLogAt[points[i]][a + 2];
    if (m == 0)  // priced from every measurement (of the problem's class): kNeighbours or fewer
      for (int i = kSetPointBegin[sb + s]; i < kSetPointBegin[sb + s + 1]; ++i) {
        const int p = kGroupPoints[kSetPoints[i]];
        if (in_class && kPointClass[p] != here) continue;
        sum += kCostLogAt[p][a + 2];
        ++m;
      }
    const long long price = (m == kK ? sum / kK : sum / m) + (a == LIBRARY ? 0 : kCostLogMargin);
    if (best == INVALID || price < best_price) { best = a; best_price = price; }
  }
  return best == INVALID ? kFallback : best;
}

"""
