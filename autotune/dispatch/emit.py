"""Consumers generated from the canonical dispatch JSON: a C++ header, a Python module, CSV.

The C++ header holds data tables and a constexpr lookup implementing dispatch_runtime's rules with
integers only, for any problem kind (its sizes, table sizes, precisions and shapes come from the table),
plus (in one translation unit that defines AUTOTUNE_DISPATCH_INSTANTIATE, compiled by nvcc) explicit
instantiations of the template kernels whose C++ parameter lists the table records. A kernel tuned by
preprocessor defines is named by its source, function and `-D` flags (kKernelDefines): compile one copy per
kernel. Kernel sources are named relative to an include directory (`#include "name.cu"`; the header says
which -I to pass). No CUDA code is generated. The Python module is standalone (the Python standard library only):
the table as a literal and a copy of the lookup rules of autotune.dispatch.runtime; its `lookup`/`lookup_index` take
the sizes in the kind's order (and no precision or shape for a kind with one precision and no variants).
"""

from __future__ import annotations

import csv
import io
import json
import keyword
import pprint
import re

from autotune.dispatch.table import DispatchTable
from autotune.dispatch.runtime import (
    FALLBACKS,
    GENERIC,
    INVALID,
    LIBRARY,
    MAX_SIZE,
    MODEL_ALIGN,
    MODEL_SATURATE,
    NO_LIMIT,
    cost_log_margin,
    ilog2_fx,
    NONE,
    RUNTIME_VERSION,
    model_count,
    model_margin,
    validity_bounds,
)

CPP_RESERVED = {
    "precision",
    "shape",
    "d",
    "l",
    "i",
    "j",
    "p",
    "device",
    "auto",
    "int",
    "long",
    "double",
    "float",
    "char",
    "bool",
    "const",
    "return",
    "register",
    "new",
    "delete",
    "class",
    "this",
    "template",
    "namespace",
    "operator",
    "default",
    "case",
    "switch",
    "union",
    "signed",
    "unsigned",
    "short",
}


def _c_string(text: str | None) -> str:
    return json.dumps(text or "")  # a JSON string literal is a valid C string literal for ASCII names


def _ll(value: int) -> str:
    return f"{int(value)}LL"


def _arr(values) -> str:
    return "{" + ", ".join(_ll(x) for x in values) + "}"


def _identifier(text: str) -> str:
    """`text` as a C++ and Python identifier part (letters, digits, underscores)."""
    out = re.sub(r"\W", "_", text)
    return out if out and not out[0].isdigit() else f"_{out}"


def size_parameters(table: DispatchTable) -> list[str]:
    """The lookup's parameter names for the sizes: the size names, where they are identifiers usable in C++ and
    Python, else size0, size1, ..."""
    names = list(table.size_names)
    ok = all(
        re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", n) and n not in CPP_RESERVED and not keyword.iskeyword(n) for n in names
    ) and len(set(names)) == len(names)
    return names if ok else [f"size{i}" for i in range(len(names))]


def simple_call(table: DispatchTable) -> bool:
    """One precision and no variants: the lookup takes the sizes only."""
    return len(table.precisions) == 1 and tuple(table.shapes) == ("",)


def instantiation(template: str, parameters: str) -> str:
    """`template __global__ void ns::kernel<args>(params);` for one name expression and C++ parameter list."""
    if not parameters:
        raise ValueError(f"no C++ parameter list for {template}: the kind does not say how the kernel is called")
    return f"template __global__ void {template}({parameters});"


def _instantiations(table: DispatchTable) -> tuple[list[str], list[str]]:
    sources: list[str] = []
    lines: list[str] = []
    for k in table.data["kernels"]:
        if k.get("template") and k.get("parameters") and not k.get("defines"):
            if k.get("source") and k["source"] not in sources:
                sources.append(k["source"])
            lines.append(instantiation(k["template"], k["parameters"]))
    generic = table.data.get("generic") or {}
    params = generic.get("parameters") or {}
    for key, template in sorted((generic.get("templates") or {}).items()):
        if params.get(key):
            if generic.get("source") and generic["source"] not in sources:
                sources.append(generic["source"])
            lines.append(instantiation(template, params[key]))
    return sources, list(dict.fromkeys(lines))  # one instantiation per name expression


