"""Read-only SQL access and the README recipes, on SQLite and (when configured) PostgreSQL."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
from pg import db_url, fresh_pg_url, instances, points, record_sample, sqlite_url

from autotune.problems.gemm import GEMM
from autotune.store import query
from autotune.store.query import RECIPES, QueryError, run_query
from autotune.store.store import Store
from tests.support.committed import committed_databases, example_databases

FIXTURES = (db_url, fresh_pg_url, sqlite_url)  # pytest finds these fixtures by name in this module


@pytest.fixture
def recorded(db_url: str) -> str:
    with Store.open(db_url) as store:
        record_sample(store)
    return db_url


def count(url: str) -> int:
    return int(run_query(url, "SELECT COUNT(*) AS n FROM measurements").n[0])


def test_select_returns_a_frame(recorded: str) -> None:
    frame = run_query(recorded, "SELECT status, COUNT(*) AS n FROM measurements GROUP BY status ORDER BY status")
    assert list(frame.status) == ["ok", "wrong"] and list(frame.n) == [5, 1]
    assert run_query(recorded, "SELECT ':not_a_param' AS s").s[0] == ":not_a_param"


@pytest.mark.parametrize(
    "sql",
    [
        "DELETE FROM measurements",
        "DROP TABLE measurements",
        "UPDATE measurements SET median_ms = 0",
        "INSERT INTO schema_meta (key, value) VALUES ('x', 'y')",
        "SELECT 1; DELETE FROM measurements",
        "COMMIT; DELETE FROM measurements",
    ],
)
def test_writes_fail_and_change_nothing(recorded: str, sql: str) -> None:
    with pytest.raises(QueryError) as err:
        run_query(recorded, sql)
    assert "query failed" in err.value.message
    assert count(recorded) == 6
    assert set(run_query(recorded, "SELECT median_ms FROM measurements WHERE status = 'ok'").median_ms) == {
        1.0,
        2.0,
        3.0,
    }


def test_write_message_says_read_only(recorded: str) -> None:
    with pytest.raises(QueryError) as err:
        run_query(recorded, "DELETE FROM measurements")
    assert "read-only" in (err.value.hint or "")


def test_bad_sql_and_missing_database(recorded: str, tmp_path: Path) -> None:
    with pytest.raises(QueryError, match="query failed"):
        run_query(recorded, "SELEC 1")
    with pytest.raises(QueryError, match="no SQLite database"):
        run_query(f"sqlite:///{tmp_path / 'none.sqlite'}", "SELECT 1")


def test_query_while_a_sweep_writes(sqlite_url: str) -> None:
    with Store.open(sqlite_url) as store:
        record_sample(store, finish=False)  # the sweep still holds the lock and its connections
        assert count(sqlite_url) == 6


def _sql(name: str) -> str:
    return RECIPES[name].sql(GEMM.name, GEMM.size_names)


def test_best_per_point(recorded: str) -> None:
    best = query.best_per_point(recorded)
    assert len(best) == 2 and set(best.instance_id) == {instances()[0].id}
    assert list(best.columns[:8]) == ["device", "space", "kind", "precision", "shape", "m", "n", "k"]
    assert list(best.median_ms) == [1.0, 1.0]
    assert query.best_per_point(recorded, device="no such GPU").empty
    assert len(query.best_per_point(recorded, device="Test GPU", space="gemm_test")) == 2


def test_distance_from_best(recorded: str) -> None:
    second = query.distance_from_best(recorded, instances()[1].id)
    assert list(second.slowdown) == [2.0, 2.0] and list(second.loss) == [0.5, 0.5] and list(second.place) == [2, 2]
    third = query.distance_from_best(recorded, instances()[2].id)  # wrong at the fp32 point: absent there
    assert list(third.precision) == ["fp64"] and third.slowdown[0] == 3.0


def test_failures_by_kind(recorded: str) -> None:
    f = query.failures_by_kind(recorded)
    assert f[["status", "count"]].values.tolist() == [["wrong", 1]]
    assert f.example_error[0].startswith("max rel err")


def test_baseline_speedup(recorded: str) -> None:
    s = query.baseline_speedup(recorded).set_index("precision")
    assert s.speedup["fp64"] == 2.0 and s.speedup["fp32"] == 5.0 and set(s.library) == {"cublas"}
    assert s.baseline_roofline_frac["fp64"] == pytest.approx(s.roofline_frac["fp64"] / 2)


@pytest.mark.parametrize("name", sorted(RECIPES))
def test_recipes_run_verbatim(recorded: str, name: str) -> None:
    frame = run_query(recorded, _sql(name))
    assert not frame.empty
    api = getattr(query, name, None)
    if api is not None and name != "distance_from_best":
        assert frame.values.tolist() == api(recorded).drop(columns="kind", errors="ignore").values.tolist()


def _readme_sql() -> list[str]:
    """The SQL blocks of the query recipes page (docs/queries.md; once a section of the README)."""
    section = (Path(__file__).parents[1] / "docs" / "queries.md").read_text()
    return [b.split("```")[0].strip() for b in section.split("```sql\n")[1:]]


README_SQL = _readme_sql()
# the README's blocks that are not a recipe's text (those run on every database as the recipe, without the ";")
OTHER_README_SQL = [sql for sql in README_SQL if sql not in {_sql(name) + ";" for name in RECIPES}]


def test_readme_sql_is_the_recipes() -> None:
    """The SQL blocks of docs/queries.md are the recipes' GEMM text, verbatim."""
    for name in ("best_per_point", "distance_from_best", "failures_by_kind", "baseline_speedup", "best_by_parameter"):
        assert _sql(name) + ";" in README_SQL, name
    assert len(README_SQL) == 6


