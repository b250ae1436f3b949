"""dgemm_dmma_tc (fp64 tensor cores) without a GPU: its instances compile for sm_90 with nvcc and ptxas without
spilling, the space's shared-memory formula is what the kernel needs, the hand-picked instances of the GPU harness
(scripts/check_dmma.py) pass the space's hard constraints and its cases cover what the GPU tier promises, and the space
serves the points it was built for (fixed K = 32 at M = N = 64..256, square n = 26..32)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pandas as pd
import pytest

from autotune.devices import get_device
from autotune.paths import KERNELS_DIR
from autotune.problems.gemm import gemm_point
from autotune.space.generator import generate
from autotune.space.spec import load_space
from tests.support.harness import load_script
from tests.support.nvcc import SHAPES, compile_object, one_shape_each

harness = load_script("check_dmma")
KERNELS = harness.DMMA_KERNELS
SPACE = "dgemm_dmma_tc"
needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not found")


def _instances() -> list[dict]:
    """The harness's instances (PERSIST is a launch parameter: one kernel for both values) and the first and last
    instance of the generated space."""
    frame = generate(load_space(SPACE), get_device("H100"), "fp64").frame
    sampled = [{k: int(v) for k, v in frame.iloc[r].items()} for r in (0, len(frame) - 1)]
    return [k.p() for k in KERNELS] + sampled


def _optimised(cu: Path) -> subprocess.CompletedProcess:
    """Release build with ptxas's resource report: spills only show with optimised device code."""
    cmd = ["nvcc", "-std=c++17", "-arch=sm_90", f"-I{KERNELS_DIR}", "-Xptxas", "-v", "-c", str(cu)]
    return subprocess.run(cmd + ["-o", str(cu.with_suffix(".o"))], capture_output=True, text=True, timeout=300)


@pytest.mark.nvcc
@needs_nvcc
def test_instances_compile_without_spills(tmp_path: Path) -> None:
    """Every instance once (the shapes taking turns; the one with the most shared memory in all four): ptxas builds
    each entry, none spills, none exceeds the launch bounds' 255 registers."""
    from concurrent.futures import ThreadPoolExecutor

    space = load_space(SPACE)
    names = sorted({space.template_name(p, "fp64", s) for p, s in one_shape_each(space, _instances(), "fp64")})
    units = []
    for i, part in enumerate((names[::2], names[1::2])):  # two units: the two cores of CI
        refs = "\n".join(f"    reinterpret_cast<const void*>(&{n})," for n in part)
        cu = tmp_path / f"dmma_{i}.cu"
        cu.write_text(f'#include "dgemm_dmma_tc.cuh"\n\nconst void* dmma_instances[] = {{\n{refs}\n}};\n')
        units.append(cu)
    with ThreadPoolExecutor(max_workers=2) as pool:
        results = list(pool.map(_optimised, units))
    log = ""
    for r in results:
        assert r.returncode == 0, r.stderr[-4000:]
        log += r.stderr
    assert log.count("Compiling entry function") == len(names), log[-4000:]
    spills = [ln for ln in log.splitlines() if "spill stores" in ln]
    assert len(spills) == len(names) and all(
        ln.strip().startswith("0 bytes stack frame, 0 bytes spill") for ln in spills
    ), "\n".join(spills)
    regs = [int(x) for x in re.findall(r"Used (\d+) registers", log)]
    assert len(regs) == len(names) and max(regs) <= 255


@pytest.mark.nvcc
@needs_nvcc
def test_shared_memory_formula_matches_the_kernel(tmp_path: Path) -> None:
    """The space's smem_bytes (the launch's dynamic shared memory) is what the kernel needs in its largest shape:
    dgemm_dmma_tc_smem_bytes<...>() of every shape is at most smem_bytes and the largest equals it (static_assert)."""
    space = load_space(SPACE)
    dev = get_device("H100")
    lines = [
        "#include <initializer_list>",
        '#include "dgemm_dmma_tc.cuh"',
        "constexpr int largest(std::initializer_list<int> v) { int m = 0; for (int x : v) m = x > m ? x : m; return m; }",
    ]
    for p in _instances():
        smem = int(space.values(p, "fp64", dev)["smem_bytes"])
        need = []
        for s in SHAPES:
            args = space.template_name(p, "fp64", s).split("<", 1)[1].rstrip(">")
            need.append(f"autotune::dgemm_dmma_tc_smem_bytes<{args}>()")
            lines.append(f'static_assert({need[-1]} <= {smem}, "{s} {p}");')
        lines.append(f'static_assert(largest({{{", ".join(need)}}}) == {smem}, "largest shape {p}");')
    cu = tmp_path / "dmma_smem.cu"
    cu.write_text("\n".join(lines) + "\n")
    r = compile_object(cu)
    assert r.returncode == 0, r.stderr + r.stdout


def test_harness_instances_pass_the_hard_constraints() -> None:
    """The GPU harness runs only instances a sweep could generate; the one it keeps outside the soft constraints is
    the one its comment names."""
    space = load_space(SPACE)
    dev = get_device("H100")
    soft_out = []
    for kern in KERNELS:
        values = space.values(kern.p(), "fp64", dev)
        assert all(bool(space.eval(c, values)) for c in space.hard), kern.label
        if not all(bool(space.eval(c, values)) for c in space.soft):
            soft_out.append(kern.label)
    assert soft_out == ["d128_4x4"]