def _include_note(table: DispatchTable) -> str:
    prov = table.provenance
    dirs = prov.get("include_dir") or prov.get("include_dirs") or []
    dirs = [dirs] if isinstance(dirs, str) else list(dirs)
    where = " ".join(f"-I{d}" for d in dirs) if dirs else "-I<the directory of each source>"
    return (
        f"// Kernel sources are named relative to the include directory: compile with {where}\n"
        "// (`autotune report/emit --include-dir DIR` names them relative to DIR).\n"
    )


def emit_cpp(table: DispatchTable, namespace: str = "autotune_dispatch") -> str:
    """The C++17 header: constexpr tables and `lookup`, and the kernels' explicit instantiations."""
    d = table.data
    prov = d["provenance"]
    kernels, points, regions = d["kernels"], d["points"], d["regions"]
    names, table_sizes = list(table.size_names), list(table.table_sizes)
    nsz, ntab = len(names), len(table_sizes)
    near = [names.index(n) for n in table_sizes]
    tie = [i for i in range(nsz) if i not in near]
    precisions, shapes = list(table.precisions), list(table.shapes)
    library = table.library
    out = io.StringIO()
    w = out.write
    w("// Generated by `autotune emit --format cpp` from dispatch.json. Do not edit.\n")
    w(f"//   kind: {json.dumps(table.kind)}, sizes: {', '.join(names)} (table sizes: {', '.join(table_sizes)})\n")
    for key in ("device", "method", "bk", "tol", "kernels", "points", "worst_loss", "mean_loss", "sweep_ids"):
        w(f"//   {key}: {json.dumps(prov.get(key))}\n")
    params = size_parameters(table)
    call = ", ".join(params) if simple_call(table) else "precision, shape, " + ", ".join(params)
    w(
        "// Lookup rules: autotune/dispatch/runtime.py (exact point, merged region, nearest tuned point by\n"
        "// log-ratio distance among kernels whose validity predicates hold, then the table's fallback).\n"
        f"// lookup({call}) returns an index into kKernels (>= 0), GENERIC (-1: the kind's generic kernel),\n"
        f"// LIBRARY (-2: call the library, {library or 'none in this table'}), NONE (-4: nothing in the table may serve\n"
        "// the problem: run your own code) or INVALID (-3: precision or shape out of range, or a size outside\n"
        "// 1..2^31-1; Python raises ValueError for the same inputs).\n"
    )
    w(_include_note(table))
    w("#pragma once\n\n")
    w(f"namespace {namespace} {{\n\n")
    w(f"inline constexpr const char* kKind = {_c_string(table.kind)};\n")
    w(f"inline constexpr const char* kTunedDevice = {_c_string(prov.get('device'))};\n")
    w(f"inline constexpr double kTol = {float(prov.get('tol') or 0.0)!r};\n")
    w(f"inline constexpr double kWorstLoss = {float(prov.get('worst_loss') or 0.0)!r};\n")
    w(f"inline constexpr int GENERIC = {GENERIC};  // the kind's generic kernel (generic templates below)\n")
    w(f"inline constexpr int LIBRARY = {LIBRARY};  // call the library: {_c_string(library)[1:-1] or 'none'}\n")
    w(f"inline constexpr int INVALID = {INVALID};  // invalid input\n")
    w(f"inline constexpr int NONE = {NONE};  // no kernel of the table is valid, and no library or generic kernel\n")
    w(f"inline constexpr long long kMaxSize = {_ll(MAX_SIZE)};\n")
    w(f"inline constexpr const char* kLibrary = {_c_string(library)};\n")
    w(
        f"inline constexpr int kFallback = {FALLBACKS[d.get('fallback', 'library')]};"
        "  // the answer where nothing in the table is valid\n"
    )
    w(f"inline constexpr int kNumSizes = {nsz};  // {', '.join(names)}\n")
    w(f"inline constexpr int kNumTableSizes = {ntab};\n")
    w(f"inline constexpr int kNumTieSizes = {len(tie)};\n")
    w(f"inline constexpr int kTableDims[{max(1, ntab)}] = {{{', '.join(map(str, near)) or '0'}}};\n")
    w(f"inline constexpr int kTieDims[{max(1, len(tie))}] = {{{', '.join(map(str, tie)) or '0'}}};\n")
    w(f"inline constexpr int kNumPrecisions = {len(precisions)};\n")
    w(f"inline constexpr int kNumShapes = {len(shapes)};\n")
    w(
        "enum Precision : int { "
        + ", ".join(f"k{_identifier(p).capitalize()} = {i}" for i, p in enumerate(precisions))
        + " };\n"
    )
    if all(re.fullmatch(r"[A-Za-z0-9_]+", s) for s in shapes):
        w("enum Shape : int { " + ", ".join(f"k{_identifier(s)} = {i}" for i, s in enumerate(shapes)) + " };\n")
    else:
        w(f"// shapes (variants) by index: {json.dumps(shapes)}\n")
    w("\n")
    w(
        f"struct Kernel {{ const char* instance_id; const char* name; const char* template_name; const char* source; "
        f"const char* defines; int precision; int shape; long long mult[{nsz}]; long long lo[{nsz}]; "
        f"long long hi[{nsz}]; bool tuned_only; }};\n"
        f"struct Point {{ int precision; int shape; long long dims[{nsz}]; long long logs[{nsz}]; "
        "int ranked_begin; int ranked_count; "
        "int near_begin; int near_count; int costs_begin; int costs_count; };\n"
        f"struct Region {{ int precision; int shape; long long lo[{ntab}]; long long hi[{ntab}]; int kernel; }};\n\n"
    )
    w(f"inline constexpr int kNumKernels = {len(kernels)};\n")
    w("// defines: the -D flags of a kernel tuned by preprocessor defines (empty for a template kernel)\n")
    w(f"inline constexpr Kernel kKernels[{max(1, len(kernels))}] = {{\n")
    for k in kernels:
        mult, lo, hi = validity_bounds(k.get("valid", []), names)
        defines = " ".join(f"-D{n}={v}" for n, v in (k.get("defines") or {}).items())
        w(
            f"  {{{_c_string(k['instance_id'])}, {_c_string(k.get('name'))}, {_c_string(k.get('template'))}, "
            f"{_c_string(k.get('source'))}, {_c_string(defines)}, "
            f"{precisions.index(k['precision'])}, {shapes.index(k['shape'])}, {_arr(mult)}, {_arr(lo)}, {_arr(hi)}, "
            f"{'true' if k.get('tuned_only') else 'false'}}},\n"
        )
    if not kernels:
        w(f'  {{"", "", "", "", "", 0, 0, {_arr([1] * nsz)}, {_arr([1] * nsz)}, {_arr([0] * nsz)}, false}},\n')
    w("};\n\n")
    ranked: list[int] = []
    near_list: list[int] = []
    costs: list[list[int]] = []
    w(f"inline constexpr int kNumPoints = {len(points)};\n")
    w(f"inline constexpr Point kPoints[{max(1, len(points))}] = {{\n")
    for p in points:
        w(
            f"  {{{precisions.index(p['precision'])}, {shapes.index(p['shape'])}, "
            f"{_arr(p['sizes'][n] for n in names)}, {_arr(ilog2_fx(int(p['sizes'][n])) for n in names)}, "
            f"{len(ranked)}, {len(p['ranked'])}, "
            f"{len(near_list)}, {len(p.get('near', p['ranked']))}, {len(costs)}, {len(p.get('costs', []))}}},"
            f"  // {p['point_key']}\n"
        )
        ranked += p["ranked"]
        near_list += p.get("near", p["ranked"])
        costs += p.get("costs", [])
    if not points:
        w(f"  {{-1, -1, {_arr([0] * nsz)}, {_arr([0] * nsz)}, 0, 0, 0, 0, 0, 0}},\n")
    w("};\n")
    _emit_groups(w, table, precisions, shapes)
    w(f"inline constexpr int kRanked[{max(1, len(ranked))}] = {{{', '.join(map(str, ranked or [0]))}}};\n")
    w(f"inline constexpr int kNear[{max(1, len(near_list))}] = {{{', '.join(map(str, near_list or [0]))}}};\n")
    w(
        f"inline constexpr int kCostAnswer[{max(1, len(costs))}] = "
        f"{{{', '.join(str(int(a)) for a, _ in costs) or '0'}}};\n"
    )
    w(
        f"inline constexpr long long kCost[{max(1, len(costs))}] = "
        f"{{{', '.join(_ll(int(c)) for _, c in costs) or '0'}}};\n"
    )
    st = d.get("structure") or {}
    w(
        f"inline constexpr bool kCostMode = {'true' if st.get('mode') == 'cost' else 'false'};"
        "  // structure mode: answers off the tuned points by cost (rule 4')\n"
    )
    w(f"inline constexpr long long kMarginPermille = {int(round(1000 * float(st.get('library_margin', 0.0))))};\n")
    w(
        f"inline constexpr long long kReach = {int(round(float(st.get('reach', 1.0)) * 65536))};"
        "  // log2 distance, 16 fractional bits\n"
    )
    w(
        f"inline constexpr int kNeighbours = {int(st.get('neighbours', 1))};"
        "  // cost mode: measurements each answer's price is the mean log2 cost of (1: the nearest's cost)\n"
        f"inline constexpr long long kCostLogMargin = {cost_log_margin(float(st.get('library_margin', 0.0)))};"
        "  // log2(1 + library margin), 16 fractional bits\n"
    )
    w(
        f"inline constexpr long long kCostLog[{max(1, len(costs))}] = "
        f"{{{', '.join(str(ilog2_fx(max(1, int(c)))) for _, c in costs) or '0'}}};  // ilog2_fx of kCost\n\n"
    )
    _emit_model(w, table, names, table_sizes, precisions, shapes)
    w(f"inline constexpr int kNumRegions = {len(regions)};\n")
    w(f"inline constexpr Region kRegions[{max(1, len(regions))}] = {{\n")
    for r in regions:
        w(
            f"  {{{precisions.index(r['precision'])}, {shapes.index(r['shape'])}, "
            f"{_arr(r['bounds'][n][0] for n in table_sizes)}, {_arr(r['bounds'][n][1] for n in table_sizes)}, "
            f"{int(r['kernel'])}}},\n"
        )
    if not regions:
        w(f"  {{-1, -1, {_arr([0] * ntab)}, {_arr([0] * ntab)}, -1}},\n")
    w("};\n\n")
    w(_CPP_LOOKUP.replace("NO_LIMIT", _ll(NO_LIMIT)))
    args = ", ".join(f"long long {n}" for n in params)
    w(
        "// The answer for a problem: an index into kKernels, GENERIC (-1), LIBRARY (-2), NONE (-4) or INVALID (-3).\n"
        f"constexpr int lookup(int precision, int shape, {args}) {{\n"
        f"  const long long d[kNumSizes] = {{{', '.join(params)}}};\n"
        "  return lookup_sizes(precision, shape, d);\n}\n\n"
    )
    if simple_call(table):
        w(
            f"// The kind has one precision ({precisions[0]}) and no variants: the sizes alone.\n"
            f"constexpr int lookup({args}) {{ return lookup(0, 0, {', '.join(params)}); }}\n\n"
        )
    w(_CPP_DEVICE)
    w(_CPP_CANDIDATES)
    w(f"}}  // namespace {namespace}\n")
    w(_CPP_REFINE.replace("NAMESPACE", namespace))
    sources, inst = _instantiations(table)
    if inst:
        w(
            "\n// Explicit instantiations: define AUTOTUNE_DISPATCH_INSTANTIATE in exactly one .cu file compiled\n"
            "// with nvcc -std=c++17 and the include directory above; kKernels names each kernel's template.\n"
            "#if defined(__CUDACC__) && defined(AUTOTUNE_DISPATCH_INSTANTIATE)\n"
        )
        for src in sources:
            w(f'#include "{src}"\n')
        w("\n".join(inst) + "\n#endif\n")
    return out.getvalue()