def test_recipes_on_every_committed_database() -> None:
    """Every README recipe on every committed database: the GEMM text on GEMM databases answers like the per-kind
    API; other kinds' databases answer through their view. None warns (all are at the current schema). Every SQL
    block of the README runs verbatim on the first GEMM database; on the others, the blocks that are not a recipe's
    text (test_readme_sql_is_the_recipes: the others are, with a ";")."""
    verbatim = README_SQL
    for gz in [*committed_databases(), *example_databases()]:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            kinds = set(run_query(str(gz), "SELECT DISTINCT kind FROM test_points").kind)
            # a sweep without a library (tune_kernel's: Kernel Tuner has none) records no baseline to compare with
            has_baseline = int(run_query(str(gz), "SELECT count(*) AS n FROM baselines WHERE status = 'ok'").n[0]) > 0
        for name in sorted(RECIPES):
            api = getattr(query, name, None)
            if "gemm" in kinds:
                frame = run_query(str(gz), _sql(name))
                if api is not None and name != "distance_from_best":
                    answer = api(str(gz))
                    assert frame.values.tolist() == answer.drop(columns="kind", errors="ignore").values.tolist()
            elif api is not None and name != "distance_from_best":
                frame = answer = api(str(gz))
                assert set(frame.get("kind", kinds)) <= kinds
            if name == "best_per_point":
                best = answer  # the API's answer, checked below
            if name == "best_per_point" or (name == "baseline_speedup" and has_baseline):
                assert len(frame) > 0, (gz, name)
        if "gemm" in kinds:  # the SQL blocks of the README's recipes, verbatim
            answers = [run_query(str(gz), sql) for sql in verbatim]
            if verbatim is README_SQL:
                assert len(answers[0]) > 0, gz  # best per point
            verbatim = OTHER_README_SQL
        sizes = [
            c
            for c in best.columns
            if c
            not in (
                "device",
                "space",
                "kind",
                "precision",
                "shape",
                "instance_id",
                "instance",
                "median_ms",
                "gflops",
                "gbs",
                "roofline_frac",
            )
        ]
        assert sizes and best[sizes].notna().all().all(), gz


def test_a_missing_kind_view_names_the_views_there(recorded: str) -> None:
    with pytest.raises(QueryError) as err:
        run_query(recorded, "SELECT * FROM points_stencil")
    assert "points_gemm(id, precision, shape, m, n, k, batch)" in (err.value.hint or "")


def test_best_by_parameter_uses_instance_params(recorded: str) -> None:
    frame = run_query(recorded, _sql("best_by_parameter"))
    fp64 = frame[frame.precision == "fp64"]
    assert dict(zip(fp64.dim_x, fp64.best_ms, strict=True)) == {8: 3.0, 16: 1.0, 32: 2.0}
    assert len(points()) == frame.groupby(["precision", "m"]).ngroups
