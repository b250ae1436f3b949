"""Every number that enters the results database is checked at the boundary: Kernel Tuner
imports with hostile times and problem sizes, measurements written through the store's API, and a declared
kind's `bytes:`/`flops:`. Real SQLite files, the real command line; no mocks."""

from __future__ import annotations

import json
import math
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pg import instances, points, record_sample

from autotune.errors import SpaceError, UserError
from autotune.interop.kerneltuner import read_cache
from autotune.interop.kt_export import export_cache
from autotune.interop.kt_store import import_cache
from autotune.space.spec import load_space
from autotune.store.store import Store, StoreError
from autotune.vocab import Measurement, Status

ROOT = Path(__file__).resolve().parent.parent


def kt_cache(path: Path, times: dict[int, Any], problem_size: Any = (64,), extra: dict | None = None) -> Path:
    """A Kernel Tuner cache with one entry per block size: {bs: time value}, written as Python's json writes it
    (NaN and Infinity as Kernel Tuner's json.dump writes them)."""
    cache = {str(bs): {"bs": bs, "time": t, **(extra or {}).get(bs, {})} for bs, t in times.items()}
    doc = {
        "device_name": "GPU X",
        "kernel_name": "k",
        "problem_size": list(problem_size) if isinstance(problem_size, tuple) else problem_size,
        "tune_params_keys": ["bs"],
        "tune_params": {"bs": sorted(times)},
        "objective": "time",
        "cache": cache,
    }
    path.write_text(json.dumps(doc))
    return path


def rows(db: Path) -> dict[str, tuple[str, float | None, str | None]]:
    """{bs: (status, median, error)} of every stored measurement."""
    engine = sa.create_engine(f"sqlite:///{db}")
    with engine.connect() as conn:
        got = conn.execute(
            sa.text(
                "SELECT i.params, m.status, m.median_ms, m.error FROM measurements m "
                "JOIN instances i ON i.id = m.instance_id"
            )
        ).all()
    engine.dispose()
    return {str(json.loads(p)["bs"]): (s, med, err) for p, s, med, err in got}


def import_file(path: Path, db: Path):
    with Store.open(str(db)) as store:
        return import_cache(path, store, space_out=path.with_suffix(".space.yaml"))


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "autotune", *args], capture_output=True, text=True, cwd=ROOT, timeout=120
    )


# ------------------------------------------------------------------------------------------------ Kernel Tuner


def test_a_negative_time_is_a_failure_and_never_the_best(tmp_path: Path) -> None:
    db = tmp_path / "kt.sqlite"
    got = import_file(kt_cache(tmp_path / "c.json", {32: -1, 64: 0.5}), db)
    stored = rows(db)
    assert stored["64"][:2] == ("ok", 0.5)
    assert stored["32"][0] == "crashed" and "time is -1" in stored["32"][2]
    assert got.failures == 1 and got.rejected == (("32", "time is -1.0"),)
    with Store.open(str(db)) as store:
        (best,) = store.best_times("GPU X").values()
    assert best[1] == 0.5


@pytest.mark.parametrize(
    "value, why",
    [
        ("fast", 'time is "fast"'),
        (None, "time is null"),
        ([1.0], "time is [1.0]"),
        (True, "time is true"),
        (float("nan"), "time is NaN"),
        (float("inf"), "time is Infinity"),
        (float("-inf"), "time is -Infinity"),
        (0, "time is 0.0"),
    ],
)
def test_a_time_that_is_not_a_positive_number_is_a_failure_with_its_reason(
    tmp_path: Path, value: Any, why: str
) -> None:
    db = tmp_path / "kt.sqlite"
    import_file(kt_cache(tmp_path / "c.json", {32: value, 64: 0.5}), db)
    status, median, error = rows(db)["32"]
    assert status == "crashed" and why in error and median is None
    with Store.open(str(db)) as store:
        out = export_cache(store, "k")
    (bad,) = [r for r in out.records if r.params["bs"] == 32]
    assert bad.status == "error"
    from autotune.interop.kerneltuner import cache_text

    entry = json.loads(cache_text(out))["cache"]["32"]
    assert entry["time"] == "RuntimeFailedConfig"  # the export keeps `time`, as Kernel Tuner's failure word


def test_bad_repetitions_make_a_failure(tmp_path: Path) -> None:
    db = tmp_path / "kt.sqlite"
    import_file(
        kt_cache(
            tmp_path / "c.json",
            {32: 1.0, 64: 0.5, 128: 2.0},
            extra={32: {"times": [1.0, -3.0]}, 128: {"times": "many"}},
        ),
        db,
    )
    stored = rows(db)
    assert stored["64"][0] == "ok"
    assert stored["32"][0] == "crashed" and "times holds -3.0" in stored["32"][2]
    assert stored["128"][0] == "crashed" and 'times is "many"' in stored["128"][2]


