"""Sweep configs: every accepted form, and every mistake reported at its line with a hint."""

from __future__ import annotations

import math
import textwrap
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from autotune.problems.gemm import gemm_point
from autotune.sweep.config import SweepConfig, load_config, parse_config
from autotune.errors import ConfigError
from autotune.paths import CONFIGS_DIR, SPACES_DIR

SPACE = next((p.stem for p in sorted(SPACES_DIR.glob("*.yaml"))), None)
needs_space = pytest.mark.skipif(SPACE is None, reason="no space file under spaces/")


def cfg(body: str, file: str = "sweep.yaml") -> SweepConfig:
    return parse_config(textwrap.dedent(body).replace("SPACE", SPACE or "x"), file=file)


def error(body: str) -> ConfigError:
    with pytest.raises(ConfigError) as err:
        cfg(body)
    return err.value


@needs_space
def test_default_config_loads() -> None:
    c = load_config(CONFIGS_DIR / "default.yaml")
    assert c.name == "default" and c.spaces[0].ref == "gemm_batched_simt"
    assert c.database == f"sqlite:///{Path.cwd() / 'results' / 'default.sqlite'}"  # under the current directory


@needs_space
def test_default_database_is_under_the_current_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A sweep run from a user's own folder writes results/<name>.sqlite there, as the README says, not
    into the checkout of an editable install."""
    monkeypatch.chdir(tmp_path)
    c = load_config(CONFIGS_DIR / "default.yaml")
    assert c.database == f"sqlite:///{tmp_path / 'results' / 'default.sqlite'}"
    assert {p.precision for p in c.points} == {"fp64", "fp32"} and {p.shape for p in c.points} == {"NN"}
    for p in c.points:  # the working set of every point is at least 100 MB and just so
        per_problem = p.elem_bytes * (p.m * p.k + p.k * p.n + p.m * p.n)
        assert p.batch * per_problem >= 100e6 > (p.batch - 1) * per_problem
    assert c.budget_s is not None and c.bk >= 1 and 0 <= c.tol < 1


@needs_space
def test_size_forms_and_defaults() -> None:
    c = cfg("""
        spaces: [SPACE]
        points:
          - precisions: fp32
            sizes: {square: {from: 2, to: 10, step: 4}}
            batch: 7
          - precisions: [fp64]
            shapes: [NT, TT]
            sizes: {mn: [16, 32], k: 8}
            batch: 3
          - precisions: [fp16]
            sizes: {m: {start: 1, stop: 2}, n: 5, k: {pow2: [3, 16]}}
            batch: 1
          - precisions: [fp16]
            sizes: {triples: [[1000, 2, 40]]}
            batch: 1
        """)
    assert c.name == "sweep" and c.scalars == {"alpha": 1.0, "beta": 0.0} and c.repetitions == 20
    assert c.budget_s is None and (c.bk, c.tol) == (10, 0.05)
    assert c.points[:3] == tuple(gemm_point("fp32", "NN", s, s, s, 7) for s in (2, 6, 10))
    assert c.points[3:7] == (
        gemm_point("fp64", "NT", 16, 16, 8, 3),
        gemm_point("fp64", "NT", 32, 32, 8, 3),
        gemm_point("fp64", "TT", 16, 16, 8, 3),
        gemm_point("fp64", "TT", 32, 32, 8, 3),
    )
    assert [(p.m, p.n, p.k) for p in c.points[7:13]] == [
        (1, 5, 4),
        (1, 5, 8),
        (1, 5, 16),
        (2, 5, 4),
        (2, 5, 8),
        (2, 5, 16),
    ]
    assert c.points[13] == gemm_point("fp16", "NN", 1000, 2, 40, 1)
    hash(c)  # immutable value object


@needs_space
def test_duplicate_points_are_kept_once_and_everything_else_is_read() -> None:
    c = cfg("""
        name: mine
        spaces:
          - {space: SPACE, device: h100, soft: false, soft_off: [a, b]}
        points:
          - {precisions: [fp64], sizes: {square: [4, 4, 8]}, batch: 2}
          - {precisions: [fp64], sizes: {square: 8}, batch: 2}
        alpha: 2
        beta: -1.5
        database: postgresql+psycopg://u@localhost/db
        repetitions: 50
        budget: 1h30m
        bk: 3
        tol: 0
        """)
    assert [p.m for p in c.points] == [4, 8]
    assert c.spaces[0].device == "h100" and c.spaces[0].soft is False and c.spaces[0].soft_off == ("a", "b")
    assert c.spaces[0].path == SPACES_DIR / f"{SPACE}.yaml"
    assert (c.scalars, c.repetitions, c.budget_s, c.bk, c.tol) == ({"alpha": 2.0, "beta": -1.5}, 50, 5400.0, 3, 0.0)
    assert c.database == "postgresql+psycopg://u@localhost/db"


@needs_space
@given(target=st.integers(1, 10**10), n=st.integers(1, 300), prec=st.sampled_from(["fp16", "fp32", "fp64"]))
def test_bytes_batch_is_the_smallest_that_reaches_the_target(target: int, n: int, prec: str) -> None:
    c = cfg(f"""
        spaces: [SPACE]
        points: {{precisions: [{prec}], sizes: {{square: {n}}}, batch: {{bytes: {target}}}}}
        """)
    p = c.points[0]
    per = p.elem_bytes * 3 * n * n
    assert p.batch * per >= target and (p.batch == 1 or (p.batch - 1) * per < target)


@needs_space
@pytest.mark.parametrize("text, value", [("100MB", 100e6), ("1.5GB", 1.5e9), ("512MiB", 512 * 2**20), ("3e8", 3e8)])
def test_byte_units(text: str, value: float) -> None:
    c = cfg(f"""
        spaces: [SPACE]
        points: {{precisions: [fp64], sizes: {{square: 16}}, batch: {{bytes: {text}}}}}
        """)
    assert c.points[0].batch == math.ceil(value / (8 * 3 * 256))


@needs_space
def test_bare_database_path_becomes_an_sqlite_url(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    c = cfg("""
        spaces: [SPACE]
        points: {precisions: [fp64], sizes: {square: 4}, batch: 1}
        database: out/r.sqlite
        """)
    assert c.database == f"sqlite:///{tmp_path / 'out' / 'r.sqlite'}"


@needs_space
def test_space_given_as_a_path_relative_to_the_config(tmp_path: Path) -> None:
    (tmp_path / "my.yaml").write_text((SPACES_DIR / f"{SPACE}.yaml").read_text())
    c = parse_config(
        "spaces: [my.yaml]\npoints: {precisions: [fp64], sizes: {square: 4}, batch: 1}\n", file=tmp_path / "c.yaml"
    )
    assert c.spaces[0].path == (tmp_path / "my.yaml").resolve() and c.name == "c"


GOOD_POINTS = "points: {precisions: [fp64], sizes: {square: 4}, batch: 1}\n"


@pytest.mark.parametrize(
    "body, line, words, hint",
    [
        ("spaces: [SPACE]\n" + GOOD_POINTS + "tolerance: 0.1\n", 3, "unknown key `tolerance`", "did you mean `tol`"),
        ("spaces: [no_such_space]\n" + GOOD_POINTS, 1, "unknown space 'no_such_space'", "known spaces"),
        ("spaces: [missing/s.yaml]\n" + GOOD_POINTS, 1, "no space file", "relative to"),
        ("spaces:\n  - {space: SPACE, device: Z80}\n" + GOOD_POINTS, 2, "unknown device profile", "H100"),
        (
            "spaces: [SPACE]\npoints:\n  precisions: [fp65]\n  sizes: {square: 4}\n  batch: 1\n",
            3,
            "unknown precisions entry 'fp65'",
            "fp64",
        ),
        (
            "spaces: [SPACE]\npoints:\n  precisions: [fp64]\n  shapes: [NX]\n  sizes: {square: 4}\n  batch: 1\n",
            4,
            "unknown shapes entry",
            "NN",
        ),
        (
            "spaces: [SPACE]\npoints:\n  precisions: [fp64]\n  sizes: {square: 4, k: 8}\n  batch: 1\n",
            4,
            "cannot read sizes",
            "fixed K",
        ),
        (
            "spaces: [SPACE]\npoints:\n  precisions: [fp64]\n  sizes: {square: {from: 8, to: 2}}\n  batch: 1\n",
            4,
            "empty range",
            ">=",
        ),
        (
            "spaces: [SPACE]\npoints:\n  precisions: [fp64]\n  sizes: {square: 0}\n  batch: 1\n",
            4,
            "integer >= 1",
            "whole number",
        ),
        (
            "spaces: [SPACE]\npoints:\n  precisions: [fp64]\n  sizes: {square: 4}\n  batch: {bytes: lots}\n",
            5,
            "cannot read a size in bytes",
            "100MB",
        ),
        ("spaces: [SPACE]\npoints:\n  precisions: [fp64]\n  sizes: {square: 4}\n", 3, "need `batch:`", "sweep-configs"),
        ("spaces:\n  - {space: SPACE, where: 'NSG >>= 2'}\n" + GOOD_POINTS, 2, "where:", ""),
        ("spaces:\n  - {space: SPACE, max_instances: lots}\n" + GOOD_POINTS, 2, "integer >= 1", "whole number"),
        ("spaces: [SPACE]\n" + GOOD_POINTS + "tol: 1.5\n", 3, "outside [0, 1)", "0.05"),
        ("spaces: [SPACE]\n" + GOOD_POINTS + "budget: soon\n", 3, "time budget", "30m"),
        ("spaces: [SPACE]\n" + GOOD_POINTS + "repetitions: 0\n", 3, "integer >= 1", "whole number"),
        ("spaces: [SPACE]\n" + GOOD_POINTS + "beta: zero\n", 3, "expected a number", "finite"),
        ("spaces: [SPACE]\n" + GOOD_POINTS + "bk: 2\nbk: 3\n", 4, "appears twice", "keep one"),
        ("spaces: [SPACE]\n" + GOOD_POINTS + "database: 'nope://x:y:z'\n", 3, "not a database URL", "sqlite"),
        ("name: a b\nspaces: [SPACE]\n" + GOOD_POINTS, 1, "cannot be a file name", "letters"),
        (GOOD_POINTS, 1, "missing `spaces:`", "default.yaml"),
        ("spaces: [SPACE\n" + GOOD_POINTS, 2, "not valid YAML", "syntax"),
        ("- just\n- a list\n", 1, "is a mapping", "default.yaml"),
    ],
)
def test_mistakes_name_file_line_and_fix(body: str, line: int, words: str, hint: str) -> None:
    if SPACE is None and "SPACE" in body and "no_such" not in body:
        pytest.skip("no space file under spaces/")
    err = error(body)
    assert err.file == "sweep.yaml" and err.line == line, str(err)
    assert words in err.message and hint in (err.hint or ""), str(err)
    assert str(err).startswith(f"sweep.yaml:{line}: ")


def test_missing_config_file_lists_the_configs_there(tmp_path: Path) -> None:
    (tmp_path / "nightly.yaml").write_text("x: 1\n")
    with pytest.raises(ConfigError) as err:
        load_config(tmp_path / "nighty.yaml")
    assert "nightly" in (err.value.hint or "")


STENCIL = Path(__file__).resolve().parent.parent / "examples" / "stencil"


def stencil_cfg(extra: str) -> SweepConfig:
    text = (STENCIL / "sweep.yaml").read_text() + extra
    return parse_config(text, file=STENCIL / "sweep.yaml")


@needs_space
def test_scalars_of_a_gemm_config() -> None:
    """`scalars:` overrides the kind's defaults; the top-level alpha/beta older GEMM configs write still work."""
    base = "spaces: [SPACE]\n" + GOOD_POINTS
    assert cfg(base + "scalars: {beta: 2}\n").scalars == {"alpha": 1.0, "beta": 2.0}
    assert cfg(base + "alpha: 0.5\nscalars: {beta: -1}\n").scalars == {"alpha": 0.5, "beta": -1.0}
    err = error(base + "scalars:\n  beta: 1\n  gama: 2\n")
    assert err.line == 5 and "unknown scalar `gama`" in err.message and "alpha (gemm)" in (err.hint or "")
    err = error(base + "beta: 1\nscalars: {beta: 2}\n")
    assert err.line == 3 and "given twice" in err.message
    err = error(base + "scalars: {beta: one}\n")
    assert err.line == 3 and "expected a number" in err.message


