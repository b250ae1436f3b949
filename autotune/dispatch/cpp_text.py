"""The C++ code the generated header carries after its data tables: the lookup rules of
`autotune.dispatch.runtime` in integers (LOOKUP, then cost mode's `cpp_walk.COST`, then LOOKUP_END; `NO_LIMIT` is
replaced by the number), the device check, the candidates of a problem, and the refinement where the application runs
(REFINE; `NAMESPACE` is replaced). `autotune.dispatch.emit_cpp` writes the header around them.
"""

LOOKUP = """\
constexpr long long ilog2_loop(long long x) {  // floor(log2(x) * 2^16), x >= 1, integers only
  int n = 0;
  for (long long t = x; t > 1; t >>= 1) ++n;
  unsigned long long y = n <= 30 ? static_cast<unsigned long long>(x) << (30 - n)
                                 : static_cast<unsigned long long>(x) >> (n - 30);
  long long r = static_cast<long long>(n) << 16;
  for (int i = 0; i < 16; ++i) {  // branch-free: y * y < 2^62, so bit = 1 where y >= 2^31 after the shift
    y = (y * y) >> 30;
    const unsigned long long bit = y >> 31;
    y >>= bit;
    r |= static_cast<long long>(bit) << (15 - i);
  }
  return r;
}

struct SmallLogs { long long v[4096]; };
constexpr SmallLogs small_logs() {
  SmallLogs s{};
  for (int x = 1; x < 4096; ++x) s.v[x] = ilog2_loop(x);
  return s;
}
inline constexpr SmallLogs kSmallLogs = small_logs();  // ilog2_loop of 1..4095, computed by the compiler
constexpr long long ilog2_fx(long long x) { return x < 4096 ? kSmallLogs.v[x] : ilog2_loop(x); }

constexpr long long absdiff(long long a, long long b) { return a < b ? b - a : a - b; }
constexpr int kTableN = kNumTableSizes > 0 ? kNumTableSizes : 1;  // array sizes (a C++ array has 1 entry or more)
constexpr int kTieN = kNumTieSizes > 0 ? kNumTieSizes : 1;
constexpr int kPointsN = kNumPoints > 0 ? kNumPoints : 1;
constexpr int kKernelsN = kNumKernels > 0 ? kNumKernels : 1;
static_assert(kNumTableSizes < 512, "distances are ints (a log is below 2^22)");
static_assert(kNumPoints < (1 << 20), "cheapest_walk keeps a point's group order in 20 bits");

// Whether answer `kernel` may serve d (tuned: at a tuned point that measured it). The library always may.
constexpr bool valid(int kernel, const long long (&d)[kNumSizes], bool tuned = false) {
  if (kernel == LIBRARY || tuned) return true;
  const Kernel& k = kKernels[kernel];
  if (k.tuned_only) return false;
  for (int i = 0; i < kNumSizes; ++i)  // the bounds first: a division only where a multiple is asked
    if (d[i] < k.lo[i] || d[i] > k.hi[i] || (k.mult[i] != 1 && d[i] % k.mult[i] != 0)) return false;
  return true;
}

// The kernels not valid at d, as bits (kernel i: bit i % 64 of word i / 64): per size some kernel constrains, a
// table up to kInvalidLimit, beyond it each kernel's bounds.
constexpr void invalid_kernels(const long long (&d)[kNumSizes], unsigned long long (&bad)[kInvalidWords]) {
  for (int w = 0; w < kInvalidWords; ++w) bad[w] = kAlwaysInvalid[w];
  for (int j = 0; j < kNumSizes; ++j) {
    if (kInvalidLimit[j] < 0) continue;
    if (d[j] <= kInvalidLimit[j]) {
      for (int w = 0; w < kInvalidWords; ++w) bad[w] |= kInvalidTab[kInvalidBegin[j] + d[j]][w];
      continue;
    }
    for (int i = 0; i < kNumKernels; ++i) {
      const Kernel& k = kKernels[i];
      if (d[j] < k.lo[j] || d[j] > k.hi[j] || (k.mult[j] != 1 && d[j] % k.mult[j] != 0)) bad[i / 64] |= 1ULL << (i % 64);
    }
  }
}

// First valid entry of a point's ranked list (tuned: the problem is this point) or of its near list
// (a problem that was not tuned), or INVALID when none is.
constexpr int first_valid(const Point& p, const long long (&d)[kNumSizes], bool tuned = false) {
  if (tuned) {
    for (int j = 0; j < p.ranked_count; ++j)
      if (valid(kRanked[p.ranked_begin + j], d, true)) return kRanked[p.ranked_begin + j];
    return INVALID;
  }
  for (int j = 0; j < p.near_count; ++j)
    if (valid(kNear[p.near_begin + j], d)) return kNear[p.near_begin + j];
  return INVALID;
}

// Log-ratio distance between a problem (logs l) and a tuned point over the table sizes (tie: the tie sizes).
constexpr long long distance(const long long (&l)[kNumSizes], const Point& p) {
  long long dist = 0;
  for (int j = 0; j < kNumTableSizes; ++j) dist += absdiff(l[kTableDims[j]], p.logs[kTableDims[j]]);
  return dist;
}
constexpr long long tie_distance(const long long (&l)[kNumSizes], const Point& p) {
  long long dist = 0;
  for (int j = 0; j < kNumTieSizes; ++j) dist += absdiff(l[kTieDims[j]], p.logs[kTieDims[j]]);
  return dist;
}
// The same for the point at group position g (kGroupPoints[g]) from the problem's logs over the table sizes (lt)
// or the tie sizes (lb), read from kGroupLogs / kGroupTieLogs (contiguous per size).
constexpr long long distance_at(int g, const long long (&lt)[kTableN]) {
  long long dist = 0;
  for (int j = 0; j < kNumTableSizes; ++j) dist += absdiff(lt[j], kGroupLogs[j][g]);
  return dist;
}
constexpr long long tie_at(int g, const long long (&lb)[kTieN]) {
  long long dist = 0;
  for (int j = 0; j < kNumTieSizes; ++j) dist += absdiff(lb[j], kGroupTieLogs[j][g]);
  return dist;
}
constexpr void tie_logs(const long long (&d)[kNumSizes], long long (&lb)[kTieN]) {
  for (int j = 0; j < kNumTieSizes; ++j) lb[j] = ilog2_fx(d[kTieDims[j]]);
}

// The group position g of the tuned point whose sizes are d (the first in table order), or -1: kExactSlot, open
// addressing by exact_hash (emit_cpp._exact_slots computes the same).
constexpr unsigned long long exact_hash(int group, const long long (&d)[kNumSizes]) {
  unsigned long long h = static_cast<unsigned long long>(group) * 0x9E3779B97F4A7C15ULL;
  for (int j = 0; j < kNumSizes; ++j) h = (h ^ static_cast<unsigned long long>(d[j])) * 0xBF58476D1CE4E5B9ULL;
  return h >> (64 - kExactBits);
}
constexpr int exact_point(int group, const long long (&d)[kNumSizes]) {
  for (unsigned long long h = exact_hash(group, d);; h = (h + 1) & ((1ULL << kExactBits) - 1)) {
    const int g = kExactSlot[h];
    if (g < 0) return -1;
    if (g < kGroupPointBegin[group] || g >= kGroupPointBegin[group + 1]) continue;
    bool same = true;
    for (int j = 0; j < kNumSizes; ++j) same = same && kPoints[kGroupPoints[g]].dims[j] == d[j];
    if (same) return g;
  }
}

// The distance from a problem (logs lt over the table sizes) to each tuned point of its group
// [begin, end), into dists (by g - begin; ints: a log is below 2^22, kNumTableSizes below 2^9); returns the nearest
// one's.
constexpr int group_distances(int begin, int end, const long long (&lt)[kTableN], int (&dists)[kPointsN + kLanes]) {
  int a[kTableN] = {};
  for (int j = 0; j < kNumTableSizes; ++j) a[j] = static_cast<int>(lt[j]);
  for (int b = begin; b < end; b += kLanes) {  // kLanes points at a time (kGroupLogs is padded past the last group)
    int acc[kLanes] = {};
    for (int j = 0; j < kNumTableSizes; ++j)
      for (int i = 0; i < kLanes; ++i) {
        const int v = a[j] - kGroupLogs[j][b + i];
        acc[i] += v < 0 ? -v : v;
      }
    for (int i = 0; i < kLanes; ++i) dists[b - begin + i] = acc[i];
  }
  int dmin = dists[0];
  for (int i = 1; i < end - begin; ++i) dmin = dists[i] < dmin ? dists[i] : dmin;
  return dmin;
}

// Rule 4: the first valid entry of the near list of the nearest tuned point (distance, tie distance, table order)
// that has one. The distances of all the group's points first; the nearest one (tie distances only between
// equally near points) answers where it has a valid entry, else the nearest of the others that has one (each
// answer's validity decided once, `known`).
constexpr int nearest(int group, const long long (&d)[kNumSizes], const long long (&lt)[kTableN]) {
  const int begin = kGroupPointBegin[group], end = kGroupPointBegin[group + 1];
  if (begin == end) return kFallback;
  int dists[kPointsN + kLanes] = {};
  const int dmin = group_distances(begin, end, lt, dists);
  long long lb[kTieN] = {};
  bool have_lb = false;
  int best = -1;
  long long best_b = 0;
  for (int g = begin; g < end; ++g) {
    if (dists[g - begin] != dmin) continue;
    if (best < 0) { best = g; continue; }
    if (!have_lb) { tie_logs(d, lb); have_lb = true; best_b = tie_at(best, lb); }
    const long long db = tie_at(g, lb);
    if (db < best_b) { best = g; best_b = db; }  // equally near: the tie sizes, then table order (best came first)
  }
  const int first = first_valid(kPoints[kGroupPoints[best]], d);
  if (first != INVALID) return first;
  if (!have_lb) tie_logs(d, lb);
  signed char known[kKernelsN] = {};  // per kernel: 0 not decided yet, 1 valid, -1 not
  const int skip = best;
  int kern = INVALID;
  long long best_d = 0;
  best = -1;
  for (int g = begin; g < end; ++g) {
    if (g == skip) continue;
    const long long dist = dists[g - begin];
    if (best >= 0 && dist > best_d) continue;  // farther than the best so far: it cannot win
    const long long db = tie_at(g, lb);
    if (best >= 0 && dist == best_d && db >= best_b) continue;
    const Point& p = kPoints[kGroupPoints[g]];
    int found = INVALID;
    for (int j = 0; j < p.near_count && found == INVALID; ++j) {
      const int a = kNear[p.near_begin + j];
      if (a < 0) { found = a; break; }
      if (known[a] == 0) known[a] = valid(a, d) ? 1 : -1;
      if (known[a] > 0) found = a;
    }
    if (found == INVALID) continue;
    best = g; best_d = dist; best_b = db; kern = found;
  }
  return best < 0 ? kFallback : kern;
}

"""

