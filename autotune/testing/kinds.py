"""A conformance suite for problem kinds, for a kind's own tests (as `optuna.testing` does for storages).

```python
# tests/test_my_kind.py of your package
import pytest
from autotune.testing.kinds import KindGpuTests, KindTests
from my_package.kinds import Scan

class TestScan(KindTests, KindGpuTests):
    @pytest.fixture
    def kind_factory(self):
        return Scan            # any zero-argument callable that builds the kind

    @pytest.fixture            # optional: sizes of valid test points (default: every size 64, then 96, then 200)
    def sample_sizes(self, kind):
        return [{"n": 1024}, {"n": 4096}]
```
`KindTests` checks the `autotune.problems.base.ProblemKind` contract on the CPU: the kind's names, `point()`
(accepts its sizes, refuses a wrong precision, variant, name or value), `env`/`expr_names`, `bytes_moved` (a
positive int), `flops`, `distance` (zero on itself, symmetric), `table_sizes`/`tie_sizes` (a partition of
`size_names`), `scalars()`, a stable JSON `describe()`, and that it pickles into a freshly spawned process and
answers there as it does here (the GPU worker is such a process). `KindGpuTests` builds the data on the GPU
(`allocate`, `args`, `nbytes`) and checks that the kind's baseline passes its own `verify` against its
`reference`; it skips where CuPy sees no GPU.

`roundtrip` is the spawned-process check, usable alone.
"""

from __future__ import annotations

import json
import math
import multiprocessing as mp
import operator
import pickle
import traceback
from typing import Any, Callable, Mapping, Sequence

import pytest

from autotune.problems.base import ProblemData, ProblemKind, Verdict
from autotune.vocab import TestPoint

SPAWN_TIMEOUT_S = 180.0
Probe = tuple[
    Any, str, str, Mapping[str, int]
]  # (kind, or (spec, space file) to resolve there; precision, shape, sizes)


def roundtrip(probes: Sequence[Probe], timeout_s: float = SPAWN_TIMEOUT_S) -> list[dict[str, Any]]:
    """Pickle `probes` to a freshly spawned process, which unpickles each kind (or resolves a `problem:` spec
    given as `(spec, space_file)`, as a space file would), builds the point and returns
    {"point", "bytes_moved", "flops", "describe", "scalars"} per probe. RuntimeError carries the child's traceback."""
    ctx = mp.get_context("spawn")
    payload = pickle.dumps(list(probes))
    parent, child = ctx.Pipe()
    proc = ctx.Process(target=_probe, args=(child, payload), daemon=True)
    proc.start()
    child.close()
    try:
        if not parent.poll(timeout_s):
            raise RuntimeError(f"the spawned process answered nothing within {timeout_s:.0f} s")
        status, result = parent.recv()
    except EOFError:
        proc.join(5)
        raise RuntimeError(f"the spawned process died (exit code {proc.exitcode})") from None
    finally:
        parent.close()
        if proc.is_alive():
            proc.kill()
        proc.join(10)
    if status != "ok":
        raise RuntimeError(f"in the spawned process:\n{result}")
    return result


def _probe(conn: Any, payload: bytes) -> None:
    try:
        out = []
        for kind, precision, shape, sizes in pickle.loads(payload):
            if isinstance(kind, tuple):
                from pathlib import Path

                from autotune.problems.registry import resolve

                kind = resolve(kind[0], Path(kind[1]), None)
            point = kind.point(precision, shape, sizes)
            out.append(
                {
                    "point": point,
                    "bytes_moved": kind.bytes_moved(point, kind.scalars()),
                    "flops": kind.flops(point),
                    "describe": kind.describe(),
                    "scalars": kind.scalars(),
                    "class": f"{type(kind).__qualname__}",
                }
            )
        conn.send(("ok", out))
    except BaseException:  # noqa: BLE001 - everything goes back to the parent
        conn.send(("error", traceback.format_exc()))
    finally:
        conn.close()


def default_sizes(kind: ProblemKind) -> list[dict[str, int]]:
    return [{n: v for n in kind.size_names} for v in (64, 96, 200)]


