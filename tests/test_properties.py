"""Property-based tests (Hypothesis): the expression language, the space and sweep-config loaders, and the
read-only guard of `autotune query` never fail with anything but their documented errors."""

from __future__ import annotations

import hashlib
import math
import sqlite3
import tempfile
from pathlib import Path

import numpy as np
import pytest
import yaml
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from autotune.devices import get_device
from autotune.errors import UserError
from autotune.expr import ExprError, parse
from autotune.paths import SPACES_DIR

FAST = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# ---- expressions ------------------------------------------------------------------------------------------

NAMES = {"x": 7, "y": -3, "z": 0}
BIG = 2**53  # an intermediate beyond this may overflow int64 in numpy while Python's ints do not


def _leaf() -> st.SearchStrategy[tuple[str, int]]:
    return st.one_of(
        st.integers(-20, 20).map(lambda v: (f"({v})", v)), st.sampled_from(sorted(NAMES)).map(lambda n: (n, NAMES[n]))
    )


def _combine(children: st.SearchStrategy) -> st.SearchStrategy:
    def binop(op: str):
        def build(a, b):
            text = f"({a[0]} {op} {b[0]})"
            if a[1] is None or b[1] is None:
                return text, None
            try:
                value = {
                    "+": a[1] + b[1],
                    "-": a[1] - b[1],
                    "*": a[1] * b[1],
                    "//": a[1] // b[1] if b[1] else None,
                    "%": a[1] % b[1] if b[1] else None,
                    "<": int(a[1] < b[1]),
                    "==": int(a[1] == b[1]),
                    "**": a[1] ** b[1] if 0 <= b[1] <= 6 else None,
                }[op]
            except (OverflowError, ZeroDivisionError):
                value = None
            return text, value if value is None or abs(value) < BIG else None

        return st.tuples(children, children).map(lambda ab: build(*ab))

    def call(fn: str):
        def build(args):
            text = f"{fn}({', '.join(a[0] for a in args)})"
            values = [a[1] for a in args]
            if any(v is None for v in values):
                return text, None
            return text, {"min": min, "max": max}[fn](values)

        return st.lists(children, min_size=2, max_size=3).map(build)

    return st.one_of(
        *(binop(op) for op in ("+", "-", "*", "//", "%", "<", "==", "**")),
        call("min"),
        call("max"),
        children.map(lambda a: (f"abs({a[0]})", None if a[1] is None else abs(a[1]))),
        children.map(lambda a: (f"(-{a[0]})", None if a[1] is None else -a[1])),
        st.tuples(children, children, children).map(
            lambda t: (
                f"({t[0][0]} if {t[1][0]} else {t[2][0]})",
                None if t[1][1] is None else (t[0][1] if t[1][1] else t[2][1]),
            )
        ),
    )


EXPRESSIONS = st.recursive(_leaf(), _combine, max_leaves=12)


@FAST
@given(EXPRESSIONS)
def test_expressions_match_python_on_ints(case: tuple[str, int | None]) -> None:
    text, expected = case
    try:
        got = parse(text)(dict(NAMES))
    except ExprError:
        assert expected is None or abs(expected) >= 2**62  # only where Python's value is undefined (or huge)
        return
    if expected is not None:
        assert np.asarray(got).item() == expected, text


@FAST
@given(EXPRESSIONS, st.integers(1, 6))
def test_expressions_vectorize_like_scalars(case: tuple[str, int | None], n: int) -> None:
    text, expected = case
    assume(expected is not None)
    arrays = {k: np.full(n, v) for k, v in NAMES.items()}
    try:
        got = parse(text)(arrays)
    except ExprError:  # the vectorized walk may reject what short-circuit skipped in the scalar one
        return
    assert np.broadcast_to(np.asarray(got), (n,)).tolist() == [expected] * n, text


TOKENS = [
    "x",
    "y",
    "z",
    "q",
    "1",
    "0",
    "-2",
    "2.5",
    "'NN'",
    "+",
    "-",
    "*",
    "/",
    "//",
    "%",
    "**",
    "(",
    ")",
    "[",
    "]",
    ",",
    "<",
    "<=",
    "==",
    "!=",
    "and",
    "or",
    "not",
    "in",
    "if",
    "else",
    "min",
    "max",
    "ceil",
    "floor",
    "log2",
    "abs",
    ".",
    "__class__",
    "lambda",
    ":",
    "import",
    "1e400",
    "99999999999999999999",
]


