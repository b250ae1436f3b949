"""The replay tier: the runner, resume and analyzer on a sweep recorded on a real H100.

results/default/default.sqlite.xz is the README's main job (configs/default.yaml: 300 sampled
gemm_batched_simt instances x 12 fp64/fp32 points) as it ran on an NVIDIA H100 80GB HBM3,
killed with SIGKILL part-way and resumed (see results/default/PROVENANCE.md).
"""

import dataclasses
import importlib.util
import subprocess
import textwrap

import pytest

from autotune import load_results
from autotune.dispatch.build import Recipe, build
from autotune.sweep.config import load_config
from autotune.dispatch.emit import emit_cpp, emit_python
from autotune.dispatch.loo import tol_table
from autotune.paths import ROOT
from autotune.sweep.backends.replay import ReplayBackend
from autotune.sweep.runner import run_sweep
from tests.support.committed import committed
from autotune.store.store import Store
from autotune.analysis.winners import Criteria

RECORDED = committed("default")  # results/default/default.sqlite.xz, read as it is
URL = f"sqlite:///{RECORDED}"


class Count:
    def __init__(self):
        self.n = 0

    def start(self, total, done):
        pass

    def measured(self, m, best):
        self.n += 1

    def note(self, text):
        pass


@pytest.fixture(scope="module")
def recorded():
    with Store.open(URL, readonly=True) as s:
        return s.measurements()


@pytest.fixture(scope="module")
def built():
    """The recording's table (and winners), as `autotune report` builds it: read by two tests."""
    loaded = load_results(URL, None, None)
    return build(loaded, Recipe(Criteria(bk=10, tol=0.05), generic_params="BLOCK_X=32,BLOCK_Y=4"))


def test_recording_is_a_real_h100_sweep(recorded):
    assert set(recorded.device) == {"NVIDIA H100 80GB HBM3"}
    assert recorded.instance_id.nunique() == 300 and len(recorded.groupby(["precision", "m"])) == 12
    assert set(recorded.status) <= {"ok", "skipped", "wrong", "compile_error", "launch_error", "timeout", "crashed"}
    ok = recorded[recorded.status == "ok"]
    assert (ok.roofline_frac > 0).all() and (ok.roofline_frac < 1.2).all()


def test_replayed_sweep_reproduces_the_recording_and_resumes(tmp_path, recorded):
    cfg = dataclasses.replace(
        load_config(ROOT / "configs" / "default.yaml"), database=f"sqlite:///{tmp_path}/r.sqlite", budget_s=None
    )
    backend = ReplayBackend(URL)
    try:
        with Store.open(cfg.database) as store:
            half = dataclasses.replace(cfg, max_instances=150)
            first = run_sweep(half, store, backend, Count())
        with Store.open(cfg.database) as store:
            second = run_sweep(cfg, store, backend, Count())  # the same seeded sample, extended: resumes
    finally:
        backend.close()
    assert first.status == second.status == "done"
    assert second.skipped_done == first.measured
    with Store.open(cfg.database, readonly=True) as s:
        replayed = s.measurements()
    key = ["instance_id", "precision", "m"]
    assert len(replayed) == len(recorded) and not replayed.duplicated(key).any()
    both = recorded.merge(replayed, on=key, suffixes=("", "_replay"))
    assert len(both) == len(recorded)
    assert (both.status == both.status_replay).all()
    assert both.median_ms.fillna(-1).equals(both.median_ms_replay.fillna(-1))


def test_exact_never_needs_more_kernels_than_greedy_on_the_recording(built):
    table = tol_table(
        built[1].matrix,
        [5, 10, None],
        [0.0, 0.02, 0.05, 0.1, 0.15],
        loo=None,
    )
    for (bk, tol), g in table.groupby(["bk", "tol"]):
        k = dict(zip(g.method, g.kernels, strict=True))
        assert k["exact"] <= k["greedy"], (bk, tol, k)
        assert (g.worst_loss <= tol + 1e-12).all()


@pytest.mark.nvcc
def test_emitted_header_compiles_with_the_kernels_and_agrees_with_python(built, tmp_path):
    table, _ = built
    (tmp_path / "dispatch.cuh").write_text(emit_cpp(table))
    (tmp_path / "dispatch_gen.py").write_text(emit_python(table))
    spec = importlib.util.spec_from_file_location("dispatch_gen", tmp_path / "dispatch_gen.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    grid = [1, 2, 3, 4, 6, 8, 12, 16, 20, 24, 32, 48, 64, 100]
    queries = [(p["precision"], p["shape"], *p["sizes"].values()) for p in table.data["points"]]
    queries += [
        (pr, "NN", m, n, k, b)
        for pr in ("fp64", "fp32", "fp16")
        for m in grid
        for n in grid[::3]
        for k in grid[::4]
        for b in (1, 5000)
    ]
    want = [mod.lookup_index(*q) for q in queries]
    assert want[:12] == [table.lookup_index(*q) for q in queries[:12]] and -2 in want  # the library answers somewhere
    prec = {"fp64": 0, "fp32": 1, "fp16": 2}
    main = tmp_path / "main.cu"
    main.write_text(
        textwrap.dedent("""\
        #define AUTOTUNE_DISPATCH_INSTANTIATE
        #include "dispatch.cuh"
        #include <cstdio>
        int main() {
          int p, s; long long m, n, k, b;
          while (std::scanf("%d %d %lld %lld %lld %lld", &p, &s, &m, &n, &k, &b) == 6)
            std::printf("%d\\n", autotune_dispatch::lookup(p, s, m, n, k, b));
        }
        """)
    )
    exe = tmp_path / "lookup"
    r = subprocess.run(
        ["nvcc", "-std=c++17", "-arch=sm_90", f"-I{ROOT / 'kernels_src'}", f"-I{tmp_path}", str(main), "-o", str(exe)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    stdin = "\n".join(f"{prec[p]} 0 {m} {n} {k} {b}" for p, s, m, n, k, b in queries)
    out = subprocess.run([str(exe)], input=stdin, capture_output=True, text=True, timeout=60)
    assert [int(x) for x in out.stdout.split()] == want