class KindFixtures:
    """The fixtures both halves use: define `kind_factory`; `sample_sizes` has a default."""

    @pytest.fixture
    def kind_factory(self) -> Callable[[], ProblemKind]:
        raise NotImplementedError("define the fixture `kind_factory`: a zero-argument callable that builds the kind")

    @pytest.fixture
    def kind(self, kind_factory: Callable[[], ProblemKind]) -> ProblemKind:
        kind = kind_factory()
        assert isinstance(kind, ProblemKind), f"{kind!r} is not a ProblemKind"
        return kind

    @pytest.fixture
    def sample_sizes(self, kind: ProblemKind) -> Sequence[Mapping[str, int]]:
        return default_sizes(kind)

    @pytest.fixture
    def points(self, kind: ProblemKind, sample_sizes: Sequence[Mapping[str, int]]) -> list[TestPoint]:
        return [
            kind.point(precision, shape, sizes)
            for precision in kind.precisions
            for shape in kind.shapes
            for sizes in sample_sizes
        ]


class KindTests(KindFixtures):
    """The CPU contract of a ProblemKind (see the module docstring). Define the fixture `kind_factory`."""

    def test_names(self, kind: ProblemKind) -> None:
        assert isinstance(kind.name, str) and kind.name.isidentifier()
        for names in (kind.size_names, kind.precisions, kind.shapes, kind.conventions):
            assert isinstance(names, tuple) and names and all(isinstance(n, str) for n in names), names
            assert len(set(names)) == len(names), f"{names} repeats a name"
        assert all(n.isidentifier() for n in kind.size_names)
        assert kind.baseline_name is None or isinstance(kind.baseline_name, str)
        assert kind.generic_space is None or isinstance(kind.generic_space, str)

    def test_point_accepts_its_sizes(self, kind: ProblemKind, sample_sizes: Sequence[Mapping[str, int]]) -> None:
        for sizes in sample_sizes:
            p = kind.point(kind.precisions[0], kind.shapes[0], sizes)
            assert isinstance(p, TestPoint) and p.kind == kind.name
            assert (p.precision, p.shape) == (kind.precisions[0], kind.shapes[0])
            assert tuple(n for n, _ in p.sizes) == kind.size_names
            assert p.dims == {n: int(sizes[n]) for n in kind.size_names}

    def test_point_refuses_what_is_not_its(self, kind: ProblemKind, sample_sizes: Sequence[Mapping[str, int]]) -> None:
        sizes = dict(sample_sizes[0])
        precision, shape = kind.precisions[0], kind.shapes[0]
        bad: list[tuple[str, str, dict]] = [
            ("not_a_precision", shape, sizes),
            (precision, shape + "?", sizes),
            (precision, shape, {n: v for n, v in sizes.items() if n != kind.size_names[-1]}),
            (precision, shape, {**sizes, "not_a_size_of_this_kind": 8}),
            (precision, shape, {**sizes, kind.size_names[0]: 1.5}),
            (precision, shape, {**sizes, kind.size_names[0]: "8"}),
            (precision, shape, {**sizes, kind.size_names[0]: True}),
        ]
        for case in bad:
            with pytest.raises(ValueError):
                kind.point(*case)

    def test_env_defines_the_expression_names(self, kind: ProblemKind, points: list[TestPoint]) -> None:
        names = kind.expr_names()
        assert isinstance(names, tuple) and len(set(names)) == len(names)
        for p in points:
            env = kind.env(p)
            assert set(env) == set(names), f"env {sorted(env)} != expr_names {sorted(names)}"
            assert all(isinstance(v, int) and not isinstance(v, bool) for v in env.values())

    def test_work_of_a_point(self, kind: ProblemKind, points: list[TestPoint]) -> None:
        scalars = kind.scalars()
        for p in points:
            moved = kind.bytes_moved(p, scalars)
            assert isinstance(moved, int) and not isinstance(moved, bool) and moved > 0, (p, moved)
            flops = float(kind.flops(p))
            assert math.isfinite(flops) and flops >= 0, (p, flops)

    def test_distance(self, kind: ProblemKind, points: list[TestPoint]) -> None:
        for a in points:
            assert kind.distance(a, a) == 0
            for b in points:
                if (a.precision, a.shape) != (b.precision, b.shape):
                    continue
                d = kind.distance(a, b)
                assert math.isfinite(d) and d >= 0 and math.isclose(d, kind.distance(b, a)), (a, b)

    def test_table_and_tie_sizes_partition_the_sizes(self, kind: ProblemKind) -> None:
        table, tie = kind.table_sizes(), kind.tie_sizes()
        assert table, "a table answers over at least one size"
        assert not set(table) & set(tie)
        assert sorted(table + tie) == sorted(kind.size_names)

    def test_scalars(self, kind: ProblemKind) -> None:
        defaults = kind.scalars()
        assert defaults == {k: float(v) for k, v in kind.scalar_defaults.items()}
        for name in defaults:
            assert kind.scalars({name: 2.5})[name] == 2.5
        with pytest.raises(ValueError):
            kind.scalars({"not_a_scalar_of_this_kind": 1.0})

    def test_describe_is_stable(self, kind: ProblemKind, kind_factory: Callable[[], ProblemKind]) -> None:
        d = kind.describe()
        assert d == kind_factory().describe() == kind.describe()
        assert json.loads(json.dumps(d)) == d, "describe() must be plain JSON (it is stored with each sweep)"
        assert d["name"] == kind.name and list(d["size_names"]) == list(kind.size_names)

    def test_pickles_into_a_spawned_process(self, kind: ProblemKind, points: list[TestPoint]) -> None:
        p = points[0]
        there = roundtrip([(kind, p.precision, p.shape, p.dims)])[0]
        assert there["point"] == p
        assert there["bytes_moved"] == kind.bytes_moved(p, kind.scalars())
        assert there["describe"] == kind.describe() and there["scalars"] == kind.scalars()