@FAST
@given(st.one_of(st.lists(st.sampled_from(TOKENS), max_size=14).map(" ".join), st.text(max_size=40)))
def test_any_text_is_an_expression_or_an_expr_error(text: str) -> None:
    try:
        expr = parse(text)
    except ExprError:
        return
    for env in ({"x": 3, "y": 0, "z": -1}, {"x": np.arange(-3, 4), "y": np.zeros(7, dtype=int), "z": np.ones(7)}):
        try:
            expr(env)
        except ExprError:
            pass


# ---- the space loader (and the generator behind it) --------------------------------------------------------

SPACE_KEYS = ["name", "description", "parameters", "derived", "hard", "soft", "kernel"]
PARAM_VALUES = st.one_of(
    st.lists(st.one_of(st.integers(-4, 64), st.sampled_from(["a", "b"]), st.floats(allow_nan=True)), max_size=5),
    st.fixed_dictionaries(
        {"start": st.integers(-5, 40), "stop": st.integers(-5, 40)}, optional={"step": st.integers(-2, 8)}
    ),
    st.fixed_dictionaries({"pow2": st.lists(st.integers(-1, 300), max_size=3)}),
    st.integers(),
    st.none(),
    st.text(max_size=5),
)
EXPR_TEXT = st.one_of(
    st.sampled_from(
        [
            "A * B",
            "A + q",
            "A / (B - B)",
            "threads <= max_threads_per_block",
            "A in [1, 2]",
            "log2(A)",
            "A ** 99",
            "B if A else 'x'",
            "(",
            "A.b",
            "t",
        ]
    ),
    st.text(max_size=8),
)
CONSTRAINTS = st.lists(
    st.one_of(
        st.fixed_dictionaries(
            {"name": st.sampled_from(["c1", "c2", "c1"]), "expr": EXPR_TEXT}, optional={"reason": st.text(max_size=5)}
        ),
        st.text(max_size=5),
        st.integers(),
    ),
    max_size=3,
)


@st.composite
def space_documents(draw) -> object:
    doc: dict = {}
    for key in draw(st.lists(st.sampled_from(SPACE_KEYS), max_size=7, unique=True)):
        doc[key] = draw(
            {
                "name": st.one_of(st.sampled_from(["s", "fuzz"]), st.integers(), st.none()),
                "description": st.text(max_size=10),
                "parameters": st.one_of(
                    st.dictionaries(st.sampled_from(["A", "B", "_x", "threads", "1a"]), PARAM_VALUES, max_size=3),
                    st.lists(st.integers(), max_size=2),
                ),
                "derived": st.one_of(
                    st.dictionaries(st.sampled_from(["t", "threads", "A"]), EXPR_TEXT, max_size=2), st.text(max_size=3)
                ),
                "hard": CONSTRAINTS,
                "soft": CONSTRAINTS,
                "kernel": st.one_of(
                    st.none(),
                    st.dictionaries(
                        st.sampled_from(["source", "template", "convention", "block", "grid", "problems"]),
                        st.text(max_size=6),
                        max_size=3,
                    ),
                ),
            }[key]
        )
    return draw(st.one_of(st.just(doc), st.just(doc), st.lists(st.integers(), max_size=2), st.text(max_size=20)))


def _load_and_generate(path: Path) -> None:
    from autotune.space.generator import generate
    from autotune.space.spec import load_space

    try:
        space = load_space(path)
        generate(space, get_device("H100"), max_raw=10**5)
    except UserError:  # SpaceError and friends: file:line messages
        pass


@FAST
@given(space_documents())
def test_fuzzed_space_documents_give_space_errors_only(doc: object) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "fuzz.yaml"
        path.write_text(yaml.safe_dump(doc, allow_unicode=True))
        _load_and_generate(path)


REAL_SPACE = (SPACES_DIR / "gemm_naive.yaml").read_text().splitlines()