LOOKUP_END = """\
// Model mode (rule 4''): the selection model's features of a problem (runtime.model_features): x holds those that
// do not depend on a kernel's tiles (the padded sizes and tile counts left 0); model_time adds those of tiles t
// over the table sizes and returns the predicted log2 time (32 fractional bits) for coefficients c.
constexpr int kModelTiled = 1 + kNumSizes + kNumTableSizes;  // the first padded-size feature
constexpr void model_shared(const long long (&d)[kNumSizes], long long (&x)[kModelFeatures]) {
  int f = 0;
  x[f++] = 1LL << 16;
  for (int j = 0; j < kNumSizes; ++j) x[f++] = ilog2_fx(d[j]);
  for (int j = 0; j < kNumTableSizes; ++j) x[f++] = ilog2_fx((d[kTableDims[j]] + kModelAlign - 1) / kModelAlign * kModelAlign);
  f += 2 * kNumTableSizes;
  for (int j = 0; j < kNumTableSizes; ++j) x[f++] = d[kTableDims[j]] % kModelAlign == 0 ? (1LL << 16) : 0;
  for (int j = 0; j < kNumTableSizes; ++j) x[f++] = d[kTableDims[j]] % 2 == 0 ? (1LL << 16) : 0;
  long long pairs = kNumTableSizes == 1 ? d[kTableDims[0]] : 0;
  for (int a = 0; a < kNumTableSizes; ++a)
    for (int b = a + 1; b < kNumTableSizes; ++b) {
      const long long term = d[kTableDims[a]] * d[kTableDims[b]];
      pairs = pairs > kModelSaturate - term ? kModelSaturate : pairs + term;
    }
  x[f++] = ilog2_fx(pairs < 1 ? 1 : pairs);
}
constexpr long long model_time(const long long* c, const long long (&d)[kNumSizes], const long long (&x)[kModelFeatures],
                               const long long* t) {
  long long sum = 0;
  for (int i = 0; i < kModelTiled; ++i) sum += c[i] * x[i];
  for (int i = kModelTiled + 2 * kNumTableSizes; i < kModelFeatures; ++i) sum += c[i] * x[i];
  for (int j = 0; j < kNumTableSizes; ++j) {
    const long long count = (d[kTableDims[j]] + t[j] - 1) / t[j];
    sum += c[kModelTiled + j] * ilog2_fx(count * t[j]) + c[kModelTiled + kNumTableSizes + j] * ilog2_fx(count);
  }
  return sum;
}

constexpr int predicted(int precision, int shape, const long long (&d)[kNumSizes]) {
  int best = INVALID;
  long long best_price = 0;
  const int group = precision * kNumShapes + shape;
  long long x[kModelFeatures] = {};
  model_shared(d, x);
  if (kModelLibraryHas[group]) {
    long long ones[kNumTableSizes > 0 ? kNumTableSizes : 1] = {};
    for (int j = 0; j < kNumTableSizes; ++j) ones[j] = 1;
    best = LIBRARY;
    best_price = model_time(kModelLibrary[group], d, x, ones);
  }
  for (int g = kGroupKernelBegin[group]; g < kGroupKernelBegin[group + 1]; ++g) {
    const int i = kGroupKernels[g];
    if (!kModelHas[i] || !valid(i, d)) continue;
    const long long price = model_time(kModelCoef[i], d, x, kModelTiles[i]) + kModelMargin;
    if (best == INVALID || price < best_price) { best = i; best_price = price; }
  }
  return best == INVALID ? kFallback : best;
}

// The answer for a problem whose sizes are d (the kind's order).
constexpr int lookup_sizes(int precision, int shape, const long long (&d)[kNumSizes]) {
  if (precision < 0 || precision >= kNumPrecisions || shape < 0 || shape >= kNumShapes) return INVALID;
  for (int j = 0; j < kNumSizes; ++j)
    if (d[j] < 1 || d[j] > kMaxSize) return INVALID;
  const int group = precision * kNumShapes + shape;
  const int at = exact_point(group, d);
  if (at >= 0) {
    const int kern = first_valid(kPoints[kGroupPoints[at]], d, true);
    return kern == INVALID ? kFallback : kern;
  }
  for (int i = kGroupRegionBegin[group]; kNumRegions > 0 && i < kGroupRegionBegin[group + 1]; ++i) {
    const Region& r = kRegions[kGroupRegions[i]];
    bool inside = true;
    for (int j = 0; j < kNumTableSizes; ++j)
      inside = inside && r.lo[j] <= d[kTableDims[j]] && d[kTableDims[j]] <= r.hi[j];
    if (inside && valid(r.kernel, d)) return r.kernel;
  }
  if (kModelMode) return predicted(precision, shape, d);
  long long lt[kTableN] = {};
  for (int j = 0; j < kNumTableSizes; ++j) lt[j] = ilog2_fx(d[kTableDims[j]]);
  if (kCostMode)  // the index's walk where the group has one (cpp_index.WALK_POINTS), else every point's distance
    return kNeighbours > 1 || kNumSteps > 0 || kIdxShift[group] >= 0 ? cheapest_walk<false>(group, d, lt) : cheapest(group, d, lt);
  return nearest(group, d, lt);
}

"""