_CPP_LOOKUP = """\
constexpr long long ilog2_loop(long long x) {  // floor(log2(x) * 2^16), x >= 1, integers only
  int n = 0;
  for (long long t = x; t > 1; t >>= 1) ++n;
  unsigned long long y = n <= 30 ? static_cast<unsigned long long>(x) << (30 - n)
                                 : static_cast<unsigned long long>(x) >> (n - 30);
  long long r = static_cast<long long>(n) << 16;
  for (int i = 0; i < 16; ++i) {
    y = (y * y) >> 30;
    if (y >= (1ULL << 31)) { y >>= 1; r |= 1LL << (15 - i); }
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

// Whether answer `kernel` may serve d (tuned: at a tuned point that measured it). The library always may.
constexpr bool valid(int kernel, const long long (&d)[kNumSizes], bool tuned = false) {
  if (kernel == LIBRARY || tuned) return true;
  const Kernel& k = kKernels[kernel];
  if (k.tuned_only) return false;
  for (int i = 0; i < kNumSizes; ++i)
    if (d[i] % k.mult[i] != 0 || d[i] < k.lo[i] || d[i] > k.hi[i]) return false;
  return true;
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

// Cost mode: each valid answer priced at the tuned point nearest the problem where it was measured; answers
// measured within kReach of the nearest tuned point compete; the cheapest wins (ties: nearer, library, index).
constexpr int cheapest(int group, const long long (&d)[kNumSizes], const long long (&l)[kNumSizes]) {
  const int begin = kGroupPointBegin[group], end = kGroupPointBegin[group + 1];
  if (begin == end) return kFallback;
  long long dmin = -1;
  long long dists[kNumPoints > 0 ? kNumPoints : 1] = {};
  for (int g = begin; g < end; ++g) {
    const long long dist = dists[g - begin] = distance(l, kPoints[kGroupPoints[g]]);
    if (dmin < 0 || dist < dmin) dmin = dist;
  }
  // per answer (index + 2: the library first), its nearest measurement within reach: distance, tie, cost
  bool found[kNumKernels + 2] = {};
  long long nd[kNumKernels + 2] = {}, nb[kNumKernels + 2] = {}, nc[kNumKernels + 2] = {};
  for (int g = begin; g < end; ++g) {
    const Point& p = kPoints[kGroupPoints[g]];
    const long long dist = dists[g - begin];
    if (dist > dmin + kReach) continue;  // an answer measured only farther does not compete
    const long long db = tie_distance(l, p);
    for (int j = p.costs_begin; j < p.costs_begin + p.costs_count; ++j) {
      const int a = kCostAnswer[j];
      if (a == GENERIC || a < LIBRARY || a >= kNumKernels) continue;
      const int s = a + 2;
      if (!found[s] || dist < nd[s] || (dist == nd[s] && db < nb[s])) { found[s] = true; nd[s] = dist; nb[s] = db; nc[s] = kCost[j]; }
    }
  }
  int best = INVALID;
  long long best_price = 0, best_dist = 0;
  for (int a = LIBRARY; a < kNumKernels; ++a) {
    if (a == GENERIC || !found[a + 2] || !valid(a, d)) continue;
    const long long price = nc[a + 2] * (a == LIBRARY ? 1000 : 1000 + kMarginPermille);
    if (best == INVALID || price < best_price || (price == best_price && nd[a + 2] < best_dist)) {
      best = a; best_price = price; best_dist = nd[a + 2];
    }
  }
  return best == INVALID ? kFallback : best;
}

// Cost mode with kNeighbours >= 2: the answers measured within kReach of the nearest tuned point compete, each
// priced by the mean log2 cost (kCostLog, sum / count) of its kNeighbours nearest measurements (distance, tie
// distance, table order), kernels' raised by kCostLogMargin; the cheapest wins (ties: the library, then index).
constexpr int cheapest_mean(int group, const long long (&d)[kNumSizes], const long long (&l)[kNumSizes]) {
  constexpr int kK = kNeighbours > 1 ? kNeighbours : 1;
  const int begin = kGroupPointBegin[group], end = kGroupPointBegin[group + 1];
  if (begin == end) return kFallback;
  long long dmin = -1;
  long long dists[kNumPoints > 0 ? kNumPoints : 1] = {};
  for (int g = begin; g < end; ++g) {
    const long long dist = dists[g - begin] = distance(l, kPoints[kGroupPoints[g]]);
    if (dmin < 0 || dist < dmin) dmin = dist;
  }
  bool compete[kNumKernels + 2] = {};
  int count[kNumKernels + 2] = {};
  long long kd[kNumKernels + 2][kK] = {}, kb[kNumKernels + 2][kK] = {}, ko[kNumKernels + 2][kK] = {},
            kc[kNumKernels + 2][kK] = {};
  for (int g = begin; g < end; ++g) {
    const Point& p = kPoints[kGroupPoints[g]];
    const long long dist = dists[g - begin], db = tie_distance(l, p), order = g - begin;
    for (int j = p.costs_begin; j < p.costs_begin + p.costs_count; ++j) {
      const int a = kCostAnswer[j];
      if (a == GENERIC || a < LIBRARY || a >= kNumKernels) continue;
      const int s = a + 2;
      if (dist <= dmin + kReach) compete[s] = true;
      // keep the kK nearest measurements of answer a, sorted by (distance, tie distance, order)
      int at = count[s];
      if (at == kK) {
        const int last = kK - 1;
        const bool nearer = dist < kd[s][last] || (dist == kd[s][last] && (db < kb[s][last] || (db == kb[s][last] && order < ko[s][last])));
        if (!nearer) continue;
        at = last;
      } else {
        ++count[s];
      }
      while (at > 0 && (dist < kd[s][at - 1] || (dist == kd[s][at - 1] && (db < kb[s][at - 1] || (db == kb[s][at - 1] && order < ko[s][at - 1]))))) {
        kd[s][at] = kd[s][at - 1]; kb[s][at] = kb[s][at - 1]; ko[s][at] = ko[s][at - 1]; kc[s][at] = kc[s][at - 1];
        --at;
      }
      kd[s][at] = dist; kb[s][at] = db; ko[s][at] = order; kc[s][at] = kCostLog[j];
    }
  }
  int best = INVALID;
  long long best_price = 0;
  for (int a = LIBRARY; a < kNumKernels; ++a) {
    const int s = a + 2;
    if (a == GENERIC || !compete[s] || !valid(a, d)) continue;
    long long sum = 0;
    for (int i = 0; i < count[s]; ++i) sum += kc[s][i];
    const long long price = sum / count[s] + (a == LIBRARY ? 0 : kCostLogMargin);
    if (best == INVALID || price < best_price) { best = a; best_price = price; }
  }
  return best == INVALID ? kFallback : best;
}

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
  for (int g = kGroupPointBegin[group]; g < kGroupPointBegin[group + 1]; ++g) {
    const Point& p = kPoints[kGroupPoints[g]];
    bool same = true;
    for (int j = 0; j < kNumSizes && same; ++j) same = p.dims[j] == d[j];
    if (same) {
      const int kern = first_valid(p, d, true);
      return kern == INVALID ? kFallback : kern;
    }
  }
  for (int i = 0; i < kNumRegions; ++i) {
    const Region& r = kRegions[i];
    if (r.precision != precision || r.shape != shape) continue;
    bool inside = true;
    for (int j = 0; j < kNumTableSizes; ++j)
      inside = inside && r.lo[j] <= d[kTableDims[j]] && d[kTableDims[j]] <= r.hi[j];
    if (inside && valid(r.kernel, d)) return r.kernel;
  }
  if (kModelMode) return predicted(precision, shape, d);
  long long l[kNumSizes] = {};
  for (int j = 0; j < kNumSizes; ++j) l[j] = ilog2_fx(d[j]);
  if (kCostMode) return kNeighbours > 1 ? cheapest_mean(group, d, l) : cheapest(group, d, l);
  int best = INVALID;
  long long best_d = 0, best_b = 0;
  for (int g = kGroupPointBegin[group]; g < kGroupPointBegin[group + 1]; ++g) {
    const Point& p = kPoints[kGroupPoints[g]];
    const long long dist = distance(l, p);
    if (best != INVALID && dist > best_d) continue;  // farther than the best so far: it cannot win
    const int kern = first_valid(p, d);
    if (kern == INVALID) continue;
    const long long db = tie_distance(l, p);
    if (best == INVALID || dist < best_d || (dist == best_d && db < best_b)) {
      best = kern; best_d = dist; best_b = db;
    }
  }
  return best == INVALID ? kFallback : best;
}

"""

