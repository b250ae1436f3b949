"""Generated consumers: the Python module and the C++ header (g++ and nvcc) answer exactly like the table."""

from __future__ import annotations

import csv
import importlib.util
import io
import itertools
import shutil
import subprocess
import warnings
from pathlib import Path

import numpy as np
import pytest

from autotune import paths
from autotune.dispatch.table import Answers, GenericKernel, KernelInfo, Provenance, Structure, build_table
from autotune.dispatch.emit import csv_columns, emit_cpp, emit_csv, emit_python, instantiation
from autotune.problems.registry import BUILT_IN
from autotune.analysis.setcover import select
from autotune.analysis.winners import Criteria, perf_matrix, winners
from autotune.problems.gemm.synthetic import synthetic_measurements

KIND = "gemm"  # the built-in kind the synthetic measurements imitate
SIZES = [(m, n, k) for m in (2, 8, 32, 128) for n in (4, 32, 96) for k in (8, 64)]
GRID = [1, 2, 3, 5, 7, 8, 12, 17, 24, 31, 33, 48, 64, 65, 100, 127, 128, 200, 513]
NAIVE = [(bx, by) for bx in (4, 8, 16, 32) for by in (1, 2, 4, 8, 16) if 32 <= bx * by <= 512 and bx * by % 32 == 0]
PREDICATES = [(), (("m_multiple_of", 4),), (("max_k", 64),), (("n_multiple_of", 8), ("min_batch", 2))]


@pytest.fixture(
    scope="module",
    params=[
        Structure(),
        Structure("nearest", 0.1),
        Structure("cost", 0.05, 1.0),
        Structure("cost", 0.0, 0.5),
        Structure("cost", 0.0, 2.0, 3),  # neighbours (K = 2 is tests/test_tables6_neighbours.py's)
    ],
    ids=lambda s: f"{s.mode}-{s.library_margin}-{s.reach}" + (f"-k{s.neighbours}" if s.neighbours != 1 else ""),
)
def table(request):
    from autotune.space.spec import load_space

    kind = BUILT_IN[KIND]
    naive = load_space(kind.generic_space)
    df = synthetic_measurements(120, SIZES, precisions=("fp64", "fp16"), shapes=("NN", "TN"), batch=500, seed=21)
    w = winners(perf_matrix(df), Criteria(bk=8, tol=0.05))
    sel = select(w, "exact")
    info = {}
    for j, (iid, precision, shape) in enumerate(sel.kernels):
        bx, by = NAIVE[j % len(NAIVE)]
        info[(iid, precision, shape)] = KernelInfo(
            space=naive.name,
            name=f"syn_{iid}",
            source="gemm_naive.cuh",
            convention="strided",
            template=naive.template_name({"BLOCK_X": bx, "BLOCK_Y": by}, precision, shape),
            valid=PREDICATES[j % len(PREDICATES)],
            parameters=kind.cpp_parameters("strided", precision),
        )
    keys = [(p, s) for p in kind.precisions for s in kind.shapes]
    generic = GenericKernel(
        space=naive.name,
        source="gemm_naive.cuh",
        convention="strided",
        templates=tuple((f"{p}:{s}", naive.template_name({"BLOCK_X": 32, "BLOCK_Y": 4}, p, s)) for p, s in keys),
        parameters=tuple((f"{p}:{s}", kind.cpp_parameters("strided", p)) for p, s in keys),
    )
    # the library: faster than every instance at a third of the points, measured at all but a few
    lib = np.nanmin(w.matrix.median, axis=1) * np.where(np.arange(len(w.best_ms)) % 3 == 0, 0.8, 1.3)
    lib[::7] = np.nan
    return build_table(
        w,
        sel,
        Provenance(device="NVIDIA H100 80GB HBM3"),
        Answers(info, lib, "naive", generic),
        structure=request.param,
    )


def queries(table) -> list[tuple[str, str, int, int, int, int]]:
    tuned = [(p["precision"], p["shape"], *p["sizes"].values()) for p in table.data["points"]]
    dense = [
        (p, s, m, n, k, b)
        for p, s in [("fp64", "NN"), ("fp16", "TN"), ("fp32", "NN"), ("fp64", "TT")]
        for m, n, k in itertools.product(GRID, GRID[::2], GRID[::3])
        for b in (1, 500)
    ]
    return tuned + dense


def expected(table) -> list[int]:
    return [table.lookup_index(*q) for q in queries(table)]


