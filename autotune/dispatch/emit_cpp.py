"""The C++ header generated from the canonical dispatch JSON (`autotune emit --format cpp`).

The header holds data tables and a constexpr lookup implementing dispatch_runtime's rules with
integers only, for any problem kind (its sizes, table sizes, precisions and shapes come from the table),
plus (in one translation unit that defines AUTOTUNE_DISPATCH_INSTANTIATE, compiled by nvcc) explicit
instantiations of the template kernels whose C++ parameter lists the table records. A kernel tuned by
preprocessor defines is named by its source, function and `-D` flags (kKernelDefines): compile one copy per
kernel. Kernel sources are named relative to an include directory (`#include "name.cu"`; the header says
which -I to pass). No CUDA code is generated. The C++ code after the tables is in `autotune.dispatch.cpp_text`.
"""

from __future__ import annotations

import io
import json
import keyword
import re
from collections import Counter
from itertools import pairwise
from typing import Callable

from autotune.dispatch import cpp_index, cpp_text, cpp_walk
from autotune.dispatch.table import DispatchTable
from autotune.dispatch.features import MODEL_ALIGN, MODEL_SATURATE, cost_log_margin, ilog2_fx, model_count, model_margin
from autotune.dispatch.runtime import (
    FALLBACKS,
    GENERIC,
    INVALID,
    LIBRARY,
    MAX_SIZE,
    NO_LIMIT,
    NONE,
    parse_steps,
    step_class,
    validity_bounds,
)

LANES = 8  # the distance loops read kLanes tuned points at a time (kGroupLogs is padded by as many)
INVALID_LIMIT = 1024  # invalid_kernels tabulates each size up to twice its largest tuned value, at most this

# the lookup's own names and C++ keywords: sizes named so are passed as size0, size1, ...
CPP_RESERVED = set(
    "precision shape d l i j p device auto int long double float char bool const return register new delete class "
    "this template namespace operator default case switch union signed unsigned short".split()
)


def _c_string(text: str | None) -> str:
    return json.dumps(text or "")  # a JSON string literal is a valid C string literal for ASCII names


def _ll(value: int) -> str:
    return f"{int(value)}LL"


def _arr(values) -> str:
    return "{" + ", ".join(_ll(x) for x in values) + "}"


def _bool(value: object) -> str:
    return "true" if value else "false"


def _decl(ctype: str, name: str, values, empty: str = "0") -> str:
    """`inline constexpr CTYPE NAME[n] = {values};` (`{EMPTY}` of size 1 where there are none), without a newline."""
    items = [str(x) for x in values]
    return f"inline constexpr {ctype} {name}[{max(1, len(items))}] = {{{', '.join(items) or empty}}};"


def _records(struct: str, name: str, rows: list[str], empty: str) -> str:
    """`inline constexpr STRUCT NAME[n] = {...};`, one row a line (`empty` where there are none)."""
    return (
        f"inline constexpr {struct} {name}[{max(1, len(rows))}] = {{\n"
        + "".join(f"  {r}\n" for r in rows or [empty])
        + "};\n"
    )


def _by_group(items: list[dict], table: DispatchTable) -> tuple[list[int], list[int]]:
    """The indices of `items` (points, kernels or regions) by (precision, shape) group, in table order, and where
    each group begins (then the end)."""
    order: list[int] = []
    begin: list[int] = []
    for g in [(p, s) for p in table.precisions for s in table.shapes]:
        begin.append(len(order))
        order += [i for i, x in enumerate(items) if (x["precision"], x["shape"]) == g]
    return order, begin + [len(order)]


def _dims(table: DispatchTable) -> tuple[list[int], list[int]]:
    """The positions of the table sizes and of the tie sizes among the sizes."""
    names = list(table.size_names)
    near = [names.index(n) for n in table.table_sizes]
    return near, [i for i in range(len(names)) if i not in near]


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
    out = io.StringIO()
    w = out.write
    _emit_header(w, table)
    w(f"namespace {namespace} {{\n\n")
    _emit_constants(w, table)
    _emit_kernels(w, table)
    ranked, near_list, costs = _emit_points(w, table)
    _emit_groups(w, table)
    _emit_group_points(w, table)
    _emit_answers(w, table, ranked, near_list, costs)
    _emit_model(w, table)
    _emit_regions(w, table)
    cpp_index.emit_index(w, table)
    _emit_lookup(w, table)
    w(cpp_text.DEVICE)
    w(cpp_text.CANDIDATES)
    w(f"}}  // namespace {namespace}\n")
    w(cpp_text.REFINE.replace("NAMESPACE", namespace))
    _emit_instantiations(w, table)
    return out.getvalue()