_CPP_DEVICE = """\
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


_CPP_CANDIDATES = """\
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

_CPP_REFINE = """
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


def _emit_groups(w, table: DispatchTable, precisions: list, shapes: list) -> None:
    """Per (precision, shape) group (precision * kNumShapes + shape), its points and its kernels, in table order:
    the lookup visits only the problem's group."""
    d = table.data
    groups = [(p, s) for p in precisions for s in shapes]
    for name, items in (("Point", d["points"]), ("Kernel", d["kernels"])):
        order: list[int] = []
        begin: list[int] = []
        for g in groups:
            begin.append(len(order))
            order += [i for i, x in enumerate(items) if (x["precision"], x["shape"]) == g]
        w(
            f"inline constexpr int kGroup{name}s[{max(1, len(order))}] = {{{', '.join(map(str, order or [0]))}}};"
            f"  // {name.lower()} indices by group\n"
        )
        w(
            f"inline constexpr int kGroup{name}Begin[{len(groups) + 1}] = {{{', '.join(map(str, begin + [len(order)]))}}};\n"
        )


def _emit_model(w, table: DispatchTable, names: list, table_sizes: list, precisions: list, shapes: list) -> None:
    """The selection model's arrays (structure mode "model"; zeros and kModelMode false otherwise)."""
    d = table.data
    model = d.get("model") or {}
    st = d.get("structure") or {}
    nf = model_count(len(names), len(table_sizes))
    ntab = max(1, len(table_sizes))
    kernels = d["kernels"]
    per = list(model.get("kernels") or [None] * len(kernels))
    w(
        f"inline constexpr bool kModelMode = {'true' if st.get('mode') == 'model' else 'false'};"
        "  // structure mode: answers off the tuned points by the selection model (rule 4'')\n"
    )
    w(f"inline constexpr int kModelFeatures = {nf};\n")
    w(f"inline constexpr long long kModelAlign = {MODEL_ALIGN};\n")
    w(f"inline constexpr long long kModelSaturate = {_ll(MODEL_SATURATE)};\n")
    w(
        f"inline constexpr long long kModelMargin = {_ll(model_margin(float(st.get('library_margin', 0.0))))};"
        "  // log2(1 + library margin), 32 fractional bits\n"
    )
    w(
        f"inline constexpr bool kModelHas[{max(1, len(kernels))}] = "
        f"{{{', '.join('true' if m else 'false' for m in per) or 'false'}}};\n"
    )
    w(f"inline constexpr long long kModelTiles[{max(1, len(kernels))}][{ntab}] = {{\n")
    for m in per or [None]:
        w(f"  {_arr((m or {}).get('tiles') or [1] * ntab)},\n")
    w("};\n")
    w(f"inline constexpr long long kModelCoef[{max(1, len(kernels))}][{nf}] = {{\n")
    for m in per or [None]:
        w(f"  {_arr((m or {}).get('coef') or [0] * nf)},\n")
    w("};\n")
    groups = [f"{p}:{s}" for p in precisions for s in shapes]
    lib = model.get("library") or {}
    w(
        f"inline constexpr bool kModelLibraryHas[{len(groups)}] = "
        f"{{{', '.join('true' if g in lib else 'false' for g in groups)}}};  // per precision * kNumShapes + shape\n"
    )
    w(f"inline constexpr long long kModelLibrary[{len(groups)}][{nf}] = {{\n")
    for g in groups:
        w(f"  {_arr(lib.get(g) or [0] * nf)},  // {g}\n")
    w("};\n\n")