def test_python_module_matches_the_table(table, tmp_path):
    path = tmp_path / "dispatch_gen.py"
    path.write_text(emit_python(table))
    spec = importlib.util.spec_from_file_location("dispatch_gen", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    got = [mod.lookup_index(*q) for q in queries(table)]
    assert got == expected(table)
    assert len(set(got)) > 3 and -1 in got and -2 in got  # several kernels, the library and the naive fallback
    p = table.data["points"][0]
    assert mod.lookup(p["precision"], p["shape"], *p["sizes"].values())["template"].startswith("autotune::gemm_naive<")
    with pytest.warns(UserWarning, match="tuned on"):
        mod.lookup_index("fp64", "NN", 8, 8, 8, 1, device="Tesla V100")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        mod.lookup_index("fp64", "NN", 8, 8, 8, 1, device="NVIDIA H100 80GB HBM3")


def test_csv_has_one_row_per_tuned_point(table):
    rows = list(csv.reader(io.StringIO(emit_csv(table))))
    assert tuple(rows[0]) == csv_columns(table) and rows[0][2:6] == ["m", "n", "k", "batch"]
    assert len(rows) - 1 == len(table.data["points"])
    kernels = table.data["kernels"]
    assert all(r[7] == kernels[int(r[6])]["instance_id"] for r in rows[1:])


def test_instantiation_uses_the_calling_convention():
    kind = BUILT_IN[KIND]
    line = instantiation("autotune::k<__half, float, 0, 1, 8>", kind.cpp_parameters("ptr_array", "fp16"))
    assert line == (
        "template __global__ void autotune::k<__half, float, 0, 1, 8>(int, int, int, float, "
        "const __half* const*, int, const __half* const*, int, float, __half* const*, int, int);"
    )
    assert kind.cpp_parameters("weird", "fp64") is None
    with pytest.raises(ValueError, match="parameter list"):
        instantiation("autotune::k<double>", None)


def _driver(table, tmp_path, suffix: str) -> str:
    """A host program: static_asserts (constexpr) at a few tuned points, then lookups read from stdin."""
    asserts = []
    for p in table.data["points"][:5]:
        args = (table.precisions.index(p["precision"]), table.shapes.index(p["shape"]), *p["sizes"].values())
        want = table.lookup_index(p["precision"], p["shape"], *p["sizes"].values())
        asserts.append(f'static_assert(autotune_dispatch::lookup({", ".join(map(str, args))}) == {want}, "");')
    src = tmp_path / f"main{suffix}"
    src.write_text(
        '#define AUTOTUNE_DISPATCH_INSTANTIATE\n#include "dispatch.cuh"\n#include <cstdio>\n'
        + "\n".join(asserts)
        + "\nint main() {\n  int p, s; long long m, n, k, b;\n"
        '  while (std::scanf("%d %d %lld %lld %lld %lld", &p, &s, &m, &n, &k, &b) == 6)\n'
        '    std::printf("%d\\n", autotune_dispatch::lookup(p, s, m, n, k, b));\n'
        '  return autotune_dispatch::same_device("nvidia h100 80gb hbm3") ? 0 : 3;\n}\n'
    )
    return str(src)


def _run(binary: str, table) -> list[int]:
    stdin = "\n".join(
        f"{table.precisions.index(p)} {table.shapes.index(s)} {m} {n} {k} {b}" for p, s, m, n, k, b in queries(table)
    )
    res = subprocess.run([binary], input=stdin, capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    return [int(x) for x in res.stdout.split()]


@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ not found")
def test_cpp_lookup_matches_python_host_only(table, tmp_path):
    (tmp_path / "dispatch.cuh").write_text(emit_cpp(table))
    exe = str(tmp_path / "lookup_gxx")
    res = subprocess.run(
        ["g++", "-std=c++17", "-O1", "-Wall", "-Werror", "-o", exe, _driver(table, tmp_path, ".cpp")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 0, res.stderr
    assert _run(exe, table) == expected(table)


# three structures: the header's code is the same text whatever the structure (its constant arrays and numbers differ:
# the mode, the margin, the reach, the regions, the cost index), and the host-only test above checks every structure's
# answers with g++; these compile it with nvcc next to the kernels it instantiates, as regions, as cost mode with a
# library margin and with neighbours (its index arrays filled); nearest and cost-0.0-0.5 differ from them in numbers
@pytest.mark.nvcc
@pytest.mark.parametrize(
    "table",
    [Structure(), Structure("cost", 0.05, 1.0), Structure("cost", 0.0, 2.0, 3)],
    indirect=True,
    ids=["regions-0.0-1.0", "cost-0.05-1.0", "cost-0.0-2.0-k3"],
)
def test_header_compiles_with_the_kernels_and_agrees(table, tmp_path):
    header = emit_cpp(table)
    n_inst = header.count("template __global__ void")
    assert n_inst >= len(table.precisions) * len(table.shapes)  # the generic kernel for every precision and shape
    (tmp_path / "dispatch.cuh").write_text(header)
    exe = str(tmp_path / "lookup_nvcc")
    res = subprocess.run(
        ["nvcc", "-std=c++17", "-arch=sm_90", f"-I{paths.KERNELS_DIR}", "-o", exe, _driver(table, tmp_path, ".cu")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert res.returncode == 0, res.stderr
    symbols = (
        subprocess.run(["cuobjdump", "-symbols", exe], capture_output=True, text=True)
        if shutil.which("cuobjdump")
        else None
    )
    if symbols is not None and symbols.returncode == 0:
        assert symbols.stdout.count("gemm_naive") >= n_inst
    assert _run(exe, table) == expected(table)


# one structure: write_report draws the same plots whatever the structure (it changes only the tuned points' losses,
# the heights of one bar chart), and the summary, the roofline and the TOL table checked here do not read the table
@pytest.mark.parametrize("table", [Structure("nearest", 0.1)], indirect=True, ids=["nearest-0.1-1.0"])
def test_report_summary_and_files(table, tmp_path):
    import pandas as pd

    from autotune.dispatch.loo import tol_table
    from autotune.dispatch.report import roofline_ms, summary_columns, summary_frame, write_report

    matrix = perf_matrix(
        synthetic_measurements(120, SIZES, precisions=("fp64", "fp16"), shapes=("NN", "TN"), batch=500, seed=21)
    )
    pts = pd.DataFrame(table.data["points"])
    best_ms = np.nanmin(matrix.median, axis=1)
    cublas = matrix.points[["precision", "shape", "m", "n", "k", "batch"]].assign(median_ms=best_ms * 2.0)
    summary = summary_frame(matrix, cublas, bandwidth=3.0e12)
    assert tuple(summary.columns) == summary_columns(matrix.layout) and len(summary) == len(pts)
    assert (summary["speedup_vs_cublas"] - 2.0).abs().max() < 1e-12
    # the summary names the best verified instance at each point (the table may serve it with another)
    assert (summary["ms"].to_numpy() == best_ms).all()
    assert all(
        matrix.median[i, list(matrix.instances).index(iid)] == best_ms[i] for i, iid in enumerate(summary["instance"])
    )
    row = summary.iloc[0]
    moved = (
        row["batch"]
        * {"fp64": 8, "fp16": 2}[row["precision"]]
        * (row["m"] * row["k"] + row["k"] * row["n"] + row["m"] * row["n"])
    )
    assert row["roofline_frac"] == pytest.approx(moved / 3.0e12 * 1e3 / row["ms"])
    layout = matrix.layout
    assert (
        roofline_ms(summary.iloc[:1], 3.0e12, layout, {"beta": 1.0})[0]
        > roofline_ms(summary.iloc[:1], 3.0e12, layout, {"beta": 0.0})[0]
    )
    df = synthetic_measurements(40, SIZES[:6], seed=4)
    frame = tol_table(perf_matrix(df), [10], [0.0, 0.1], loo=None)
    written = write_report(tmp_path, table, matrix, frame, cublas, 3.0e12, {})
    assert {p.name for p in written} >= {
        "summary.csv",
        "tol_table.csv",
        "kernels_vs_tol.png",
        "perf_vs_size.png",
        "loss_per_point.png",
    }
    assert (tmp_path / "tol_table.csv").read_text().splitlines()[
        0
    ] == "method,bk,tol,kernels,worst_loss,mean_loss,loo_worst_loss,loo_measured,loo_structure"
    assert all(p.stat().st_size > 0 for p in written)


def test_cli_emit_from_a_measurements_csv(tmp_path):
    import typer
    from typer.testing import CliRunner

    from autotune.cli import analyze as analyze_cli

    df = synthetic_measurements(60, SIZES[:8], seed=6)
    df.to_csv(tmp_path / "m.csv", index=False)
    app = typer.Typer()
    analyze_cli.register(app)
    runner = CliRunner()
    res = runner.invoke(
        app, ["emit", str(tmp_path / "m.csv"), "--format", "json", "-o", str(tmp_path / "d.json"), "--tol", "0.1"]
    )
    assert res.exit_code == 0, res.output
    res = runner.invoke(app, ["emit", str(tmp_path / "d.json"), "--format", "python", "-o", str(tmp_path / "d.py")])
    assert res.exit_code == 0, res.output
    assert "def lookup_index" in (tmp_path / "d.py").read_text()
    res = runner.invoke(app, ["analyze", str(tmp_path / "m.csv"), "--tols", "0,0.1", "--no-loo"])
    assert res.exit_code == 0 and "exact" in res.output


EXAMPLES = [("stencil", "stencil_h100"), ("transpose", "transpose_h100"), ("softmax", "softmax_h100")]


@pytest.fixture(scope="module", params=EXAMPLES, ids=lambda e: e[0])
def example_table(request):
    """The dispatch table of an example's committed database (a kind other than the built-in one)."""
    from autotune import load_results
    from autotune.dispatch.build import Recipe, build

    folder, name = request.param
    path = paths.ROOT / "examples" / folder / "results" / f"{name}.sqlite.xz"
    if not path.exists():
        pytest.skip(f"{path} not committed")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        loaded = load_results(str(path), None, None)
        return build(loaded, Recipe(Criteria(bk=10, tol=0.05))).table


def _example_queries(table) -> list[tuple]:
    rng = np.random.default_rng(7)
    tuned = [(p["precision"], p["shape"], *p["sizes"].values()) for p in table.points]
    lo = [min(p["sizes"][n] for p in table.points) for n in table.size_names]
    hi = [max(p["sizes"][n] for p in table.points) for n in table.size_names]
    near = [
        (
            table.precisions[0],
            table.shapes[0],
            *(int(x) for x in rng.integers(np.maximum(1, np.array(lo) // 4), 4 * np.array(hi) + 2)),
        )
        for _ in range(300)
    ]
    small = [(table.precisions[0], table.shapes[0], *(int(x) for x in rng.integers(1, 64, len(lo)))) for _ in range(50)]
    return tuned + near + small


def test_example_tables_are_version_3_over_the_kinds_sizes(example_table):
    t = example_table
    assert t.data["version"] == 3 and t.kind and t.size_names and set(t.table_sizes) <= set(t.size_names)
    assert all(set(p["sizes"]) == set(t.size_names) for p in t.points)
    assert all(set(r["bounds"]) == set(t.table_sizes) for r in t.regions)
    assert t.data["generic"] is None  # the examples' kinds have no generic kernel
    assert t.data["fallback"] == ("library" if t.library else "none")
    assert all("/" not in (k["source"] or "") for k in t.kernels)  # relative to the include directory
    assert all(k["defines"] for k in t.kernels)  # the examples' kernels are tuned by preprocessor defines


def test_example_python_module_and_header_agree(example_table, tmp_path):
    table = example_table
    queries = _example_queries(table)
    want = [table.lookup_index(*q) for q in queries]
    assert want[: len(table.points)] == [p["ranked"][0] if p["ranked"] else table.fallback for p in table.points]
    path = tmp_path / "dispatch_ex.py"
    path.write_text(emit_python(table))
    spec = importlib.util.spec_from_file_location("dispatch_ex", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    simple = len(table.precisions) == 1 and table.shapes == ("",)
    assert simple  # one precision, no variants: the call takes the sizes only
    assert [mod.lookup_index(*q[2:]) for q in queries] == want
    assert mod.lookup(*queries[0][2:])["instance_id"] == table.record(want[0], *queries[0][:2])["instance_id"]
    if shutil.which("g++") is None:
        pytest.skip("g++ not found")
    header = emit_cpp(table)
    (tmp_path / "dispatch.cuh").write_text(header)
    n = len(table.size_names)
    fmt = " ".join(["%lld"] * n)
    args = ", ".join(f"&s[{i}]" for i in range(n))
    call = ", ".join(f"s[{i}]" for i in range(n))
    (tmp_path / "main.cpp").write_text(
        '#include "dispatch.cuh"\n#include <cstdio>\nint main() {\n'
        f'  long long s[{n}];\n  while (std::scanf("{fmt}", {args}) == {n})\n'
        f'    std::printf("%d %d\\n", autotune_dispatch::lookup({call}), autotune_dispatch::lookup(0, 0, {call}));\n'
        "  return 0;\n}\n"
    )
    exe = str(tmp_path / "lookup_ex")
    res = subprocess.run(
        ["g++", "-std=c++17", "-O1", "-Wall", "-Werror", "-o", exe, str(tmp_path / "main.cpp")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert res.returncode == 0, res.stderr
    out = subprocess.run(
        [exe], input="\n".join(" ".join(map(str, q[2:])) for q in queries), capture_output=True, text=True, timeout=60
    )
    got = [tuple(map(int, line.split())) for line in out.stdout.splitlines()]
    assert got == [(a, a) for a in want]
    assert f'"{table.kernels[0]["source"]}"' in header and "-D" in header  # source and defines for each kernel


V2_TABLES = Path(__file__).resolve().parent / "data" / "dispatch_v2"


def test_version_2_tables_answer_as_their_generated_modules(tmp_path):
    """A dispatch.json of version 2 (two tables committed under results/ before version 3, kept in tests/data with
    the dispatch.py generated from them back then, which embeds the version 2 runtime) loads, upgraded to version
    3, and answers exactly as that module. (Every committed results/*/dispatch.json was upgraded this way, and
    answered as its version 2 module on 2,000+ queries each before it was replaced.)"""
    from autotune.dispatch.table import load_table

    checked = 0
    for folder in sorted(V2_TABLES.iterdir()):
        js, py = folder / "dispatch.json", folder / "dispatch.py"
        if not (js.exists() and py.exists()):
            continue
        table = load_table(js)
        if table.version_read >= 3:
            continue
        spec = importlib.util.spec_from_file_location(f"committed_{folder.name}", py)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        rng = np.random.default_rng(1)
        groups = sorted({(p["precision"], p["shape"]) for p in table.points})
        queries = [(p["precision"], p["shape"], *p["sizes"].values()) for p in table.points]
        for _ in range(400):
            g = groups[rng.integers(len(groups))]
            queries.append((*g, *(int(x) for x in rng.integers(1, 300, 3)), int(rng.choice([1, 7, 1000]))))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            assert [table.lookup_index(*q) for q in queries] == [mod.lookup_index(*q) for q in queries], folder.name
        checked += 1
    assert checked > 0


@pytest.mark.nvcc
def test_example_header_compiles_with_nvcc_and_its_kernel_source(example_table, tmp_path):
    """The header of a kind tuned by defines compiles with nvcc next to one of its kernels, built with the -D flags
    the header names, from the include directory the table names its sources relative to."""
    table = example_table
    (tmp_path / "dispatch.cuh").write_text(emit_cpp(table))
    kern = table.kernels[0]
    folder = paths.ROOT / "examples" / {"convolution5x5": "stencil"}.get(table.kind, table.kind)
    flags = [f"-D{k}={v}" for k, v in kern["defines"].items()]
    (tmp_path / "main.cu").write_text(
        f'#include "dispatch.cuh"\n#include "{kern["source"]}"\n'
        "int main() { return autotune_dispatch::kNumKernels > 0 ? 0 : 1; }\n"
    )
    res = subprocess.run(
        [
            "nvcc",
            "-std=c++17",
            "-arch=sm_90",
            f"-I{folder}",
            f"-I{tmp_path}",
            *flags,
            "-o",
            str(tmp_path / "ex"),
            str(tmp_path / "main.cu"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert res.returncode == 0, res.stderr[-3000:]


def test_emitting_from_a_table_names_no_absolute_path_of_the_machine_that_wrote_it(tmp_path, monkeypatch):
    """The version 2 fixture's sources were absolute paths of another machine; `autotune emit TABLE.json`
    writes them as file names (or relative to --include-dir), in the JSON and in the header (the command run
    in-process, in the output folder)."""
    import json as _json

    import typer
    from typer.testing import CliRunner

    from autotune.cli import analyze as analyze_cli

    data = _json.loads((V2_TABLES / "tc_mma_h100" / "dispatch.json").read_text())
    for k in data["kernels"]:
        k["source"] = "/elsewhere/checkout/kernels_src/" + k["source"]
    src = tmp_path / "table.json"
    src.write_text(_json.dumps(data))
    app = typer.Typer()
    analyze_cli.register(app)
    monkeypatch.chdir(tmp_path)
    for fmt, out in (("json", "t.json"), ("cpp", "t.cuh")):
        r = CliRunner().invoke(app, ["emit", str(src), "-f", fmt, "-o", str(tmp_path / out)])
        assert r.exit_code == 0, r.output
        assert "/elsewhere" not in (tmp_path / out).read_text()
    assert {k["source"] for k in _json.loads((tmp_path / "t.json").read_text())["kernels"]} <= {
        k["source"].rsplit("/", 1)[-1] for k in data["kernels"]
    }