def test_a_kind_without_scalars_refuses_alpha_and_unknown_scalars() -> None:
    """A kind declares its scalars; alpha/beta are GEMM's, so a stencil config that sets them is an error at its line."""
    c = stencil_cfg("")
    assert c.scalars == {} and {p.kind for p in c.points} == {"convolution5x5"}
    lines = len((STENCIL / "sweep.yaml").read_text().splitlines())
    for extra, words in (
        ("alpha: 2\n", "`alpha:` sets a scalar no kind of this config has"),
        ("scalars: {gain: 2}\n", "unknown scalar `gain`"),
    ):
        with pytest.raises(ConfigError) as err:
            stencil_cfg(extra)
        assert err.value.line == lines + 1 and words in err.value.message, str(err.value)
        assert "convolution5x5 declare no scalars" in (err.value.hint or ""), str(err.value)


EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def _mn_transpose(tmp_path: Path) -> Path:
    """examples/transpose with its sizes renamed m and n (names GEMM also uses) and its kind renamed."""
    for f in ("transpose.cu", "reference.py"):
        (tmp_path / f).write_text((EXAMPLES / "transpose" / f).read_text())
    text = (EXAMPLES / "transpose" / "space.yaml").read_text()
    text = text.replace("rows", "m").replace("cols", "n").replace("name: transpose\n", "name: mn_transpose\n")
    (tmp_path / "space.yaml").write_text(text)
    return tmp_path / "space.yaml"


