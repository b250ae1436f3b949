"""The generated C++ header's cost-mode code (rule 4' of runtime.py): `cheapest`, which prices every point of a group,
and `cheapest_walk`, which visits the points in the rules' order over the spatial index of `cpp_index` (its arrays:
kIdx*, kCell*, kSet*, kLibraryClass*); emit_cpp writes COST between cpp_text.LOOKUP and cpp_text.LOOKUP_END."""

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