@pytest.mark.parametrize(
    "word, status",
    [
        ("InvalidConfig", "launch_error"),
        ("CompilationFailedConfig", "compile_error"),
        ("RuntimeFailedConfig", "launch_error"),
    ],
)
def test_kernel_tuners_failure_words_are_failures(tmp_path: Path, word: str, status: str) -> None:
    db = tmp_path / "kt.sqlite"
    import_file(kt_cache(tmp_path / "c.json", {32: word, 64: 0.5}), db)
    got = rows(db)["32"]
    assert got[0] == status and got[1] is None and got[2].startswith("kerneltuner:")


@pytest.mark.parametrize(
    "size", [None, [0], [-4], [""], ["x" * 300], [1, 2, 3, 4], True, [2.5], [], 1 << 63, [["num_blocks"]]]
)
def test_an_unreadable_problem_size_is_refused(tmp_path: Path, size: Any) -> None:
    db = tmp_path / "kt.sqlite"
    with pytest.raises(UserError) as err:
        import_file(kt_cache(tmp_path / "c.json", {32: 1.0}, problem_size=size), db)
    assert "problem_size" in err.value.message and err.value.file.endswith("c.json")
    assert rows(db) == {}


def test_the_cli_says_what_it_recorded_as_failed(tmp_path: Path) -> None:
    cache = kt_cache(tmp_path / "c.json", {32: -1, 64: 0.5, 128: "fast"})
    r = cli("import", "kerneltuner", str(cache), "--db", str(tmp_path / "kt.sqlite"))
    assert r.returncode == 0, r.stderr
    assert "2 configuration(s) recorded as failed" in r.stdout
    assert "32: time is -1.0" in r.stdout and '128: time is "fast"' in r.stdout
    again = cli("import", "kerneltuner", str(cache), "--db", str(tmp_path / "kt.sqlite"))
    assert "skipped 3 configuration(s) already in the database" in again.stdout
    bad = kt_cache(tmp_path / "d.json", {32: 1.0}, problem_size=[0])
    r = cli("import", "kerneltuner", str(bad), "--db", str(tmp_path / "kt.sqlite"))
    assert r.returncode == 2 and "problem_size" in r.stderr and "Traceback" not in r.stderr


# ------------------------------------------------------------------------------------------------ the store


@pytest.mark.parametrize("median", [None, float("nan"), float("inf"), -1.0, 0.0])
def test_the_store_never_records_a_bad_time_as_ok(tmp_path: Path, median: float | None) -> None:
    db = tmp_path / "r.sqlite"
    p, inst = points()[0], instances()[0]
    with Store.open(str(db)) as store:
        rec = record_sample(store, finish=False)
        with store.session() as s:  # make room for instance 0 at point 0 again
            s.execute(sa.text("DELETE FROM measurements WHERE instance_id = :i"), {"i": inst.id})
        store.record_baseline(rec.sweep_id, Measurement("cublas", p, Status.OK, median_ms=median))
        base = store.baselines()
        ((status, error),) = base.loc[base["precision"] == p.precision, ["status", "error"]].values
        assert status == "crashed" and "not stored as ok" in error
        assert p not in store.baseline_times(rec.device_id)
        store.record(rec.sweep_id, rec.space_id, [Measurement(inst.id, p, Status.OK, median_ms=median, times_ms=[1.0])])
        m = store.measurements()
        m = m[(m["instance_id"] == inst.id) & (m["precision"] == p.precision)]
        assert list(m["status"]) == ["crashed"] and "not stored as ok" in m["error"].iloc[0]
        assert m["roofline_frac"].isna().all()
        assert p not in store.best_times("Test GPU") or store.best_times("Test GPU")[p][0] != inst.id


def test_the_store_never_records_a_bad_repetition_as_ok(tmp_path: Path) -> None:
    db = tmp_path / "r.sqlite"
    with Store.open(str(db)) as store:
        rec = record_sample(store, finish=False)
        p = points()[0]
        store.record_baseline(rec.sweep_id, Measurement("cublas", p, Status.OK, median_ms=1.0, min_ms=-2.0))
        base = store.baselines()
        assert base.loc[base["precision"] == p.precision, "status"].tolist() == ["crashed"]


def test_the_store_refuses_a_negative_byte_count(tmp_path: Path) -> None:
    with Store.open(str(tmp_path / "r.sqlite")) as store:
        rec = record_sample(store, finish=False)
        m = Measurement("cublas", points()[0], Status.OK, median_ms=1.0, bytes_moved=-8, flops=1.0)
        with pytest.raises(StoreError, match="bytes moved"):
            store.record_baseline(rec.sweep_id, m)


# ------------------------------------------------------------------------------------------------ declared kinds