def runtime_source(name: str = "runtime") -> str:
    """The code of autotune.dispatch.runtime (or onsite: refinement where the application runs), standard library
    only, without its module docstring, its `from __future__` line and its import of runtime: what a generated
    Python module carries."""
    from pathlib import Path

    from autotune.dispatch import onsite, runtime

    text = Path(str({"runtime": runtime, "onsite": onsite}[name].__file__)).read_text()
    head, future, code = text.partition("from __future__ import annotations\n")
    code = re.sub(r"^from autotune\.dispatch\.runtime import [^\n]*\n", "", code, flags=re.M)
    if not future or "\nimport autotune" in code or "\nfrom autotune" in code:
        raise RuntimeError(f"autotune/dispatch/{name}.py must stay standard library only, after its __future__ line")
    return code.strip() + "\n"


def emit_python(table: DispatchTable) -> str:
    """A standalone Python module (the standard library only) with the same answers as the C++ lookup: the table
    as a literal and a copy of the lookup rules of `autotune.dispatch.runtime` (RUNTIME_VERSION), so it runs where
    autotune is not installed; a fix to the rules reaches it when it is written again (`autotune emit`)."""
    prov = table.provenance
    params = size_parameters(table)
    simple = simple_call(table)
    lead = "" if simple else "precision: str, shape: str, "
    sizes = ", ".join(f"{n}: int" for n in params)
    key = f"{table.precisions[0]!r}, ''" if simple else "precision, shape"
    call = ("" if simple else "precision, shape, ") + ", ".join(params)
    head = (
        f'"""Dispatch table generated by `autotune emit --format python`. Do not edit.\n\n'
        f"Problem kind {table.kind!r}, sizes {', '.join(table.size_names)}. Tuned on {prov.get('device')!r}; "
        f"method {prov.get('method')}, BK {prov.get('bk')}, TOL {prov.get('tol')}, "
        f"{prov.get('kernels')} kernels, worst loss {prov.get('worst_loss')}.\n"
        f"Use: lookup({call}, device=None) -> kernel record ({{'library': name, ...}}: call the library;\n"
        "generic=True: the generic kernel; none=True: nothing in the table may serve it);\n"
        f"lookup_index({call}, device=None) -> int (-1 generic, -2 library, -4 none).\n"
        "Invalid input (unknown precision or shape, sizes that are not integers in 1..2**31-1) raises ValueError.\n"
        "refiner(top=3).index(precision, shape, sizes, run) -> int: the same, refined at a problem's first call by\n"
        "timing the candidates with run(answer) in the caller's stream (CUDA events, CuPy); off unless used.\n"
        "Standalone: the Python standard library only. The lookup rules below are a copy of\n"
        f"autotune.dispatch.runtime (RUNTIME_VERSION {RUNTIME_VERSION}); write the module again to take a newer one.\n"
        '"""\n'
        "from __future__ import annotations\n\n"
        "# ---- the lookup rules: a copy of autotune/dispatch/runtime.py ----\n"
    )
    onsite = (
        "\n\n# ---- refinement where the application runs: a copy of autotune/dispatch/onsite.py ----\n"
        + runtime_source("onsite")
    )
    tail = (
        "\n\n# ---- the table ----\n"
        f"TABLE = {pprint.pformat(table.data, width=110, sort_dicts=False)}\n\n"
        "_LOOKUP = Lookup(TABLE)\n"
        "KERNELS = TABLE['kernels']\n"
        "TUNED_DEVICE = TABLE['provenance']['device']\n\n\n"
        f"def lookup_index({lead}{sizes}, device: str | None = None) -> int:\n"
        '    """Index into KERNELS, GENERIC (-1), LIBRARY (-2) or NONE (-4); warns when `device` is not TUNED_DEVICE."""\n'
        "    _LOOKUP.check_device(device)\n"
        f"    return _LOOKUP.index({key}, ({', '.join(params)},))\n\n\n"
        f"def lookup({lead}{sizes}, device: str | None = None) -> dict:\n"
        '    """The kernel record (instance_id, name, template, ...); library=NAME: call the library."""\n'
        f"    return _LOOKUP.kernel(lookup_index({call}, device=device), {key})\n\n\n"
        "def refiner(top: int = 3, reps: int = 3, library: bool = True, timer: EventTimer = cupy_events) -> Refiner:\n"
        '    """Refinement at each problem\'s first call (off unless used): refiner().index(precision, shape, sizes, run)\n'
        '    times the candidates with `run(answer)` in the caller\'s stream (CUDA events; CuPy) and caches the choice."""\n'
        "    return Refiner(_LOOKUP, top=top, reps=reps, library=library, timer=timer)\n"
    )
    return head + runtime_source() + onsite + tail


def csv_columns(table: DispatchTable) -> tuple[str, ...]:
    """precision, shape, the kind's sizes, kernel, instance_id, name, template, ms, best_ms, loss."""
    return (
        "precision",
        "shape",
        *table.size_names,
        "kernel",
        "instance_id",
        "name",
        "template",
        "ms",
        "best_ms",
        "loss",
    )


def emit_csv(table: DispatchTable) -> str:
    """One row per tuned point: the assigned kernel and its measured time and loss."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(csv_columns(table))
    kernels = table.data["kernels"]
    num = lambda x: "" if x is None else f"{x:.6g}"  # noqa: E731
    library = table.library or "library"
    for p in table.data["points"]:
        k = kernels[p["kernel"]] if p["kernel"] >= 0 else {"instance_id": library}
        writer.writerow(
            [
                p["precision"],
                p["shape"],
                *(p["sizes"][n] for n in table.size_names),
                p["kernel"],
                k["instance_id"],
                k.get("name") or "",
                k.get("template") or "",
                num(p["ms"]),
                num(p["best_ms"]),
                num(p["loss"]),
            ]
        )
    return buf.getvalue()