@FAST
@given(
    st.lists(
        st.tuples(
            st.integers(0, len(REAL_SPACE) - 1),
            st.one_of(st.just(None), st.text(max_size=12), st.sampled_from(["  - ", ": [", "{", "\t", "#"])),
        ),
        min_size=1,
        max_size=4,
    )
)
def test_mutated_space_files_give_space_errors_only(edits: list[tuple[int, str | None]]) -> None:
    lines = list(REAL_SPACE)
    for at, text in edits:  # None deletes a line, text replaces part of it
        if at < len(lines):
            lines[at] = "" if text is None else lines[at][: len(lines[at]) // 2] + text
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "gemm_naive.yaml"
        path.write_text("\n".join(lines) + "\n")
        _load_and_generate(path)


# ---- the sweep config loader -------------------------------------------------------------------------------

SIZES = st.one_of(
    st.integers(-2, 3_000_000_000),
    st.lists(st.integers(-1, 64), max_size=3),
    st.fixed_dictionaries(
        {"from": st.integers(-1, 40), "to": st.integers(-1, 40)}, optional={"step": st.integers(-1, 9)}
    ),
    st.fixed_dictionaries({"pow2": st.lists(st.integers(-1, 2**40), max_size=3)}),
    st.text(max_size=4),
)
BATCH = st.one_of(
    st.integers(-1, 2**40),
    st.floats(),
    st.text(max_size=6),
    st.fixed_dictionaries(
        {
            "bytes": st.one_of(
                st.sampled_from(["0MB", "1e30B", "100MB", "1e400B", "-1", "5GiB", "x"]), st.floats(), st.integers()
            )
        }
    ),
)
POINTS = st.fixed_dictionaries(
    {},
    optional={
        "precisions": st.one_of(st.lists(st.sampled_from(["fp64", "fp32", "fp8"]), max_size=2), st.text(max_size=4)),
        "shapes": st.lists(st.sampled_from(["NN", "TT", "XX"]), max_size=2),
        "sizes": st.one_of(
            st.fixed_dictionaries({"square": SIZES}),
            st.fixed_dictionaries({"mn": SIZES, "k": SIZES}),
            st.fixed_dictionaries({"triples": st.lists(st.lists(st.integers(-1, 2**33), max_size=4), max_size=2)}),
            st.dictionaries(st.sampled_from(["m", "n", "k", "square", "q"]), SIZES, max_size=3),
        ),
        "batch": BATCH,
    },
)
CONFIGS = st.fixed_dictionaries(
    {},
    optional={
        "spaces": st.one_of(
            st.lists(
                st.one_of(
                    st.sampled_from(["gemm_naive", "nope"]),
                    st.fixed_dictionaries(
                        {"space": st.sampled_from(["gemm_naive", "spaces/gemm_naive.yaml", "x"])},
                        optional={
                            "device": st.sampled_from(["H100", "Z"]),
                            "soft": st.booleans(),
                            "where": EXPR_TEXT,
                            "max_instances": st.one_of(st.integers(-1, 5), st.just("all"), st.text(max_size=3)),
                        },
                    ),
                ),
                max_size=2,
            ),
            st.text(max_size=4),
        ),
        "points": st.one_of(POINTS, st.lists(POINTS, max_size=2)),
        "name": st.one_of(st.text(max_size=6), st.integers()),
        "alpha": st.one_of(st.floats(), st.text(max_size=3)),
        "beta": st.floats(),
        "repetitions": st.integers(-1, 10**12),
        "budget": st.one_of(st.text(max_size=5), st.floats()),
        "strategy": st.sampled_from(["brute", "random", "annealing"]),
        "seed": st.integers(),
        "tol": st.floats(),
        "bk": st.integers(-1, 20),
        "max_instances": st.one_of(st.integers(-2, 10), st.just("all")),
        "database": st.one_of(st.text(max_size=8), st.integers()),
        "bogus": st.integers(),
    },
)


@FAST
@given(st.one_of(CONFIGS, CONFIGS, st.text(max_size=30), st.lists(st.integers(), max_size=2)))
def test_fuzzed_configs_give_config_errors_only(doc: object) -> None:
    from autotune.sweep.config import parse_config

    text = doc if isinstance(doc, str) else yaml.safe_dump(doc, allow_unicode=True)
    try:
        cfg = parse_config(text, Path(tempfile.gettempdir()) / "fuzz.yaml")
    except UserError:
        return
    from autotune.problems.base import INT32_MAX

    assert all(1 <= v <= INT32_MAX for p in cfg.points for v in (p.m, p.n, p.k, p.batch))


# ---- SQL fuzzing of the query guard -------------------------------------------------------------------------

TABLES = ["measurements", "sweeps", "schema_meta", "test_points", "sqlite_master", "nope"]
STATEMENTS = st.one_of(
    st.builds(
        lambda t, c: f"SELECT {c} FROM {t}", st.sampled_from(TABLES), st.sampled_from(["*", "count(*)", "id", "1"])
    ),
    st.builds(lambda t: f"DELETE FROM {t}", st.sampled_from(TABLES)),
    st.builds(lambda t: f"DROP TABLE {t}", st.sampled_from(TABLES)),
    st.builds(lambda t: f"UPDATE {t} SET id = id + 1", st.sampled_from(TABLES)),
    st.builds(lambda t: f"INSERT INTO {t} DEFAULT VALUES", st.sampled_from(TABLES)),
    st.builds(
        lambda f: f"ATTACH DATABASE '{f}' AS other", st.sampled_from(["fz.db", "file:fz.db?mode=rwc", ":memory:"])
    ),
    st.builds(lambda f: f"VACUUM INTO '{f}'", st.sampled_from(["fz.db", "fz2.db"])),
    st.sampled_from(
        [
            "VACUUM",
            "REINDEX",
            "ANALYZE",
            "BEGIN",
            "BEGIN IMMEDIATE",
            "COMMIT",
            "ROLLBACK",
            "SAVEPOINT a",
            "DETACH DATABASE main",
            "CREATE TABLE t (x)",
            "CREATE TEMP TABLE t (x)",
            "CREATE VIEW v AS SELECT 1",
            "CREATE INDEX i ON sweeps (id)",
            "PRAGMA optimize",
            "PRAGMA wal_checkpoint(TRUNCATE)",
            "PRAGMA incremental_vacuum",
        ]
    ),
    st.builds(
        lambda p, v: f"PRAGMA {p} = {v}",
        st.sampled_from(
            ["writable_schema", "user_version", "journal_mode", "query_only", "foreign_keys", "schema_version"]
        ),
        st.sampled_from(["0", "1", "OFF", "DELETE", "7"]),
    ),
    st.builds(lambda p: f"PRAGMA {p}", st.sampled_from(["table_info(sweeps)", "integrity_check", "user_version"])),
    st.builds(
        lambda s: f"WITH w AS (SELECT 1) {s}",
        st.sampled_from(["SELECT * FROM w", "DELETE FROM sweeps", "INSERT INTO schema_meta VALUES ('a', 'b')"]),
    ),
    st.builds(
        lambda a, b: f"{a}; {b}",
        st.sampled_from(["SELECT 1", "BEGIN"]),
        st.sampled_from(["DELETE FROM sweeps", "SELECT 2"]),
    ),
    st.text(max_size=20),
)


@pytest.fixture(scope="module")
def fuzz_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from pg import record_sample

    from autotune.store.store import Store

    path = tmp_path_factory.mktemp("sqlfuzz") / "db.sqlite"
    with Store.open(f"sqlite:///{path}") as store:
        record_sample(store)
    with sqlite3.connect(path) as c:  # a plain rollback journal: nothing beside the file but what a query makes
        c.execute("PRAGMA journal_mode = DELETE")
    return path


def _fingerprint(path: Path) -> str:
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as c:
        return hashlib.sha256("\n".join(c.iterdump()).encode()).hexdigest() + str(
            c.execute("PRAGMA user_version").fetchone()
        )


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(sql=STATEMENTS)
def test_query_guard_never_writes(fuzz_db: Path, sql: str) -> None:
    from autotune.store.query import QueryError, run_query

    before, files = _fingerprint(fuzz_db), sorted(p.name for p in fuzz_db.parent.iterdir())
    try:
        run_query(f"sqlite:///{fuzz_db}", sql)
    except QueryError:
        pass
    assert _fingerprint(fuzz_db) == before, sql
    assert sorted(p.name for p in fuzz_db.parent.iterdir()) == files, sql
    assert math.isfinite(fuzz_db.stat().st_size)
