"""The executor conformance suite (autotune.testing.backends) on the CPU: the replay backend over committed
databases, a stencil (a kind with no baseline) and a GEMM sweep (cuBLAS recorded). The local GPU backend runs the
same suite in tests/gpu/test_backend_conformance_gpu.py. A backend that breaks a clause fails the suite."""

from __future__ import annotations

from pathlib import Path

import pytest

from autotune.devices import profile
from autotune.problems.base import ProblemKind, Scalars
from autotune.space.generator import generate
from autotune.space.spec import Space, load_space
from autotune.store.store import Store
from autotune.sweep.backends.base import Job
from autotune.sweep.backends.replay import NOT_RECORDED, ReplayBackend
from autotune.testing.backends import BackendConformance
from autotune.vocab import Measurement, Status, TestPoint

ROOT = Path(__file__).resolve().parent.parent
STENCIL_DB = ROOT / "examples" / "stencil" / "results" / "stencil_h100.sqlite.xz"
SQUARE_DB = ROOT / "results" / "square_h100" / "square_h100.sqlite.xz"

pytestmark = pytest.mark.filterwarnings("ignore:.*schema version")  # committed databases migrate on open


_RECORDED: dict[tuple[str, str, str, int], tuple[Job, ...]] = {}  # recorded_jobs' answers (Jobs are frozen)


def recorded_jobs(db: Path, space: Space, precision: str, count: int) -> list[Job]:
    """`count` instances of `space` recorded in `db`, each at its recorded points of `precision` plus one point
    the database never saw (the backend must answer it too); read once for all the tests that ask."""
    key = (str(db), space.name, precision, count)
    if key not in _RECORDED:
        _RECORDED[key] = tuple(_recorded_jobs(db, space, precision, count))
    return list(_RECORDED[key])


def _recorded_jobs(db: Path, space: Space, precision: str, count: int) -> list[Job]:
    with Store.open(str(db), create=False, readonly=True) as store:
        pairs = store.done_pairs(store.device_id())
    by_instance: dict[str, list[TestPoint]] = {}
    for iid, p in sorted(pairs, key=lambda t: (t[0], t[1])):
        if p.precision == precision:
            by_instance.setdefault(iid, []).append(p)
    chosen = [i for i in generate(space, profile("H100"), precision).instances() if i.id in by_instance][:count]
    assert len(chosen) == count, f"fewer than {count} recorded instances of {space.name} in {db}"
    first = by_instance[chosen[0].id][0]
    extra = space.kind.point(precision, first.shape, {n: v + 1 for n, v in first.sizes})
    return [Job(space, i, tuple(by_instance[i.id][:3]) + (extra,), space.kind.scalars(), 5) for i in chosen]


class TestReplayOfAStencil(BackendConformance):
    space = load_space(ROOT / "examples" / "stencil" / "space.yaml")

    def make_backend(self) -> ReplayBackend:
        return ReplayBackend(str(STENCIL_DB))

    def jobs(self) -> list[Job]:
        return recorded_jobs(STENCIL_DB, self.space, "fp32", 6)

    def baseline_case(self) -> tuple[ProblemKind, TestPoint, Scalars]:
        kind = self.space.kind
        return kind, self.jobs()[0].points[0], kind.scalars()


class TestReplayOfGemm(BackendConformance):
    space = load_space("gemm_batched_simt")

    def make_backend(self) -> ReplayBackend:
        return ReplayBackend(str(SQUARE_DB))

    def jobs(self) -> list[Job]:
        return recorded_jobs(SQUARE_DB, self.space, "fp64", 4)

    def baseline_case(self) -> tuple[ProblemKind, TestPoint, Scalars]:
        kind = self.space.kind
        return kind, self.jobs()[0].points[0], kind.scalars()

    def test_recorded_baseline_and_unrecorded_pairs(self) -> None:
        """Beyond the contract: the replay answers the recorded cuBLAS time, and `not recorded` for new pairs."""
        backend = self.make_backend()
        try:
            kind, point, scalars = self.baseline_case()
            m = backend.baseline(kind, point, scalars, 5)
            assert m.status == Status.OK and m.median_ms and m.instance_id == "cublas"
            got = list(backend.run(self.jobs()))
            assert sum(m.error == NOT_RECORDED for m in got) == len(self.jobs())  # the one extra point per job
        finally:
            backend.close()


class Duplicating(ReplayBackend):
    """Breaks the contract: the first pair is answered twice."""

    def run(self, jobs):  # type: ignore[no-untyped-def]
        got = list(super().run(jobs))
        return iter(got[:1] + got)


class Unexplained(ReplayBackend):
    """Breaks the contract: failures without a message."""

    def run(self, jobs):  # type: ignore[no-untyped-def]
        for m in super().run(jobs):
            yield Measurement(m.instance_id, m.point, Status.WRONG)


@pytest.mark.parametrize(
    "broken, check", [(Duplicating, "test_one_measurement_per_pair"), (Unexplained, "test_statuses_are_valid")]
)
def test_the_suite_catches_a_broken_backend(broken: type, check: str) -> None:
    suite = TestReplayOfAStencil()
    backend = broken(str(STENCIL_DB))
    try:
        with pytest.raises(AssertionError):
            getattr(suite, check)(backend)
    finally:
        backend.close()
