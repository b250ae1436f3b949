"""GPU tier: a kind written in Python in the user's folder (outside the checkout) reaches the spawned GPU worker in
every form a space file names it (`file.py:Class`, `file.py:object`, `module:Class`, `module:object`, an entry
point): every measurement and the baseline are verified and timed (`ok`), none `crashed`. An in-place output
declared with `init: random` keeps its initial values before the verified launch: the kernel and the baseline are
`ok`, not `wrong`."""

from __future__ import annotations

import importlib
import textwrap
from pathlib import Path

import pytest

from autotune.store.store import Store
from tests.support.gpu_sweep import gpu_sweep

pytestmark = pytest.mark.gpu

KIND = textwrap.dedent("""\
    import numpy as np

    from autotune.problems.base import ProblemData, ProblemKind, judge, rotation_copies


    class TripleData(ProblemData):
        def __init__(self, n, copies, seed, factor):
            import cupy as cp

            rng = cp.random.default_rng(seed)
            self.cp, self.n, self.copies, self.factor = cp, n, copies, factor
            self.x = [rng.random(n, dtype=cp.float32) for _ in range(copies)]
            self.y = [cp.empty(n, dtype=cp.float32) for _ in range(copies)]

        def nbytes(self):
            return sum(a.nbytes for a in self.x + self.y)

        def args(self, copy):
            return (self.y[copy], self.x[copy], np.int32(self.n))

        def prepare_verify(self):
            self.y[0].fill(float("nan"))

        def reference(self):
            return self.factor * self.x[0].astype(self.cp.float64)

        def verify(self, reference):
            cp = self.cp
            got = self.y[0].astype(cp.float64)
            unwritten = int(got.size - int(cp.isfinite(got).sum()))
            err = float(cp.linalg.norm(cp.nan_to_num(got - reference, nan=cp.inf))) / float(cp.linalg.norm(reference))
            return judge(err, unwritten, 1e-6)

        def baseline(self):
            def launch(r):
                self.cp.multiply(self.x[r % self.copies], self.cp.float32(self.factor), out=self.y[r % self.copies])
            return launch


    class Triple(ProblemKind):
        name = "triple"
        size_names = ("n",)
        baseline_name = "cupy"

        def __init__(self, factor=3):
            self.factor = factor

        def bytes_moved(self, point, scalars):
            return 2 * point.n * point.elem_bytes

        def allocate(self, point, convention, scalars, l2_bytes, seed):
            return TripleData(point.n, rotation_copies(2 * point.n * 4, l2_bytes), seed, self.factor)


    BUILT = Triple(3)
    """)
KERNEL = (
    'extern "C" __global__ void triple(float* y, const float* x, int n) {\n'
    "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n    if (i < n) y[i] = 3.0f * x[i];\n}\n"
)
SPACE = textwrap.dedent("""\
    name: triple_{tag}
    problem: {problem}
    kernel:
      source: triple.cu
      name: triple
      block: [bs, 1, 1]
      grid: ["ceil(n / bs)", 1, 1]
    parameters:
      bs: [64, 128, 256]
    """)


def sweep(tmp_path: Path, space: Path, points: str) -> Store:
    return gpu_sweep(tmp_path, space, points)


def assert_all_ok(store: Store, instances: int, points: int) -> None:
    frame = store.measurements()
    assert len(frame) == instances * points and set(frame.status) == {"ok"}, frame[["instance", "status", "error"]]
    base = store.baselines()
    assert len(base) == points and set(base.status) == {"ok"}, base[["status", "error"]]


@pytest.mark.parametrize(
    "problem", ["kinds.py:Triple", "kinds.py:BUILT", "user_kinds:Triple", "user_kinds:BUILT", "triple_ep"]
)
def test_a_python_kind_outside_the_checkout_reaches_the_worker(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, problem: str
) -> None:
    user = tmp_path / "user"  # the user's own folder, outside the checkout
    user.mkdir()
    (user / "kinds.py").write_text(KIND)
    (user / "triple.cu").write_text(KERNEL)
    site = tmp_path / "site"  # an importable module and an installed package's entry point
    (site / "user_kinds").mkdir(parents=True)
    (site / "user_kinds" / "__init__.py").write_text(KIND)
    info = site / "user_kinds-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: user_kinds\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[autotune.problems]\ntriple_ep = user_kinds:Triple\n")
    monkeypatch.syspath_prepend(str(site))
    importlib.invalidate_caches()
    space = user / "space.yaml"
    space.write_text(SPACE.format(tag="k", problem=problem))
    store = sweep(tmp_path, space, "[{kind: triple, sizes: {n: [1000, 65536]}}]")
    assert_all_ok(store, instances=3, points=2)


INPLACE = textwrap.dedent("""\
    name: inplace_double
    problem:
      name: inplace_double
      sizes: [n]
      arguments:
        - {name: y, buffer: float32, shape: [n], output: true, init: random}
        - {name: n, scalar: int32, value: n}
      reference: ref.py:double
      tolerance: {fp32: 1e-6}
      bytes: 2 * n * elem_bytes
      baseline: ref.py:cupy_double
    kernel:
      source: double.cu
      name: double_in_place
      block: [bs, 1, 1]
      grid: ["ceil(n / bs)", 1, 1]
    parameters:
      bs: [64, 256]
    """)


def test_an_in_place_output_with_random_init_is_verified(tmp_path: Path) -> None:
    user = tmp_path / "user"
    user.mkdir()
    (user / "double.cu").write_text(
        'extern "C" __global__ void double_in_place(float* y, int n) {\n'
        "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
        "    if (i < n) y[i] = 2.0f * y[i];\n}\n"
    )
    (user / "ref.py").write_text(
        "def double(a, s):\n    return {'y': 2 * a['y']}\n\ndef cupy_double(a, s):\n    a['y'] *= 2\n"
    )
    (user / "space.yaml").write_text(INPLACE)
    store = sweep(tmp_path, user / "space.yaml", "[{kind: inplace_double, sizes: {n: [1000, 100000]}}]")
    assert_all_ok(store, instances=2, points=2)


def test_declared_data_on_cupy_resets_in_place_outputs_and_poisons_the_others(tmp_path: Path) -> None:
    cp = pytest.importorskip("cupy")
    from autotune.problems.declared_data import DeclaredData
    from autotune.space.spec import load_space

    user = tmp_path / "user"
    user.mkdir()
    (user / "double.cu").write_text("")
    (user / "ref.py").write_text(
        "def double(a, s):\n    return {'y': 2 * a['y'], 'z': a['y']}\n\ndef cupy_double(a, s):\n    a['y'] *= 2\n"
    )
    (user / "space.yaml").write_text(
        INPLACE.replace(
            "    - {name: n, scalar",
            "    - {name: z, buffer: float32, shape: [n], output: true}\n    - {name: n, scalar",
        )
    )
    kind = load_space(user / "space.yaml").kind
    data = DeclaredData(kind, kind.point("fp32", "", {"n": 4096}), copies=2, seed=1)
    initial = data.sets[0]["y"].copy()
    data.sets[0]["y"].fill(7.0)
    data.prepare_verify()
    assert bool((data.sets[0]["y"] == initial).all()) and bool(cp.isnan(data.sets[0]["z"]).all())