DEVICE = """\
// True when `device` names the GPU this table was tuned on (case-insensitive); false means: warn.
constexpr bool same_device(const char* device) {
  const char* a = device;
  const char* b = kTunedDevice;
  for (; *a && *b; ++a, ++b) {
    char x = (*a >= 'A' && *a <= 'Z') ? char(*a - 'A' + 'a') : *a;
    char y = (*b >= 'A' && *b <= 'Z') ? char(*b - 'A' + 'a') : *b;
    if (x != y) return false;
  }
  return *a == *b;
}

"""


CANDIDATES = """\
// Whether d is a tuned point of its group (where the table's answer was measured: refinement keeps it).
constexpr bool tuned_point(int precision, int shape, const long long (&d)[kNumSizes]) {
  const int group = precision * kNumShapes + shape;
  for (int g = kGroupPointBegin[group]; g < kGroupPointBegin[group + 1]; ++g) {
    bool same = true;
    for (int j = 0; j < kNumSizes && same; ++j) same = kPoints[kGroupPoints[g]].dims[j] == d[j];
    if (same) return true;
  }
  return false;
}

// The answers refinement times at a problem (autotune/dispatch/onsite.py, candidates): the table's answer, its next
// best valid kernels (model tables: by predicted time; others: the ranked list of the nearest tuned point), `top`
// in all, then LIBRARY where `library` and the table has one (or where it is the answer). Returns how many.
constexpr int candidates(int precision, int shape, const long long (&d)[kNumSizes], int top, bool library,
                         int (&out)[kNumKernels + 2]) {
  const int answer = lookup_sizes(precision, shape, d);
  if (answer == INVALID) return 0;
  int order[kNumKernels + 1] = {};
  int n = 0;
  order[n++] = answer;
  const int group = precision * kNumShapes + shape;
  if (kModelMode) {
    long long x[kModelFeatures] = {};
    model_shared(d, x);
    long long t[kNumKernels + 1] = {};
    for (int g = kGroupKernelBegin[group]; g < kGroupKernelBegin[group + 1]; ++g) {
      const int i = kGroupKernels[g];
      if (!kModelHas[i] || !valid(i, d)) continue;
      const long long price = model_time(kModelCoef[i], d, x, kModelTiles[i]);
      int at = n;  // insertion by (predicted time, index), after the table's answer
      while (at > 1 && t[at - 1] > price) { order[at] = order[at - 1]; t[at] = t[at - 1]; --at; }
      order[at] = i; t[at] = price; ++n;
    }
  } else {
    long long l[kNumSizes] = {};
    for (int j = 0; j < kNumSizes; ++j) l[j] = ilog2_fx(d[j]);
    int best = -1;
    long long best_d = 0, best_b = 0;
    for (int g = kGroupPointBegin[group]; g < kGroupPointBegin[group + 1]; ++g) {
      const Point& p = kPoints[kGroupPoints[g]];
      const long long dist = distance(l, p), db = tie_distance(l, p);
      if (best < 0 || dist < best_d || (dist == best_d && db < best_b)) { best = kGroupPoints[g]; best_d = dist; best_b = db; }
    }
    if (best >= 0)
      for (int j = 0; j < kPoints[best].ranked_count && n < kNumKernels + 1; ++j) {
        const int a = kRanked[kPoints[best].ranked_begin + j];
        if (a >= 0 && valid(a, d)) order[n++] = a;
      }
  }
  int count = 0;
  for (int i = 0; i < n && count < top; ++i) {
    bool seen = order[i] == LIBRARY;
    for (int j = 0; j < count && !seen; ++j) seen = out[j] == order[i];
    if (!seen) out[count++] = order[i];
  }
  if ((library && kLibrary[0] != '\\0') || answer == LIBRARY) out[count++] = LIBRARY;
  return count;
}

"""

