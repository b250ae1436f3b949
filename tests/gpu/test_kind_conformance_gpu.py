"""GPU tier: the GEMM kind and the three examples' kinds pass the GPU half of the kind conformance suite
(allocate, args, reference, verify, baseline: autotune.testing.kinds.KindGpuTests)."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import pytest

from autotune.problems.base import ProblemKind
from autotune.problems.gemm import GEMM
from autotune.space.spec import load_space
from autotune.testing.kinds import KindGpuTests

pytestmark = pytest.mark.gpu
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


class TestGemmOnGpu(KindGpuTests):
    @pytest.fixture
    def kind_factory(self) -> Callable[[], ProblemKind]:
        return lambda: GEMM

    @pytest.fixture
    def sample_sizes(self, kind: ProblemKind) -> list[dict[str, int]]:
        return [{"m": 64, "n": 64, "k": 64, "batch": 10}, {"m": 33, "n": 7, "k": 100, "batch": 3}]


@pytest.fixture(params=["transpose", "stencil", "softmax"])
def example(request: pytest.FixtureRequest) -> str:
    return request.param


class TestExampleKindsOnGpu(KindGpuTests):
    @pytest.fixture
    def kind_factory(self, example: str) -> Callable[[], ProblemKind]:
        return lambda: load_space(EXAMPLES / example / "space.yaml").kind