def test_cases_cover_the_brief() -> None:
    """Per instance: sizes that do not divide its tile or its slice, several slices, every shape, both copy widths
    (even and odd leading dimensions, a misaligned base), beta == 0 and != 0, a capped grid, a batch above 65,535
    (with a partial last group where PPB > 1); over the instances: several problems per block, one warp, 8-byte
    copies only, both grid kinds, every mma shape."""
    ps = [k.p() for k in KERNELS]
    assert {p["MMA"] for p in ps} == {884, 1684, 1688}
    assert any(p["PPB"] > 1 for p in ps) and any(p["NWARPS"] == 1 for p in ps) and any(p["VEC"] == 8 for p in ps)
    assert {p["PERSIST"] for p in ps} == {0, 1}
    for kern in KERNELS:
        p, cs = kern.p(), harness.cases(kern)
        assert {c.shape for c in cs} == set(SHAPES)
        assert any(c.m % p["BM"] and c.m > p["BM"] for c in cs)  # several tiles, the last one ragged
        assert any(c.m < p["BM"] for c in cs) and any(c.n % p["BN"] for c in cs)
        assert any(c.k % p["KS"] and c.k % 4 for c in cs) and any(c.k > 2 * p["KS"] for c in cs)
        assert any(c.pad and c.pad % 2 == 0 for c in cs) and any(c.pad % 2 for c in cs) and any(c.offset for c in cs)
        assert any(c.beta == 0.0 for c in cs) and any(c.beta not in (0.0, 1.0) for c in cs)
        assert any(c.cap for c in cs) and any(c.batch > 65_535 and (c.batch % p["PPB"] or p["PPB"] == 1) for c in cs)
        assert {1, 7, 13, 33, 97, 127, 255, *range(26, 33)} <= {c.m for c in cs}


def test_space_serves_the_points_it_was_built_for() -> None:
    """After the soft constraints, instances serve every timed point of the harness (fixed K = 32 at 64..256, square
    n = 26..32), the harness times an instance of its own at each, and nothing serves M or N above 256."""
    space = load_space(SPACE)
    frame = generate(space, get_device("H100"), "fp64").frame
    rows = [{k: int(v) for k, v in frame.iloc[r].items()} for r in range(0, len(frame), 5)]
    for pt in harness.timed_points():
        assert any(space.serves(p, pt) for p in rows), pt
        assert any(k.serves(pt) for k in KERNELS), pt
    assert space.accepts(gemm_point("fp64", "TT", 256, 256, 999, 1))
    assert not space.accepts(gemm_point("fp64", "NN", 257, 8, 8, 1))
    assert not space.accepts(gemm_point("fp32", "NN", 8, 8, 8, 1))


def test_committed_best_is_the_status_check_best() -> None:
    """The SIMT instance the harness times next to the DMMA ones at each point is the best committed SIMT instance
    there, over scripts/kernel_status.py's sources for the point's groups (the databases read for their SIMT spaces
    only: the top-3 transfer runs hold DMMA instances too); same instance id, same source folder: the parameters were
    copied by hand."""
    from autotune.paths import ROOT
    from autotune.space.instance import Instance

    ks = load_script("kernel_status")
    results, simt = ROOT / "results", ("gemm_batched_simt", "gemm_tiny_simt")
    groups = [g for g in ks.GROUPS if g.name.startswith(("fp32/fp64", "fixed K"))]
    paths = {p for g in groups for s in (*g.points, *g.others) if (p := results / s.format(gpu="h100")).exists()}
    rows = pd.concat(
        [ks.read_source(p, results, simt) for p in sorted(paths) if "dmma_" not in p.as_posix()], ignore_index=True
    )
    fp64 = rows[(rows.precision == "fp64") & (rows["shape"] == "NN")]
    for (m, n, k, batch), (space, params, source) in harness.COMMITTED_BEST.items():
        at = fp64[(fp64.m == m) & (fp64.n == n) & (fp64.k == k) & (fp64.batch == batch)]
        assert len(at), (m, n, k, batch)
        best = at.loc[at["speedup"].idxmax()]
        assert best["instance"] == Instance.of(space, params).id, (m, n, k, batch, best["instance"], best["source"])
        assert best["source"].split("/")[0] == source, (m, n, k, batch)


@pytest.mark.nvcc
@needs_nvcc
def test_m16_shapes_need_sm90(tmp_path: Path) -> None:
    """The space's mma_arch constraint is real: on an sm_80 profile (A100) it drops the m16n8k4 / m16n8k8 instances,
    and ptxas refuses them for sm_80 (the same instance builds for sm_90 in the test above)."""
    space = load_space(SPACE)
    p = next(k.p() for k in KERNELS if k.p()["MMA"] == 1688)
    values = space.values(p, "fp64", get_device("A100"))
    assert not bool(space.eval(next(c for c in space.hard if c.name == "mma_arch"), values))
    cu = tmp_path / "m16_sm80.cu"
    name = space.template_name(p, "fp64", "NN")
    cu.write_text(f'#include "dgemm_dmma_tc.cuh"\nconst void* k = reinterpret_cast<const void*>(&{name});\n')
    cmd = ["nvcc", "-std=c++17", "-arch=sm_80", f"-I{KERNELS_DIR}", "-c", str(cu), "-o", str(cu.with_suffix(".o"))]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert r.returncode != 0 and "requires .target sm_90" in r.stderr + r.stdout