def declared(tmp_path: Path, nbytes: str, flops: str = "n") -> Path:
    (tmp_path / "ref.py").write_text("def ref(x):\n    return 2 * x\n")
    (tmp_path / "k.cu").write_text('extern "C" __global__ void k(float* y, const float* x, int n) {}\n')
    (tmp_path / "space.yaml").write_text(
        textwrap.dedent(f"""\
        name: scale
        problem:
          name: scale
          sizes: [n]
          arguments:
            - {{name: y, buffer: T, shape: [n], output: true}}
            - {{name: x, buffer: T, shape: [n]}}
            - {{name: n, scalar: int32, value: n}}
          reference: ref.py:ref
          bytes: "{nbytes}"
          flops: "{flops}"
        kernel:
          source: k.cu
          name: k
          block: [bs, 1, 1]
          grid: ["ceil(n / bs)", 1, 1]
        parameters:
          bs: [32, 64]
        """)
    )
    return tmp_path / "space.yaml"


@pytest.mark.parametrize("nbytes, flops, what", [("-4", "n", "bytes"), ("0", "n", "bytes"), ("8 * n", "-1", "flops")])
def test_a_constant_non_positive_byte_count_is_refused_at_load(
    tmp_path: Path, nbytes: str, flops: str, what: str
) -> None:
    with pytest.raises(SpaceError) as err:
        load_space(declared(tmp_path, nbytes, flops))
    assert f"`{what}:`" in err.value.message and err.value.file.endswith("space.yaml")
    assert err.value.line == (10 if what == "bytes" else 11)


@pytest.mark.parametrize("nbytes, flops, what", [("n - 2 * n", "n", "bytes"), ("8 * n", "n - 2 * n", "flops")])
def test_a_negative_count_is_refused_where_it_is_evaluated(tmp_path: Path, nbytes: str, flops: str, what: str) -> None:
    kind = load_space(declared(tmp_path, nbytes, flops)).kind
    p = kind.point("fp32", "", {"n": 100})
    with pytest.raises(SpaceError) as err:
        kind.flops(p) if what == "flops" else kind.bytes_moved(p, {})
    assert f"`{what}:` is -100" in err.value.message and err.value.file.endswith("space.yaml")
    assert err.value.line == (10 if what == "bytes" else 11)


# ------------------------------------------------------------------------------------------------ property

_hostile = st.one_of(
    st.floats(),
    st.integers(-5, 5),
    st.text(max_size=6),
    st.none(),
    st.booleans(),
    st.sampled_from(["InvalidConfig", "CompilationFailedConfig", "RuntimeFailedConfig", "ErrorConfig"]),
    st.lists(st.floats(), max_size=2),
)
_sizes = st.one_of(
    st.just([64]),
    st.just([32, 16]),
    st.integers(-3, 3),
    st.none(),
    st.text(max_size=4),
    st.lists(st.one_of(st.integers(-2, 100), st.floats(), st.booleans()), max_size=4),
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    times=st.lists(_hostile, min_size=1, max_size=5),
    reps=st.lists(st.one_of(st.none(), st.lists(st.floats(), max_size=3), _hostile), min_size=5, max_size=5),
    size=_sizes,
)
def test_hostile_caches_round_trip(
    tmp_path_factory: pytest.TempPathFactory, times: list, reps: list, size: Any
) -> None:
    tmp = tmp_path_factory.mktemp("kt")
    by_bs = {32 * (i + 1): t for i, t in enumerate(times)}
    extra = {bs: {"times": reps[i]} for i, bs in enumerate(by_bs) if reps[i] is not None}
    cache, db = kt_cache(tmp / "c.json", by_bs, problem_size=size, extra=extra), tmp / "kt.sqlite"
    try:
        got = import_file(cache, db)
    except UserError as exc:  # refused as a whole: it says why, and stores nothing
        assert "problem_size" in exc.message and rows(db) == {}
        return
    stored = rows(db)
    assert set(stored) == {str(bs) for bs in by_bs}  # every entry stored (none skipped on a fresh database)
    assert got.records == len(by_bs)
    for status, median, error in stored.values():
        if status == "ok":
            assert median is not None and math.isfinite(median) and median > 0
        else:
            assert error  # a failure says why
    with Store.open(str(db)) as store:
        out = export_cache(store, "k")
    from autotune.interop.kerneltuner import cache_text

    exported = json.loads(cache_text(out))["cache"]
    assert set(exported) == set(stored)
    for key, entry in exported.items():
        assert "time" in entry, (key, entry)
        t = entry["time"]
        assert (isinstance(t, float) and math.isfinite(t) and t > 0) or t in (
            "InvalidConfig",
            "CompilationFailedConfig",
            "RuntimeFailedConfig",
        )
    again = tmp / "again.json"
    again.write_text(cache_text(out))
    assert len(read_cache(again).records) == len(by_bs)