REFINE = """
// Refinement where the application runs (off unless AUTOTUNE_DISPATCH_REFINE is defined; CUDA runtime, nvcc):
//   autotune_dispatch::Refiner refiner(/*top=*/3);   // one per process; thread-safe
//   int answer = refiner.choose(precision, shape, d, stream, [&](int a) { launch_mine(a, args..., stream); });
// At a problem's first call it runs each candidate once untimed, then `reps` times between two CUDA events
// recorded in `stream`, keeps the fastest (one that throws or leaves a CUDA error is not chosen) and caches it per
// (precision, shape, sizes); later calls answer from the cache. At a tuned point the table's answer is kept
// untimed. run(answer) must launch `answer` (a kernel index, LIBRARY, GENERIC) in `stream` and be repeatable.
#if defined(AUTOTUNE_DISPATCH_REFINE)
#include <cuda_runtime.h>
#include <array>
#include <map>
#include <mutex>

namespace NAMESPACE {

class Refiner {
 public:
  explicit Refiner(int top = 3, int reps = 3, bool library = true) : top_(top), reps_(reps), library_(library) {}

  template <class Run>
  int choose(int precision, int shape, const long long (&d)[kNumSizes], cudaStream_t stream, Run&& run) {
    std::array<long long, kNumSizes + 2> key{};
    key[0] = precision;
    key[1] = shape;
    for (int j = 0; j < kNumSizes; ++j) key[2 + j] = d[j];
    std::lock_guard<std::mutex> hold(mutex_);  // first calls are timed one at a time (timings must not overlap)
    const auto hit = choices_.find(key);
    if (hit != choices_.end()) return hit->second;
    int answer = lookup_sizes(precision, shape, d);
    if (answer == INVALID) return answer;
    if (answer != NONE && !tuned_point(precision, shape, d)) {
      int cand[kNumKernels + 2] = {};
      const int n = candidates(precision, shape, d, top_, library_, cand);
      const int table = answer;
      float best = -1.0f;
      for (int i = 0; i < n; ++i) {
        const float ms = time_one(cand[i], stream, run);
        if (ms > 0.0f && (best < 0.0f || ms < best || (ms == best && cand[i] == table))) { best = ms; answer = cand[i]; }
      }
      ++timed_;
    }
    choices_.emplace(key, answer);
    return answer;
  }

  // Problems timed so far (a cached answer times nothing).
  int timed() const { std::lock_guard<std::mutex> hold(mutex_); return timed_; }

 private:
  template <class Run>
  float time_one(int answer, cudaStream_t stream, Run& run) {
    cudaEvent_t start = nullptr, stop = nullptr;
    float ms = -1.0f;
    if (cudaEventCreate(&start) != cudaSuccess || cudaEventCreate(&stop) != cudaSuccess) return ms;
    try {
      (void)cudaGetLastError();
      run(answer);  // untimed: loads the kernel, warms caches
      cudaEventRecord(start, stream);
      for (int r = 0; r < reps_; ++r) run(answer);
      cudaEventRecord(stop, stream);
      if (cudaEventSynchronize(stop) == cudaSuccess && cudaGetLastError() == cudaSuccess &&
          cudaEventElapsedTime(&ms, start, stop) == cudaSuccess)
        ms /= float(reps_);
      else
        ms = -1.0f;
    } catch (...) {
      ms = -1.0f;  // an answer that cannot run here is not chosen
    }
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
    return ms;
  }

  int top_, reps_;
  bool library_;
  int timed_ = 0;
  mutable std::mutex mutex_;
  std::map<std::array<long long, kNumSizes + 2>, int> choices_;
};

}  // namespace NAMESPACE
#endif
"""
