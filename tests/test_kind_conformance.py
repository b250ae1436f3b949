"""The GEMM kind and the three examples' declared kinds pass the kind conformance suite (autotune.testing.kinds),
the one a third-party kind runs in its own tests. The GPU half skips without CuPy (tests/gpu/ runs it)."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import pytest

from autotune.problems.base import ProblemKind
from autotune.problems.gemm import GEMM
from autotune.space.spec import load_space
from autotune.testing.kinds import KindTests

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


class TestGemm(KindTests):
    @pytest.fixture
    def kind_factory(self) -> Callable[[], ProblemKind]:
        return lambda: GEMM

    @pytest.fixture
    def sample_sizes(self, kind: ProblemKind) -> list[dict[str, int]]:
        return [
            {"m": 64, "n": 64, "k": 64, "batch": 10},
            {"m": 33, "n": 7, "k": 100, "batch": 1},
            {"m": 128, "n": 256, "k": 16, "batch": 3},
        ]


@pytest.fixture(params=["transpose", "stencil", "softmax"])
def example(request: pytest.FixtureRequest) -> str:
    return request.param


class TestExampleKinds(KindTests):
    @pytest.fixture
    def kind_factory(self, example: str) -> Callable[[], ProblemKind]:
        return lambda: load_space(EXAMPLES / example / "space.yaml").kind


def test_the_suite_catches_a_broken_kind() -> None:
    """The suite's checks can fail: a kind whose distance is not symmetric and whose bytes are zero."""

    class Broken(ProblemKind):
        name = "broken"
        size_names = ("a", "b")

        def bytes_moved(self, point, scalars):  # noqa: ANN001, ANN201
            return 0

        def distance(self, a, b):  # noqa: ANN001, ANN201
            return float(a.a - b.a)

        def allocate(self, point, convention, scalars, l2_bytes, seed):  # noqa: ANN001, ANN201
            raise NotImplementedError

    kind, suite = Broken(), KindTests()
    points = [kind.point("fp32", "", {"a": 2, "b": 3}), kind.point("fp32", "", {"a": 5, "b": 3})]
    with pytest.raises(AssertionError):
        suite.test_work_of_a_point(kind, points)
    with pytest.raises(AssertionError):
        suite.test_distance(kind, points)
    KindTests().test_table_and_tie_sizes_partition_the_sizes(kind)  # the default partition holds