class KindGpuTests(KindFixtures):
    """The GPU contract of a ProblemKind: data, arguments, reference, verification, baseline. Skips where CuPy
    sees no GPU. Define the fixture `kind_factory`."""

    @pytest.fixture
    def cupy(self) -> Any:
        cp = pytest.importorskip("cupy")
        try:
            if cp.cuda.runtime.getDeviceCount() < 1:
                pytest.skip("no CUDA GPU visible to CuPy")
        except Exception as exc:  # noqa: BLE001 - no driver, no device
            pytest.skip(f"no CUDA GPU visible to CuPy ({exc})")
        return cp

    @pytest.fixture
    def l2_bytes(self, cupy: Any) -> int:
        return int(cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)["l2CacheSize"])

    def test_allocate_and_args(self, kind: ProblemKind, points: list[TestPoint], l2_bytes: int) -> None:
        p = points[0]
        for convention in kind.conventions:
            data = kind.allocate(p, convention, kind.scalars(), l2_bytes, seed=0)
            assert isinstance(data, ProblemData)
            assert isinstance(data.copies, int) and data.copies >= 1
            assert data.nbytes() > 0
            first, last = data.args(0), data.args(data.copies - 1)
            assert isinstance(first, tuple) and len(first) == len(last) > 0

    def test_baseline_passes_verification(
        self, kind: ProblemKind, points: list[TestPoint], l2_bytes: int, cupy: Any
    ) -> None:
        for p in points[:2]:
            data = kind.allocate(p, kind.conventions[0], kind.scalars(), l2_bytes, seed=1)
            launch = data.baseline()
            if launch is None:
                assert kind.baseline_name is None, f"baseline_name {kind.baseline_name!r} but data.baseline() is None"
                pytest.skip(f"the {kind.name} kind has no baseline")
            ref = data.reference()
            data.prepare_verify()
            launch(0)
            cupy.cuda.Device().synchronize()
            verdict = data.verify(ref)
            assert isinstance(verdict, Verdict)
            assert verdict.ok, (p, verdict.message)
            assert operator.index(verdict.unwritten) == 0


__all__ = ["KindFixtures", "KindGpuTests", "KindTests", "default_sizes", "roundtrip"]