def test_a_kind_whose_sizes_are_named_like_gemms_is_read_as_itself(tmp_path: Path) -> None:
    space = _mn_transpose(tmp_path)
    c = parse_config(f"spaces: [{space}]\npoints: {{sizes: {{m: [64, 128], n: 32}}}}\n", file=str(tmp_path / "s.yaml"))
    assert [(p.kind, p.m, p.n) for p in c.points] == [("mn_transpose", 64, 32), ("mn_transpose", 128, 32)]
    assert c.scalars == {}


@pytest.mark.parametrize(
    "points, words, hint",
    [
        ("{sizes: {m: 64, n: 32}, batch: 4}", "unknown key `batch`", "sizes"),
        ("{sizes: {square: 64}}", "unknown key `square`", ""),
        ("{sizes: {m: 64}}", "miss n", "every size"),
        ("{sizes: {m: 64, n: 32}, alpha: 2}", "unknown key `alpha`", ""),
    ],
)
def test_gemm_forms_are_refused_for_other_kinds(tmp_path: Path, points: str, words: str, hint: str) -> None:
    space = _mn_transpose(tmp_path)
    with pytest.raises(ConfigError) as err:
        parse_config(f"spaces: [{space}]\npoints: {points}\n", file=str(tmp_path / "s.yaml"))
    assert words in str(err.value) and hint in (err.value.hint or "") and err.value.line == 2
