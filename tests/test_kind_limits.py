"""Limits checked before any work belong to the kind (`ProblemKind.check_limits`, `device_bytes`): GEMM's in
problems/gemm/limits.py, every other kind the generic rule (sizes an int, twice the bytes it moves)."""

from __future__ import annotations

from pathlib import Path

import pytest

from autotune.errors import ConfigError
from autotune.problems.base import INT32_MAX
from autotune.problems.gemm import GEMM, gemm_point
from autotune.space.spec import load_space
from autotune.sweep.config import parse_config
from autotune.sweep.limits import check_points_fit, point_bytes, point_limit_error

STENCIL = Path(__file__).resolve().parent.parent / "examples" / "stencil"


def stencil_kind():  # type: ignore[no-untyped-def]
    return load_space(STENCIL / "space.yaml").kind


def test_gemm_limits_name_the_size_a_kernel_cannot_take() -> None:
    assert GEMM.check_limits(gemm_point("fp32", "NN", INT32_MAX, 1, 1, INT32_MAX)) is None
    size, message, _ = GEMM.check_limits(gemm_point("fp32", "NN", 4, INT32_MAX + 1, 4, 1))
    assert size == "n" and message.startswith("N = 2,147,483,648 is above 2^31 - 1")
    size, message, hint = GEMM.check_limits(gemm_point("fp64", "NN", 4, 4, 4, INT32_MAX + 1))
    assert size == "batch" and "at 4x4x4" in message and "smaller batch" in hint
    # the sweep's helpers find the built-in kind by the point's kind name
    assert point_limit_error(gemm_point("fp32", "NN", 4, 4, INT32_MAX + 1, 1))[0] == "k"


def test_other_kinds_get_the_generic_rule() -> None:
    kind = stencil_kind()
    ok = kind.point("fp32", "", {"ny": 4096, "nx": 4096})
    assert kind.check_limits(ok) is None
    # a declared kind counts its buffers as declared (out 4096 x 4096, inp padded by the 5x5 filter's halo),
    # plus the reference of its output in float64; not its roofline's `bytes:`
    assert kind.device_bytes(ok, {}) == 4 * (4096 * 4096 + 4100 * 4100) + 8 * 4096 * 4096
    assert point_bytes(ok, kind) == kind.device_bytes(ok, {})
    big = kind.point("fp32", "", {"ny": 4, "nx": INT32_MAX + 1})
    assert kind.check_limits(big)[0] == "nx"
    with pytest.raises(Exception, match="do not fit"):
        check_points_fit([ok], "x", free_bytes=kind.device_bytes(ok, {}) - 1, kinds={kind.name: kind})
    check_points_fit([ok], "x", free_bytes=kind.device_bytes(ok, {}), kinds={kind.name: kind})


def test_a_config_size_above_int32_is_refused_at_its_line() -> None:
    text = (
        (STENCIL / "sweep.yaml")
        .read_text()
        .replace("sizes: {ny: 4000, nx: 3001}", "sizes: {ny: 4000,\n      nx: 3000000000}")
    )
    assert "3000000000" in text
    with pytest.raises(ConfigError) as err:
        parse_config(text, file=STENCIL / "sweep.yaml")
    line = next(i for i, t in enumerate(text.splitlines(), 1) if "3000000000" in t)
    assert err.value.line == line and "nx = 3,000,000,000 is above 2^31 - 1" in err.value.message


def test_a_declared_kind_counts_its_buffers_and_refuses_a_negative_shape(tmp_path) -> None:
    """A buffer of 64 x 96 x 10^11 floats was allocated (and every instance recorded as out of memory); a
    negative dimension failed on the GPU. Both are refused before the sweep records anything."""
    import shutil

    from autotune.errors import SpaceError
    from autotune.paths import ROOT

    folder = tmp_path / "t"
    shutil.copytree(ROOT / "examples" / "transpose", folder, ignore=shutil.ignore_patterns("results"))
    space = folder / "space.yaml"
    text = space.read_text()
    space.write_text(
        text.replace("shape: [rows, cols], init: random", "shape: [rows, cols, 100000000000], init: random")
    )
    kind = load_space(space).kind
    p = kind.point("fp32", "", {"rows": 64, "cols": 96})
    assert kind.device_bytes(p, {}) >= 64 * 96 * 10**11 * 4
    with pytest.raises(Exception, match="do not fit"):
        check_points_fit([p], "NVIDIA H100 80GB HBM3", kinds={kind.name: kind})
    space.write_text(text.replace("shape: [cols, rows], output: true", "shape: [cols, rows - 100], output: true"))
    kind = load_space(space).kind
    with pytest.raises(SpaceError, match=r"buffer `out` has shape \[96, -36\]"):
        check_points_fit(
            [kind.point("fp32", "", {"rows": 64, "cols": 96})], "NVIDIA H100 80GB HBM3", kinds={kind.name: kind}
        )
