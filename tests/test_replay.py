"""The replay backend answers from a recorded database, and what it answers records back unchanged."""

from __future__ import annotations

import dataclasses

import pytest
from pg import db_url, device_info, fresh_pg_url, instances, points, record_sample, sqlite_url

from autotune.problems.gemm import GEMM, gemm_point
from autotune.space.instance import Instance
from autotune.vocab import Status, TestPoint
from autotune.sweep.backends.base import Backend, Job
from autotune.sweep.backends.replay import NOT_RECORDED, ReplayBackend
from autotune.store.store import SpaceRecord, Store, StoreError, SweepStart

FIXTURES = (db_url, fresh_pg_url, sqlite_url)  # pytest finds these fixtures by name in this module


def jobs(extra_point: TestPoint | None = None) -> list[Job]:
    pts = tuple(points()) + ((extra_point,) if extra_point else ())
    # the replay backend never reads job.space (a GPU backend compiles from it)
    return [
        Job(space=None, instance=i, points=pts, scalars=GEMM.scalars(), reps=5)  # type: ignore[arg-type]
        for i in instances()
    ]


def test_replay_returns_what_was_recorded(db_url: str) -> None:
    with Store.open(db_url) as store:
        rec = record_sample(store)
    backend: Backend = ReplayBackend(db_url)
    try:
        assert backend.device_info() == device_info()
        got = list(backend.run(jobs()))
        assert sorted(got, key=lambda m: (m.instance_id, m.point)) == sorted(
            rec.measurements, key=lambda m: (m.instance_id, m.point)
        )
        c = backend.baseline(GEMM, points()[1], GEMM.scalars(), 5)
        assert c.status == Status.OK and c.median_ms == 5.0 and c.times_ms == [5.0] * 5
    finally:
        backend.close()


def test_unknown_pairs_are_skipped_as_not_recorded(db_url: str) -> None:
    with Store.open(db_url) as store:
        record_sample(store)
    new_point = gemm_point("fp64", "TN", 5, 6, 7, 8)
    stranger = Instance.of("gemm_test", {"DIM_X": 64, "DIM_Y": 1, "SCALE": 0.5, "ALG": "z"})
    backend = ReplayBackend(db_url)
    try:
        got = list(backend.run(jobs(extra_point=new_point) + [Job(None, stranger, (points()[0],), GEMM.scalars(), 5)]))  # type: ignore[arg-type]
        assert len(got) == 3 * 3 + 1
        skipped = {(m.instance_id, m.point) for m in got if m.status == Status.SKIPPED}
        assert skipped == {(i.id, new_point) for i in instances()} | {(stranger.id, points()[0])}
        assert all(m.error == NOT_RECORDED and m.median_ms is None for m in got if m.status == Status.SKIPPED)
        assert backend.baseline(GEMM, new_point, GEMM.scalars(), 5).status == Status.SKIPPED
    finally:
        backend.close()


def test_replayed_sweep_records_into_a_new_database(sqlite_url: str, tmp_path) -> None:  # type: ignore[no-untyped-def]
    with Store.open(sqlite_url) as store:
        rec = record_sample(store)
        original = store.measurements().drop(columns=["sweep_id"])
    copy_url = f"sqlite:///{tmp_path / 'copy.sqlite'}"
    backend = ReplayBackend(sqlite_url)
    with Store.open(copy_url) as copy:
        info = backend.device_info()
        dev = copy.upsert_device(info)
        sw = copy.upsert_software(info, "0.1.0", "replay")
        space_id = copy.upsert_space(SpaceRecord("gemm_test", "s.yaml", "name: gemm_test\n", "k.cuh", "x"))
        copy.upsert_instances(instances())
        sweep = copy.begin_sweep(SweepStart("replay", "", dev, sw, info, scalars=GEMM.scalars(), reps=5))
        done = copy.done_pairs(dev)
        todo = [
            dataclasses.replace(j, points=tuple(p for p in j.points if (j.instance.id, p) not in done)) for j in jobs()
        ]
        copy.record(sweep, space_id, list(backend.run(todo)))
        copy.finish_sweep(sweep, "done")
        replayed = copy.measurements().drop(columns=["sweep_id"])
    backend.close()
    assert len(rec.measurements) == len(replayed)
    key = ["instance_id", "precision"]
    assert original.sort_values(key).reset_index(drop=True).equals(replayed.sort_values(key).reset_index(drop=True))


def test_several_cards_of_one_model_replay_as_one_and_can_be_chosen(sqlite_url: str) -> None:
    """Two cards of one model replay as the first recorded card (several models: tests/test_validate_cards.py)."""
    with Store.open(sqlite_url) as store:
        record_sample(store, uuid_="GPU-a")
        record_sample(store, uuid_="GPU-b")
    both = ReplayBackend(sqlite_url)
    assert both.device_info().uuid == "GPU-a"
    assert all(m.status != Status.SKIPPED for m in both.run(jobs()))
    both.close()
    with pytest.raises(StoreError, match="no device matches GPU-c"):
        ReplayBackend(sqlite_url, device="GPU-c")
    backend = ReplayBackend(sqlite_url, device="GPU-b")
    assert backend.device_info().uuid == "GPU-b"
    assert all(m.status != Status.SKIPPED for m in backend.run(jobs()))
    backend.close()
