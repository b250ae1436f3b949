"""Database fixtures: a fresh SQLite file, and a fresh PostgreSQL database when AUTOTUNE_TEST_PG_URL is set.

`eval "$(scripts/ci_postgres.sh)"` starts a throwaway server and sets the variable. Each test that uses
`db_url` runs once per backend; the PostgreSQL run gets its own database, dropped afterwards.
"""

from __future__ import annotations

import os
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Iterator

import pytest

from autotune.problems.gemm import gemm_point

if TYPE_CHECKING:  # pragma: no cover
    from autotune.space.instance import Instance
    from autotune.vocab import DeviceInfo, Measurement, TestPoint
    from autotune.store.store import Store

PG_ENV = "AUTOTUNE_TEST_PG_URL"


def pg_url() -> str | None:
    return os.environ.get(PG_ENV) or None


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'results.sqlite'}"


@pytest.fixture
def fresh_pg_url() -> Iterator[str]:
    """The URL of a new, empty PostgreSQL database (skips when AUTOTUNE_TEST_PG_URL is unset)."""
    base = pg_url()
    if base is None:
        pytest.skip(f'{PG_ENV} is not set (run: eval "$(scripts/ci_postgres.sh)")')
    import sqlalchemy as sa
    from sqlalchemy.engine import make_url

    name = f"autotune_t_{uuid.uuid4().hex[:12]}"
    admin = sa.create_engine(make_url(base), isolation_level="AUTOCOMMIT", pool_pre_ping=True)  # outlives a restart
    with admin.connect() as conn:
        conn.exec_driver_sql(f'CREATE DATABASE "{name}"')
    try:
        yield make_url(base).set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as conn:
            conn.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.dispose()


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request: pytest.FixtureRequest) -> str:
    """A fresh database URL, once for SQLite and once for PostgreSQL (skipped without a server)."""
    return request.getfixturevalue("sqlite_url" if request.param == "sqlite" else "fresh_pg_url")


# ---- a small recorded sweep, built through the real store API, shared by the store/query/replay tests ----


def device_info(uuid_: str = "GPU-test-0001", name: str = "Test GPU") -> "DeviceInfo":
    from autotune.vocab import DeviceInfo

    return DeviceInfo(
        name=name,
        uuid=uuid_,
        sm_count=132,
        cc=90,
        sm_clock_mhz=1980,
        mem_clock_mhz=2619,
        l2_bytes=50 * 2**20,
        copy_bandwidth=2.98e12,
        driver="580.00",
        cuda_runtime="13000",
        nvrtc="13.0",
        cupy="13.6.0",
    )


SPACE = "gemm_test"


def instances() -> list["Instance"]:
    from autotune.space.instance import Instance

    return [
        Instance.of(SPACE, {"DIM_X": dx, "DIM_Y": dy, "SCALE": 0.5, "ALG": alg})
        for dx, dy, alg in ((16, 8, "a"), (32, 4, "b"), (8, 8, "a"))
    ]


def points() -> list["TestPoint"]:
    return [gemm_point("fp64", "NN", 32, 32, 32, 1000), gemm_point("fp32", "NN", 16, 16, 16, 4000)]


@dataclass(frozen=True)
class Recorded:
    sweep_id: int
    space_id: int
    device_id: int
    measurements: tuple["Measurement", ...]


def record_sample(store: "Store", uuid_: str = "GPU-test-0001", finish: bool = True) -> Recorded:
    """Record 3 instances x 2 points: ok times (instance i takes (i + 1) ms, so instance 0 is the best),
    except instance 2 at the fp32 point, which is wrong; plus cuBLAS times of 2 ms and 5 ms."""
    from autotune.vocab import Measurement, Status
    from autotune.store.store import SpaceRecord, SweepStart

    info = device_info(uuid_)
    dev = store.upsert_device(info)
    sw = store.upsert_software(info, "0.1.0", "abc123")
    space_id = store.upsert_space(
        SpaceRecord(
            SPACE,
            "spaces/gemm_test.yaml",
            "name: gemm_test\n",
            "kernels_src/gemm_test.cuh",
            "template <int X> __global__ void k();",
        )
    )
    store.upsert_instances(instances())
    store.upsert_points(points())
    sweep = store.begin_sweep(
        SweepStart("sample", "name: sample\n", dev, sw, info, scalars={"alpha": 1.0, "beta": 0.0}, reps=5)
    )
    ms = []
    for idx, inst in enumerate(instances()):
        for p in points():
            if idx == 2 and p.precision == "fp32":
                ms.append(Measurement(inst.id, p, Status.WRONG, error="max rel err 0.3 > 1e-5", max_rel_err=0.3))
                continue
            t = float(idx + 1)
            ms.append(
                Measurement(
                    inst.id,
                    p,
                    Status.OK,
                    median_ms=t,
                    p20_ms=t * 0.99,
                    p80_ms=t * 1.01,
                    min_ms=t * 0.98,
                    max_ms=t * 1.05,
                    reps=5,
                    times_ms=[t] * 5,
                    max_rel_err=1e-15,
                    registers=40 + idx,
                    shared_bytes=0,
                    local_bytes=0,
                    compile_s=0.2,
                    l2_protection="rotate:4",
                )
            )
    store.record(sweep, space_id, ms)
    for p, t in zip(points(), (2.0, 5.0), strict=True):
        store.record_baseline(
            sweep, Measurement("cublas", p, Status.OK, median_ms=t, reps=5, times_ms=[t] * 5, l2_protection="rotate:4")
        )
    if finish:
        store.finish_sweep(sweep, "done")
    return Recorded(sweep, space_id, dev, tuple(ms))
