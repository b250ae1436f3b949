"""GEMM's batch rule (problems/gemm/batch.py) and the kind hook that carries it (ProblemKind.derived_sizes,
derive_sizes, infer_budget): GEMM derives its batch from a byte budget, other kinds derive nothing."""

from __future__ import annotations

import math

from autotune.problems.gemm import GEMM, gemm_point
from autotune.problems.gemm.batch import batch_for_bytes, infer_batch_bytes, problem_bytes
from autotune.space.spec import load_space
from autotune.paths import ROOT


def test_batch_for_bytes_is_the_smallest_batch_reaching_the_budget() -> None:
    assert problem_bytes("fp16", 8, 16, 32) == 2 * (8 * 32 + 32 * 16 + 8 * 16)
    b = batch_for_bytes(10**6, "fp16", 8, 16, 32)
    assert b * problem_bytes("fp16", 8, 16, 32) >= 10**6 > (b - 1) * problem_bytes("fp16", 8, 16, 32)
    assert batch_for_bytes(1, "fp64", 1000, 1000, 1000) == 1


def test_gemm_derives_its_batch_and_infers_the_roundest_budget() -> None:
    assert GEMM.derived_sizes == ("batch",)
    assert GEMM.derive_sizes("fp32", "NN", {"m": 4, "n": 4, "k": 4}, 10**8)["batch"] == math.ceil(10**8 / (4 * 48))
    assert GEMM.derive_sizes("fp32", "NN", {"m": 4, "n": 4, "k": 4, "batch": 3}, 10**8)["batch"] == 3  # kept
    pts = [gemm_point("fp32", "NN", s, s, s, batch_for_bytes(100 * 10**6, "fp32", s, s, s)) for s in (4, 12, 24)]
    assert GEMM.infer_budget(pts) == 100 * 10**6 and infer_batch_bytes(pts) == 100 * 10**6
    assert GEMM.infer_budget([gemm_point("fp32", "NN", 4, 4, 4, 1), gemm_point("fp32", "NN", 4, 4, 4, 9)]) is None
    assert GEMM.infer_budget([]) is None


def test_other_kinds_derive_nothing() -> None:
    kind = load_space(ROOT / "examples" / "stencil" / "space.yaml").kind
    assert kind.derived_sizes == () and kind.infer_budget([]) is None
    assert kind.derive_sizes("fp32", "", {"ny": 8, "nx": 9}, 10**9) == {"ny": 8, "nx": 9}