def _emit_header(w: Callable[[str], object], table: DispatchTable) -> None:
    """The header's opening comments: where it came from, the lookup's rules and answers, the include directory."""
    prov = table.data["provenance"]
    names, table_sizes = list(table.size_names), list(table.table_sizes)
    library = table.library
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


def _emit_constants(w: Callable[[str], object], table: DispatchTable) -> None:
    """The scalar constants (kind, device, answers, fallback, sizes), the precision and shape enums and the structs."""
    d = table.data
    prov = d["provenance"]
    names, precisions, shapes = list(table.size_names), list(table.precisions), list(table.shapes)
    nsz, ntab = len(names), len(table.table_sizes)
    near, tie = _dims(table)
    library = table.library
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
    w(_decl("int", "kTableDims", near) + "\n" + _decl("int", "kTieDims", tie) + "\n")
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


def _emit_kernels(w: Callable[[str], object], table: DispatchTable) -> None:
    """kKernels: each kernel's names, source, defines, group and validity bounds."""
    kernels, names = table.data["kernels"], list(table.size_names)
    precisions, shapes, nsz = list(table.precisions), list(table.shapes), len(names)
    w(f"inline constexpr int kNumKernels = {len(kernels)};\n")
    w("// defines: the -D flags of a kernel tuned by preprocessor defines (empty for a template kernel)\n")
    bounds = [validity_bounds(k.get("valid", []), names) for k in kernels]
    records = []
    for k, (mult, lo, hi) in zip(kernels, bounds, strict=True):
        defines = " ".join(f"-D{n}={v}" for n, v in (k.get("defines") or {}).items())
        records.append(
            f"{{{_c_string(k['instance_id'])}, {_c_string(k.get('name'))}, {_c_string(k.get('template'))}, "
            f"{_c_string(k.get('source'))}, {_c_string(defines)}, {precisions.index(k['precision'])}, "
            f"{shapes.index(k['shape'])}, {_arr(mult)}, {_arr(lo)}, {_arr(hi)}, {_bool(k.get('tuned_only'))}}},"
        )
    empty = f'{{"", "", "", "", "", 0, 0, {_arr([1] * nsz)}, {_arr([1] * nsz)}, {_arr([0] * nsz)}, false}},'
    w(_records("Kernel", "kKernels", records, empty))
    # invalid_kernels: per size some kernel constrains, the kernels invalid at each value up to twice the largest tuned
    # one (at most INVALID_LIMIT), as bits
    words = max(1, -(-len(kernels) // 64))
    limit, begin, rows = [-1] * nsz, [0] * nsz, list[list[int]]()
    for j in range(nsz):
        if any(m[j] != 1 or lo[j] > 1 or hi[j] < MAX_SIZE for m, lo, hi in bounds):
            limit[j] = min(INVALID_LIMIT, 2 * max((int(p["sizes"][names[j]]) for p in table.data["points"]), default=0))
            begin[j] = len(rows)
            for v in range(limit[j] + 1):
                bad = sum(1 << i for i, (m, lo, hi) in enumerate(bounds) if v % m[j] or not lo[j] <= v <= hi[j])
                rows.append([bad >> 64 * x & (1 << 64) - 1 for x in range(words)])
    always = sum(1 << i for i, k in enumerate(kernels) if k.get("tuned_only"))
    row = lambda r: "{" + ", ".join(f"{x}ULL" for x in r) + "}"  # noqa: E731
    w(
        f"inline constexpr int kInvalidWords = {words};  // invalid_kernels: 64 kernels a word\n"
        f"inline constexpr unsigned long long kAlwaysInvalid[{words}] = {row([always >> 64 * x & (1 << 64) - 1 for x in range(words)])};"
        "  // tuned_only\n"
        f"inline constexpr long long kInvalidLimit[{nsz}] = {_arr(limit)};  // -1: no kernel constrains the size\n"
        f"inline constexpr int kInvalidBegin[{nsz}] = {_arr(begin)};\n"
        f"inline constexpr unsigned long long kInvalidTab[{max(1, len(rows))}][{words}] = "
        f"{{{', '.join(map(row, rows)) or row([0] * words)}}};\n\n"
    )


def _emit_points(w: Callable[[str], object], table: DispatchTable) -> tuple[list[int], list[int], list[list[int]]]:
    """kPoints: each tuned point's group, sizes, their logs and its spans of the ranked, near and cost lists;
    returns those lists."""
    points, names = table.data["points"], list(table.size_names)
    precisions, shapes, nsz = list(table.precisions), list(table.shapes), len(names)
    ranked: list[int] = []
    near_list: list[int] = []
    costs: list[list[int]] = []
    rows = []
    for p in points:
        rows.append(
            f"{{{precisions.index(p['precision'])}, {shapes.index(p['shape'])}, "
            f"{_arr(p['sizes'][n] for n in names)}, {_arr(ilog2_fx(int(p['sizes'][n])) for n in names)}, "
            f"{len(ranked)}, {len(p['ranked'])}, "
            f"{len(near_list)}, {len(p.get('near', p['ranked']))}, {len(costs)}, {len(p.get('costs', []))}}},"
            f"  // {p['point_key']}"
        )
        ranked += p["ranked"]
        near_list += p.get("near", p["ranked"])
        costs += p.get("costs", [])
    w(f"inline constexpr int kNumPoints = {len(points)};\n")
    w(_records("Point", "kPoints", rows, f"{{-1, -1, {_arr([0] * nsz)}, {_arr([0] * nsz)}, 0, 0, 0, 0, 0, 0}},"))
    return ranked, near_list, costs


def _emit_answers(
    w: Callable[[str], object], table: DispatchTable, ranked: list[int], near_list: list[int], costs: list[list[int]]
) -> None:
    """The tuned points' ranked, near and cost lists, and the structure's cost-mode constants."""
    d = table.data
    w(_decl("int", "kRanked", ranked) + "\n" + _decl("int", "kNear", near_list) + "\n")
    w(_decl("int", "kCostAnswer", (int(a) for a, _ in costs)) + "\n")
    w(_decl("long long", "kCost", (_ll(int(c)) for _, c in costs)) + "\n")
    st = d.get("structure") or {}
    w(
        f"inline constexpr bool kCostMode = {_bool(st.get('mode') == 'cost')};"
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
    _emit_steps(w, table, [str(x) for x in st.get("library_steps", [])])


def _emit_steps(w: Callable[[str], object], table: DispatchTable, texts: list[str]) -> None:
    """The structure's library steps (rule 4', `runtime.parse_steps`): per step its operator, value and sizes, and
    per tuned point its step class (`runtime.step_class`, bit i where step i holds; the problem's is computed by the
    header's `step_class`)."""
    names, points = list(table.size_names), table.data["points"]
    steps = parse_steps(texts, names)
    if len(steps) > 64:
        raise ValueError(f"the C++ header takes at most 64 library steps (a class is 64 bits), not {len(steps)}")
    ops = {"%": 0, "<=": 1, "<": 2}
    on = [[d in where for d in range(len(names))] for _, where, _ in steps] or [[False] * len(names)]
    w(
        f"inline constexpr int kNumSteps = {len(steps)};  // library steps: {json.dumps(texts)}\n"
        + _decl("int", "kStepOp", (ops[o] for o, _, _ in steps))
        + "  // 0: every size of kStepOn a multiple of kStepValue; 1: the size <= kStepValue; 2: the size < kStepValue\n"
        + _decl("long long", "kStepValue", (_ll(v) for _, _, v in steps), "1LL")
        + f"\ninline constexpr bool kStepOn[{max(1, len(steps))}][{len(names)}] = {{"
        + ", ".join("{" + ", ".join(map(_bool, row)) + "}" for row in on)
        + "};  // per step, the sizes it reads\n"
    )
    classes = [step_class(steps, [int(p["sizes"][n]) for n in names]) for p in points]
    w(_decl("unsigned long long", "kPointClass", (f"{c}ULL" for c in classes), "0ULL"))
    w("  // per point (table order), its step class\n")
    # per group: the library's measurements per step class (cheapest_walk prices the library from those of the
    # problem's class where it has any)
    measured = [any(int(a) == LIBRARY for a, _ in p.get("costs", [])) for p in points]
    order, bounds = _by_group(points, table)
    library = [sorted(Counter(classes[i] for i in order[a:b] if measured[i]).items()) for a, b in pairwise(bounds)]
    flat = [c for per in library for c in per]
    begin = [sum(len(per) for per in library[:i]) for i in range(len(library) + 1)]
    w(_decl("unsigned long long", "kLibraryClass", (f"{c}ULL" for c, _ in flat), "0ULL"))
    w("  // per group, the step classes the library was measured in\n")
    w(_decl("int", "kLibraryClassCount", (n for _, n in flat)) + "  // and how many times\n")
    w(_decl("int", "kLibraryClassBegin", begin) + "\n\n")


def _emit_regions(w: Callable[[str], object], table: DispatchTable) -> None:
    """kRegions: each merged region's group, bounds over the table sizes and kernel."""
    regions, table_sizes = table.data["regions"], list(table.table_sizes)
    precisions, shapes, ntab = list(table.precisions), list(table.shapes), len(table_sizes)
    rows = [
        f"{{{precisions.index(r['precision'])}, {shapes.index(r['shape'])}, "
        f"{_arr(r['bounds'][n][0] for n in table_sizes)}, {_arr(r['bounds'][n][1] for n in table_sizes)}, "
        f"{int(r['kernel'])}}},"
        for r in regions
    ]
    w(f"inline constexpr int kNumRegions = {len(regions)};\n")
    w(_records("Region", "kRegions", rows, f"{{-1, -1, {_arr([0] * ntab)}, {_arr([0] * ntab)}, -1}},") + "\n")


def _emit_lookup(w: Callable[[str], object], table: DispatchTable) -> None:
    """The lookup code and its `lookup` entry points (the sizes alone where `simple_call`)."""
    params, precisions = size_parameters(table), list(table.precisions)
    w(cpp_text.LOOKUP.replace("NO_LIMIT", _ll(NO_LIMIT)) + cpp_walk.COST + cpp_text.LOOKUP_END)
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


def _emit_instantiations(w: Callable[[str], object], table: DispatchTable) -> None:
    """The explicit instantiations of the template kernels, where the table has any."""
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


def _emit_groups(w: Callable[[str], object], table: DispatchTable) -> None:
    """Per (precision, shape) group (precision * kNumShapes + shape), its points and its kernels, in table order:
    the lookup visits only the problem's group."""
    for name, items in (("Point", table.data["points"]), ("Kernel", table.data["kernels"])):
        order, begin = _by_group(items, table)
        w(_decl("int", f"kGroup{name}s", order) + f"  // {name.lower()} indices by group\n")
        w(_decl("int", f"kGroup{name}Begin", begin) + "\n")


def _emit_model(w: Callable[[str], object], table: DispatchTable) -> None:
    """The selection model's arrays (structure mode "model"; zeros and kModelMode false otherwise)."""
    d = table.data
    model = d.get("model") or {}
    st = d.get("structure") or {}
    nf = model_count(len(table.size_names), len(table.table_sizes))
    ntab = max(1, len(table.table_sizes))
    kernels = d["kernels"]
    per = list(model.get("kernels") or [None] * len(kernels))
    w(
        f"inline constexpr bool kModelMode = {_bool(st.get('mode') == 'model')};"
        "  // structure mode: answers off the tuned points by the selection model (rule 4'')\n"
    )
    w(f"inline constexpr int kModelFeatures = {nf};\n")
    w(f"inline constexpr long long kModelAlign = {MODEL_ALIGN};\n")
    w(f"inline constexpr long long kModelSaturate = {_ll(MODEL_SATURATE)};\n")
    w(
        f"inline constexpr long long kModelMargin = {_ll(model_margin(float(st.get('library_margin', 0.0))))};"
        "  // log2(1 + library margin), 32 fractional bits\n"
    )
    w(f"inline constexpr bool kModelHas[{max(1, len(kernels))}] = {{{', '.join(map(_bool, per)) or 'false'}}};\n")
    for name, key, blank in (("kModelTiles", "tiles", [1] * ntab), ("kModelCoef", "coef", [0] * nf)):
        w(f"inline constexpr long long {name}[{max(1, len(kernels))}][{len(blank)}] = {{\n")
        for m in per or [None]:
            w(f"  {_arr((m or {}).get(key) or blank)},\n")
        w("};\n")
    groups = [f"{p}:{s}" for p in table.precisions for s in table.shapes]
    lib = model.get("library") or {}
    w(
        f"inline constexpr bool kModelLibraryHas[{len(groups)}] = "
        f"{{{', '.join(_bool(g in lib) for g in groups)}}};  // per precision * kNumShapes + shape\n"
    )
    w(f"inline constexpr long long kModelLibrary[{len(groups)}][{nf}] = {{\n")
    for g in groups:
        w(f"  {_arr(lib.get(g) or [0] * nf)},  // {g}\n")
    w("};\n\n")


def _emit_group_points(w: Callable[[str], object], table: DispatchTable) -> None:
    """The tuned points' logs by size in group order (kGroupPoints: position g), contiguous for the distance loops,
    and a hash table of the positions by group and sizes (the exact point, rule 2)."""
    d = table.data
    names = list(table.size_names)
    near, tie = _dims(table)
    order, begin = _by_group(d["points"], table)
    groups = [k for k, (a, b) in enumerate(pairwise(begin)) for _ in range(a, b)]  # per group position
    logs = [[ilog2_fx(int(p["sizes"][n])) for n in names] for p in (d["points"][i] for i in order)]
    for name, dims_of, what in (("kGroupLogs", near, "table"), ("kGroupTieLogs", tie, "tie")):
        pad = LANES if name == "kGroupLogs" else 0  # the distance loop reads kLanes points at a time
        rows = [", ".join([*(str(row[j]) for row in logs), *["0"] * pad]) or "0" for j in dims_of] or ["0"]
        w(
            f"inline constexpr int {name}[{max(1, len(dims_of))}][{max(1, len(order) + pad)}] = "
            + ("{" + ", ".join("{" + r + "}" for r in rows) + "};")
            + f"  // per {what} size, ilog2_fx of the sizes of point kGroupPoints[g]\n"
        )
    w(f"inline constexpr int kLanes = {LANES};  // kGroupLogs has kLanes entries past the last point\n")
    bits, slots = _exact_slots(groups, [[int(d["points"][i]["sizes"][n]) for n in names] for i in order])
    w(
        f"inline constexpr int kExactBits = {bits};\n"
        f"inline constexpr int kExactSlot[{len(slots)}] = {{{','.join(map(str, slots))}}};"
        "  // the tuned points' group positions by exact_hash of their group and sizes (-1: none)\n"
    )
    regions, begin = _by_group(d["regions"], table)
    w(_decl("int", "kGroupRegions", regions) + "  // region indices by group, in table order\n")
    w(_decl("int", "kGroupRegionBegin", begin) + "\n\n")


def _exact_slots(groups: list[int], dims: list[list[int]]) -> tuple[int, list[int]]:
    """The header's exact_point table: 2**bits slots (at least twice the points), each group position g at
    exact_hash(group, sizes) or the next free slot (the first in table order of equal sizes), -1 where none."""
    bits = max(3, (2 * len(dims)).bit_length())
    slots, seen, mask = [-1] * (1 << bits), set(), (1 << 64) - 1
    for g, (group, sizes) in enumerate(zip(groups, dims, strict=True)):
        if (group, *sizes) in seen:
            continue
        seen.add((group, *sizes))
        h = group * 0x9E3779B97F4A7C15 & mask
        for x in sizes:
            h = (h ^ x) * 0xBF58476D1CE4E5B9 & mask
        h >>= 64 - bits
        while slots[h] >= 0:
            h = (h + 1) % len(slots)
        slots[h] = g
    return bits, slots
