"""GPU tier: the executor conformance suite (autotune.testing.backends) on the local GPU backend, with GEMM
(gemm_naive, cuBLAS as the baseline) and a kind declared in a space file (the stencil example and its CuPy
baseline). Skipped where CuPy sees no GPU (tests/conftest.py)."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from autotune.devices import profile
from autotune.problems.base import ProblemKind, Scalars
from autotune.problems.gemm import GEMM, gemm_point
from autotune.space.generator import generate
from autotune.space.instance import Instance
from autotune.space.spec import load_space
from autotune.sweep.backends.base import Job
from autotune.sweep.backends.local import GpuBackend, LocalOptions
from autotune.testing.backends import BackendConformance
from autotune.vocab import Status, TestPoint

pytestmark = pytest.mark.gpu
ROOT = Path(__file__).resolve().parents[2]
CACHE = Path(tempfile.mkdtemp(prefix="autotune-conformance-"))


def local_backend() -> GpuBackend:
    return GpuBackend(LocalOptions(cache_dir=CACHE, compile_workers=4, timeout_s=60))


class TestLocalGemm(BackendConformance):
    space = load_space("gemm_naive")
    points = (gemm_point("fp32", "NT", 64, 48, 32, 300), gemm_point("fp64", "TN", 33, 17, 9, 100))

    def make_backend(self) -> GpuBackend:
        return local_backend()

    def jobs(self) -> list[Job]:
        instances = [Instance.of("gemm_naive", {"BLOCK_X": x, "BLOCK_Y": y}) for x, y in ((16, 8), (32, 4))]
        return [Job(self.space, i, self.points, GEMM.scalars({"beta": 0.5}), 5) for i in instances]

    def baseline_case(self) -> tuple[ProblemKind, TestPoint, Scalars]:
        return GEMM, self.points[0], GEMM.scalars()

    def test_everything_measured_is_verified(self) -> None:
        """Beyond the contract: these instances and cuBLAS are correct, so every measurement is `ok`."""
        with local_backend() as backend:
            got = list(backend.run(self.jobs()))
            assert all(m.status == Status.OK for m in got), [(m.status, m.error) for m in got]
            assert backend.baseline(GEMM, self.points[0], GEMM.scalars(), 5).status == Status.OK


class TestLocalStencil(BackendConformance):
    space = load_space(ROOT / "examples" / "stencil" / "space.yaml")

    def make_backend(self) -> GpuBackend:
        return local_backend()

    def jobs(self) -> list[Job]:
        kind = self.space.kind
        point = kind.point("fp32", "", {"ny": 1000, "nx": 777})
        instances = generate(self.space, profile("H100"), "fp32").instances()[:3]
        return [Job(self.space, i, (point,), kind.scalars(), 5) for i in instances]

    def baseline_case(self) -> tuple[ProblemKind, TestPoint, Scalars]:
        kind = self.space.kind
        return kind, kind.point("fp32", "", {"ny": 1000, "nx": 777}), kind.scalars()
