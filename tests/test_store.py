"""The results database, on a real SQLite file and (when AUTOTUNE_TEST_PG_URL is set) a real PostgreSQL."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap

import pandas as pd
import pytest
import sqlalchemy as sa
from pg import SPACE, db_url, device_info, fresh_pg_url, instances, points, record_sample, sqlite_url

from autotune.problems.gemm import GEMM, gemm_point
from autotune.space.instance import Instance
from autotune.vocab import Measurement, Status, TestPoint
from autotune.paths import ROOT
from autotune.store.schema import SCHEMA_VERSION, figures
from autotune.store.store import SchemaVersionError, SpaceRecord, Store, StoreError, SweepLockedError, SweepStart

FIXTURES = (db_url, fresh_pg_url, sqlite_url)  # pytest finds these fixtures by name in this module


def _scalar(url: str, sql: str, **params: object) -> object:
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            return conn.execute(sa.text(sql), params).scalar()
    finally:
        engine.dispose()


def _execute(url: str, sql: str) -> None:
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        conn.execute(sa.text(sql))
    engine.dispose()


def test_figures_follow_measuring_md() -> None:
    p = gemm_point("fp64", "NN", 32, 32, 32, 1000)
    work = (GEMM.flops(p), GEMM.bytes_moved(p, {"beta": 0.0}))
    f = figures(*work, 1.0, bandwidth=2.98e12)
    assert f.gflops == pytest.approx(2 * 32**3 * 1000 / 1e-3 / 1e9)
    assert f.gbs == pytest.approx(1000 * 8 * 3 * 32 * 32 / 1e-3 / 1e9)
    assert f.roofline_frac == pytest.approx(1000 * 8 * 3 * 32 * 32 / 2.98e12 / 1e-3)
    assert figures(GEMM.flops(p), GEMM.bytes_moved(p, {"beta": 1.0}), 1.0, bandwidth=2.98e12).gbs == pytest.approx(
        1000 * 8 * 4 * 32 * 32 / 1e-3 / 1e9
    )
    assert figures(*work, None, 2.98e12).gflops is None


def test_open_creates_schema_then_reopens(db_url: str) -> None:
    with Store.open(db_url):
        pass
    assert _scalar(db_url, "SELECT value FROM schema_meta WHERE key = 'schema_version'") == str(SCHEMA_VERSION)
    with Store.open(db_url, create=False) as store:
        assert store.upsert_points(points())  # usable


def test_sqlite_is_in_wal_mode(sqlite_url: str) -> None:
    Store.open(sqlite_url).close()
    assert _scalar(sqlite_url, "PRAGMA journal_mode") == "wal"


@pytest.mark.parametrize(
    "sql, words",
    [
        ("UPDATE autotune_alembic_version SET version_num = '0001'", "older"),
        ("DROP TABLE autotune_alembic_version", "older"),  # made before Alembic
        ("UPDATE autotune_alembic_version SET version_num = 'ffff'", "newer"),
        (f"UPDATE schema_meta SET value = '{SCHEMA_VERSION + 1}'", "newer"),
    ],
)
def test_schema_version_is_checked_on_open(db_url: str, sql: str, words: str) -> None:
    Store.open(db_url).close()
    if sql.startswith("DROP"):
        _execute(db_url, "UPDATE schema_meta SET value = '1'")
    _execute(db_url, sql)
    with pytest.raises(SchemaVersionError) as err:
        Store.open(db_url)
    assert words in err.value.message
    assert ("autotune db upgrade" if words == "older" else "upgrade autotune") in (err.value.hint or "")


def test_foreign_database_is_refused(db_url: str) -> None:
    _execute(db_url, "CREATE TABLE payroll (id INTEGER PRIMARY KEY)")
    with pytest.raises(SchemaVersionError, match="not an autotune results database"):
        Store.open(db_url)


def test_unreachable_postgres_gives_a_hint() -> None:
    pytest.importorskip("psycopg")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens there once closed
    with pytest.raises(StoreError) as err:
        Store.open(f"postgresql+psycopg://nobody@127.0.0.1:{port}/nothing")
    assert "cannot open database" in err.value.message and "server is running" in (err.value.hint or "")


def test_read_only_sqlite_fails_at_open_and_writes_nothing(sqlite_url: str) -> None:
    Store.open(sqlite_url).close()
    path = sqlite_url.removeprefix("sqlite:///")
    before = _scalar(sqlite_url, "SELECT COUNT(*) FROM devices")
    with pytest.raises(StoreError) as err:
        Store.open(f"sqlite:///file:{path}?mode=ro&uri=true")
    assert "readonly" in err.value.message.replace(" ", "") and "write" in (err.value.hint or "")
    assert _scalar(sqlite_url, "SELECT COUNT(*) FROM devices") == before


def test_read_only_postgres_fails_at_open(fresh_pg_url: str) -> None:
    Store.open(fresh_pg_url).close()
    name = sa.engine.make_url(fresh_pg_url).database
    _execute(fresh_pg_url, f'ALTER DATABASE "{name}" SET default_transaction_read_only = on')
    with pytest.raises(StoreError, match="read-only"):
        Store.open(fresh_pg_url)


def test_missing_database_without_create(tmp_path) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(StoreError):
        Store.open(f"sqlite:///{tmp_path / 'none.sqlite'}", readonly=True)
    url = f"sqlite:///{tmp_path / 'empty.sqlite'}"
    with pytest.raises(StoreError, match="holds no results"):
        Store.open(url, create=False)


def test_upserts_are_idempotent(db_url: str) -> None:
    with Store.open(db_url) as store:
        info = device_info()
        dev = store.upsert_device(info)
        assert store.upsert_device(info) == dev
        assert store.upsert_software(info, "0.1.0", "abc") == store.upsert_software(info, "0.1.0", "abc")
        assert store.upsert_software(info, "0.1.0", "abc") != store.upsert_software(info, "0.1.0", "def")
        assert store.upsert_instances(instances()) == 3
        assert store.upsert_instances(instances()) == 0
        ids = store.upsert_points(points())
    with Store.open(db_url) as again:
        assert again.upsert_points(points()) == ids


def test_record_and_read_back(db_url: str) -> None:
    with Store.open(db_url) as store:
        rec = record_sample(store)
        assert store.done_pairs(rec.device_id) == {(m.instance_id, m.point) for m in rec.measurements}
        assert set(store.baseline_times(rec.device_id)) == set(points())
        frame = store.measurements()
    assert len(frame) == 6
    assert {"DIM_X", "DIM_Y", "SCALE", "ALG", "median_ms", "gflops", "precision", "instance"} <= set(frame.columns)
    best = instances()[0]
    row = frame[(frame.instance_id == best.id) & (frame.precision == "fp64")].iloc[0]
    assert row.status == "ok" and row.DIM_X == 16 and row.ALG == "a"
    assert row.gflops == pytest.approx(2 * 32**3 * 1000 / 1e-3 / 1e9)
    wrong = frame[frame.status == "wrong"]
    assert len(wrong) == 1 and pd.isna(wrong.iloc[0].gflops) and wrong.iloc[0].error.startswith("max rel err")


def test_parameters_are_queryable_in_sql(db_url: str) -> None:
    with Store.open(db_url) as store:
        record_sample(store)
    n = _scalar(
        db_url,
        """SELECT COUNT(*) FROM measurements m JOIN instance_params ip
                           ON ip.instance_id = m.instance_id AND ip.name = 'DIM_X'
                           WHERE ip.int_value >= 16 AND m.status = 'ok'""",
    )
    assert n == 4  # DIM_X 16 and 32, at both points
    assert _scalar(db_url, "SELECT COUNT(*) FROM instance_params WHERE name = 'ALG' AND text_value = 'a'") == 2
    assert _scalar(db_url, "SELECT MIN(real_value) FROM instance_params WHERE name = 'SCALE'") == 0.5


def test_a_pair_is_never_recorded_twice(db_url: str) -> None:
    with Store.open(db_url) as store:
        rec = record_sample(store, finish=False)
        extra = Measurement(instances()[0].id, gemm_point("fp64", "NN", 8, 8, 8, 10), Status.OK, median_ms=1.0)
        with pytest.raises(StoreError, match="measured twice"):
            store.record(rec.sweep_id, rec.space_id, [extra, rec.measurements[0]])
        assert (extra.instance_id, extra.point) not in store.done_pairs(rec.device_id)  # all or nothing


def test_second_sweep_is_refused_until_the_first_finishes(db_url: str) -> None:
    with Store.open(db_url) as first, Store.open(db_url) as second:
        rec = record_sample(first, finish=False)
        info = device_info()
        start = SweepStart(
            "again",
            "",
            rec.device_id,
            first.upsert_software(info, "0.1.0", "abc123"),
            info,
            {"alpha": 1.0, "beta": 0.0},
            5,
        )
        with pytest.raises(SweepLockedError) as err:
            second.begin_sweep(start)
        assert f"pid {os.getpid()}" in err.value.message and "wait for it" in (err.value.hint or "")
        first.finish_sweep(rec.sweep_id, "done")
        assert second.begin_sweep(start) > rec.sweep_id


def test_stale_lock_is_taken_over_and_the_old_holder_notices(db_url: str) -> None:
    with Store.open(db_url) as first, Store.open(db_url) as second:
        rec = record_sample(first, finish=False)
        info = device_info()
        sw = first.upsert_software(info, "0.1.0", "abc123")
        second.begin_sweep(
            SweepStart("again", "", rec.device_id, sw, info, {"alpha": 1.0, "beta": 0.0}, 5), stale_s=0.0
        )
        with pytest.raises(SweepLockedError, match="taken over"):
            first.heartbeat()
    assert _scalar(db_url, "SELECT status FROM sweeps WHERE id = :i", i=rec.sweep_id) == "died"


KILLED_SWEEP = """
import os, signal, sys
sys.path.insert(0, {tests!r})
from pg import instances, points, record_sample
from autotune.vocab import TestPoint
from autotune.store.store import Store
store = Store.open({url!r})
rec = record_sample(store, finish=False)
store.mark_inflight(rec.sweep_id, rec.space_id, instances()[0].id, {point!r})
os.kill(os.getpid(), signal.SIGKILL)
"""


def _killed_then_resumed(db_url: str, code: str) -> tuple[Store, int]:
    """Run `code` (a sweep's process that marks pairs in flight, then kills itself with SIGKILL), then open the
    database as a resuming sweep would (the dead pid's lock is free at once): (the open store, its device id)."""
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=120,
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    store = Store.open(db_url)
    info = device_info()
    dev = store.upsert_device(info)
    sw = store.upsert_software(info, "0.1.0", "abc123")
    store.begin_sweep(SweepStart("resume", "", dev, sw, info, {"alpha": 1.0, "beta": 0.0}, 5))
    return store, dev


def test_kill_9_loses_only_the_pair_in_flight(db_url: str) -> None:
    point = gemm_point("fp64", "TT", 8, 8, 8, 100)
    store, dev = _killed_then_resumed(db_url, KILLED_SWEEP.format(tests=str(ROOT / "tests"), url=db_url, point=point))
    with store:
        assert store.recover_inflight(dev) == [(instances()[0].id, point)]
        assert store.recover_inflight(dev) == []
        done = store.done_pairs(dev)
        assert len(done) == 7 and (instances()[0].id, point) in done
        frame = store.measurements()
    crashed = frame[frame.status == Status.CRASHED.value]
    assert len(crashed) == 1 and "in flight" in crashed.iloc[0].error and crashed.iloc[0]["shape"] == "TT"


def test_kill_9_with_a_pipelined_pair_records_only_the_running_one_as_crashed(db_url: str) -> None:
    """A pipelined backend (GpuBackend.pipeline) marks the next pair before the running one answered: after a kill,
    the earlier note was the pair running (crashed), the later one was queued behind it (measured on resume)."""
    point = gemm_point("fp64", "TT", 8, 8, 8, 100)
    queued = "time.sleep(0.01)\nstore.mark_inflight(rec.sweep_id, rec.space_id, instances()[1].id, {point!r})\n"
    code = KILLED_SWEEP.replace("os.kill(", queued.format(point=point) + "os.kill(").replace(
        "import os,", "import time, os,"
    )
    store, dev = _killed_then_resumed(db_url, code.format(tests=str(ROOT / "tests"), url=db_url, point=point))
    with store:
        assert _scalar(db_url, "SELECT count(*) FROM inflight") == 2
        assert store.recover_inflight(dev) == [(instances()[0].id, point)]
        assert _scalar(db_url, "SELECT count(*) FROM inflight") == 0
        done = store.done_pairs(dev)
        assert (instances()[0].id, point) in done and (instances()[1].id, point) not in done


def test_an_abandoned_pair_loses_its_note_and_only_its_own(db_url: str) -> None:
    point = gemm_point("fp64", "NT", 8, 8, 8, 100)
    with Store.open(db_url) as store:
        rec = record_sample(store, finish=False)
        store.mark_inflight(rec.sweep_id, rec.space_id, instances()[0].id, point)
        store.mark_inflight(rec.sweep_id, rec.space_id, instances()[1].id, point)
        store.unmark_inflight(rec.sweep_id, instances()[1].id, point)
        store.unmark_inflight(rec.sweep_id, instances()[1].id, point)  # again: nothing left to forget, no error
        assert store.recover_inflight(rec.device_id) == [(instances()[0].id, point)]
        assert (instances()[1].id, point) not in store.done_pairs(rec.device_id)


def test_bad_status_is_refused_by_the_schema(db_url: str) -> None:
    with Store.open(db_url) as store:
        record_sample(store)
    with pytest.raises(sa.exc.IntegrityError):
        _execute(db_url, "UPDATE measurements SET status = 'great'")


def test_instances_of_another_space_are_kept_apart(db_url: str) -> None:
    from autotune.space.instance import Instance

    with Store.open(db_url) as store:
        record_sample(store)
        other = Instance.of("other", dict(instances()[0].params))
        assert other.id != instances()[0].id
        assert store.upsert_instances([other]) == 1
        assert set(store.measurements(space=SPACE).space) == {SPACE}
        assert store.measurements(space="other").empty


def test_ctrl_c_clears_in_flight_notes_so_resume_measures_them(db_url: str) -> None:
    point = gemm_point("fp64", "NT", 8, 8, 8, 100)
    with Store.open(db_url) as store:
        rec = record_sample(store, finish=False)
        store.mark_inflight(rec.sweep_id, rec.space_id, instances()[1].id, point)
        store.finish_sweep(rec.sweep_id, "interrupted", forget_inflight=True)
        assert store.recover_inflight(rec.device_id) == []
        assert (instances()[1].id, point) not in store.done_pairs(rec.device_id)


# ---- kinds other than GEMM: sizes by name, scalars and baselines (real SQLite file; PostgreSQL when configured) ----

STENCIL = "convolution5x5"


def _stencil(ny: int, nx: int) -> TestPoint:
    return TestPoint(STENCIL, "fp32", "", (("ny", ny), ("nx", nx)))


def _record_kind(store: Store, points: list[TestPoint], scalars: dict, library: str | None) -> int:
    """One space of 2 instances measured at `points` (times 1 and 2 ms, work given), and a baseline of 4 ms."""
    info = device_info()
    dev, sw = store.upsert_device(info), store.upsert_software(info, "0.1.0", "abc123")
    space_id = store.upsert_space(
        SpaceRecord("stencil_test", "space.yaml", "name: stencil_test\n", "k.cu", "//", kind=points[0].kind)
    )
    insts = [Instance.of("stencil_test", {"BX": bx}) for bx in (16, 32)]
    store.upsert_instances(insts)
    sweep = store.begin_sweep(SweepStart("stencil", "", dev, sw, info, scalars, 5))
    store.record(
        sweep,
        space_id,
        [
            Measurement(i.id, p, Status.OK, median_ms=t, reps=5, times_ms=[t] * 5, flops=1e9, bytes_moved=10**9)
            for p in points
            for i, t in zip(insts, (1.0, 2.0), strict=True)
        ],
    )
    if library is not None:
        for p in points:
            store.record_baseline(
                sweep,
                Measurement(
                    library, p, Status.OK, median_ms=4.0, reps=5, times_ms=[4.0] * 5, flops=1e9, bytes_moved=10**9
                ),
            )
    store.finish_sweep(sweep, "done")
    return dev


def test_a_kind_other_than_gemm_round_trips(db_url: str) -> None:
    points = [_stencil(4000, 3001), _stencil(4096, 4096)]
    with Store.open(db_url) as store:
        dev = _record_kind(store, points, {"gain": 2.5}, "cufft")
        frame = store.measurements()
        base = store.baselines()
        assert store.kind_sizes() == {STENCIL: ("ny", "nx")}
        assert store.baseline_times(dev) == {p: 4.0 for p in points}
        assert store.done_pairs(dev) == {(i, p) for i in set(frame.instance_id) for p in points}
    assert list(frame.columns[:9]) == [
        "device",
        "space",
        "instance_id",
        "instance",
        "kind",
        "precision",
        "shape",
        "ny",
        "nx",
    ]
    assert not {"m", "n", "k", "batch"} & set(frame.columns)  # no all-empty GEMM columns
    assert sorted(zip(frame.ny, frame.nx, strict=True)) == [(4000, 3001)] * 2 + [(4096, 4096)] * 2
    assert frame.gbs.tolist() == pytest.approx([1000.0, 500.0] * 2)  # the work the measurements carried
    assert list(base.columns[:7]) == ["device", "kind", "precision", "shape", "ny", "nx", "library"]
    assert set(base.library) == {"cufft"} and list(base.median_ms) == [4.0, 4.0]
    got = _scalar(db_url, "SELECT scalars FROM sweeps")
    assert (json.loads(got) if isinstance(got, str) else got) == {"gain": 2.5}
    view = f"SELECT COUNT(*) FROM measurements m JOIN points_{STENCIL} p ON p.id = m.point_id WHERE p.nx = 4096"
    assert _scalar(db_url, view) == 2
    assert (
        _scalar(
            db_url,
            "SELECT COUNT(*) FROM point_sizes s JOIN test_points p ON p.id = s.point_id "
            f"WHERE p.kind = '{STENCIL}' AND s.name = 'ny' AND s.value = 4000",
        )
        == 1
    )
    with Store.open(db_url, readonly=True) as again:  # read back by another Store: the same points
        assert set(again.measurements().instance_id) == set(frame.instance_id)


def test_gemm_frames_keep_their_columns_and_mixed_kinds_get_each_kinds_sizes(db_url: str) -> None:
    with Store.open(db_url) as store:
        record_sample(store)
        gemm_only = store.measurements()
        assert list(gemm_only.columns[:11]) == [
            "device",
            "space",
            "instance_id",
            "instance",
            "kind",
            "precision",
            "shape",
            "m",
            "n",
            "k",
            "batch",
        ]
        assert gemm_only.m.dtype.kind == "i" and sorted(set(gemm_only.m)) == [16, 32]
        assert list(store.baselines().columns[:9]) == [
            "device",
            "kind",
            "precision",
            "shape",
            "m",
            "n",
            "k",
            "batch",
            "library",
        ]
        _record_kind(store, [_stencil(40, 31)], {}, None)
        both = store.measurements()
    assert list(both.columns[7:13]) == ["m", "n", "k", "batch", "ny", "nx"]
    assert both[both.kind == STENCIL].m.isna().all() and both[both.kind == "gemm"].nx.isna().all()
    assert _scalar(db_url, "SELECT COUNT(*) FROM points_gemm") == 2
    assert _scalar(db_url, f"SELECT ny * 1000 + nx FROM points_{STENCIL}") == 40031


def test_record_uses_the_kinds_bytes_with_the_sweeps_scalars(db_url: str) -> None:
    """Without work on the measurement, GEMM's bytes_moved with the sweep's beta: C is read too when beta != 0."""
    p = gemm_point("fp64", "NN", 32, 32, 32, 1000)
    with Store.open(db_url) as store:
        info = device_info()
        dev, sw = store.upsert_device(info), store.upsert_software(info, "0.1.0", "abc")
        space_id = store.upsert_space(SpaceRecord(SPACE, "s.yaml", "name: s\n", "k.cuh", "//"))
        store.upsert_instances(instances()[:1])
        sweep = store.begin_sweep(SweepStart("beta1", "", dev, sw, info, {"alpha": 1.0, "beta": 1.0}, 5))
        store.record(sweep, space_id, [Measurement(instances()[0].id, p, Status.OK, median_ms=1.0)])
        gbs = store.measurements().gbs[0]
    assert gbs == pytest.approx(1000 * 8 * 4 * 32 * 32 / 1e-3 / 1e9)


@pytest.mark.parametrize(
    "kind, sizes, view, columns",
    [
        ("my-kind.v2", ("rows", "shape"), "points_my_kind_v2_", ["id", "precision", "shape", "rows", "size_shape"]),
        ("a:b", ("n",), "points_a_b_", ["id", "precision", "shape", "n"]),
        ("3d_stencil", ("Nx", "ny"), "points__3d_stencil_", ["id", "precision", "shape", "nx_", "ny"]),
    ],
)
def test_view_names_are_safe_identifiers(
    sqlite_url: str, kind: str, sizes: tuple, view: str, columns: list[str]
) -> None:
    from autotune.store.views import view_name

    point = TestPoint(kind, "fp32", "", tuple((s, 7 + i) for i, s in enumerate(sizes)))
    with Store.open(sqlite_url) as store:
        store.upsert_points([point])
    name = view_name(kind)
    assert name.startswith(view) and (name == view.rstrip("_") or len(name) == len(view) + 8)
    engine = sa.create_engine(sqlite_url)
    try:
        cols = [c["name"] for c in sa.inspect(engine).get_columns(name)]
        with engine.connect() as conn:
            row = conn.exec_driver_sql(f"SELECT * FROM {name}").one()
    finally:
        engine.dispose()
    assert cols[:3] == columns[:3] and len(cols) == len(columns) and cols[3].startswith(columns[3][:2])
    assert tuple(row[3:]) == tuple(7 + i for i in range(len(sizes)))
