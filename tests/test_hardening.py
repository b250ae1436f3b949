"""Bad input, faults and signals never crash, hang or lose data (real files, real processes)."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from autotune.problems.gemm import gemm_point
from autotune.paths import ROOT
from autotune.store.migrate import VERSION_TABLE, head
from autotune.store.schema import SCHEMA_VERSION
from tests.support.committed import committed, read_only
from tests.support.harness import invoke_cli

RECORDED = committed("default")  # results/default/default.sqlite.xz, read as it is


def cli(*args: str, cwd: Path | str = ROOT, timeout: float = 120) -> subprocess.CompletedProcess:
    """`autotune ARGS` in a process of its own (for what only a process shows: its output into a pipe)."""
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "COLUMNS": "80"}
    return subprocess.run(
        [sys.executable, "-m", "autotune", *args], capture_output=True, text=True, cwd=cwd, timeout=timeout, env=env
    )


def run(*args: str, cwd: Path | str = ROOT, limit_s: float = 120) -> subprocess.CompletedProcess:
    """`autotune ARGS` in this process (tests/support/harness.py `invoke_cli`: the same exit code and output, without a
    Python start of ~1 s), 80 columns wide; it must end within `limit_s` (the time limit the process run had)."""
    t0 = time.monotonic()
    r = invoke_cli(*args, cwd=cwd, COLUMNS="80")
    assert time.monotonic() - t0 < limit_s, f"autotune {' '.join(args)} took {time.monotonic() - t0:.1f} s"
    return r


@pytest.fixture
def recorded_copy(tmp_path: Path) -> Path:
    db = tmp_path / "db.sqlite"
    with sqlite3.connect(read_only(RECORDED)) as src, sqlite3.connect(db) as dst:
        src.backup(dst)
    return db


# ---- 1. autotune query is read-only ------------------------------------------------------------------


@pytest.mark.parametrize(
    "sql, created",
    [
        ("ATTACH 'attached.db' AS x", "attached.db"),
        ("ATTACH DATABASE 'file:attached.db?mode=rwc' AS x", "attached.db"),
        ("VACUUM INTO 'vacuumed.db'", "vacuumed.db"),
        ("PRAGMA writable_schema = 1", None),
        ("PRAGMA user_version = 7", None),
        ("PRAGMA journal_mode = DELETE", None),
        ("BEGIN IMMEDIATE", None),
        ("CREATE TEMP TABLE t (x)", None),
        ("DELETE FROM measurements", None),
        ("REINDEX", None),
    ],
)
def test_query_refuses_anything_but_reads(recorded_copy: Path, sql: str, created: str | None) -> None:
    before = sorted(p.name for p in recorded_copy.parent.iterdir())
    r = invoke_cli("query", sql, "--db", str(recorded_copy), cwd=recorded_copy.parent, COLUMNS="80")
    assert r.returncode == 2, (r.stdout, r.stderr)
    # the recorded database is at the current schema: read as it is, no warning, one error
    assert "warning" not in r.stderr and "Traceback" not in r.stderr
    error = r.stderr.split("error: query failed", 1)[1]
    assert "read-only" in error
    after = sorted(p.name for p in recorded_copy.parent.iterdir() if not p.name.endswith(("-wal", "-shm")))
    assert created is None or created not in after
    assert set(after) <= set(before)
    with sqlite3.connect(recorded_copy) as c:
        assert c.execute("PRAGMA user_version").fetchone()[0] == 0
        assert c.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert c.execute("select count(*) from measurements").fetchone()[0] == 2886


def test_query_still_reads(recorded_copy: Path) -> None:
    r = run("query", "PRAGMA table_info(sweeps)", "--db", str(recorded_copy))
    assert r.returncode == 0 and "config_name" in r.stdout
    r = run(
        "query",
        "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 3) SELECT x, upper('a') AS u FROM c",
        "--db",
        str(recorded_copy),
    )
    assert r.returncode == 0 and r.stdout.split() == ["x", "u", "1", "A", "2", "A", "3", "A"]


def test_query_output_does_not_wrap_in_a_pipe(recorded_copy: Path) -> None:
    sql = "SELECT id, config_name, started_at, finished_at, status, scalars, reps, host, pid FROM sweeps"
    r = cli("query", sql, "--db", str(recorded_copy))
    assert r.returncode == 0
    lines = r.stdout.splitlines()
    with sqlite3.connect(recorded_copy) as c:
        n = c.execute("SELECT COUNT(*) FROM sweeps").fetchone()[0]
    assert n > 0 and len(lines) == 1 + n  # header + one line per row, however wide
    assert lines[0].split() == [
        "id",
        "config_name",
        "started_at",
        "finished_at",
        "status",
        "scalars",
        "reps",
        "host",
        "pid",
    ]
    empty = run("query", "SELECT id, status FROM sweeps WHERE 0", "--db", str(recorded_copy))
    assert empty.returncode == 0 and empty.stdout == "id  status\n(no rows)\n"


def test_query_without_db_says_what_to_pass(tmp_path: Path) -> None:
    r = run("query", "SELECT 1", cwd=tmp_path)
    if (ROOT / "results" / "default.sqlite").exists():  # a checkout where the default sweep ran
        assert r.returncode == 0
        return
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "no --db given" in r.stderr and "--db" in r.stderr and "default.sqlite" in r.stderr


# ---- 2. space show with a parameter of 10^7 values -------------------------------------------------------


def test_space_show_caps_value_counts_and_is_fast(tmp_path: Path) -> None:
    space = tmp_path / "big.yaml"
    space.write_text(
        "name: big\ndescription: ten million values\nparameters:\n  A: {start: 1, stop: 10000000}\n"
        '  B: [1, 2]\nhard:\n  - {name: even, expr: "A % 2 == 0", reason: x}\n'
    )
    r = run("space", "show", str(space), "--device", "H100", limit_s=60)  # drew every count for minutes before
    assert r.returncode == 0, r.stderr
    assert "10,000,000 instances" in r.stdout and "… 4,999,980 more values" in r.stdout
    assert "B" in r.stdout and "1: 5000000  2: 5000000" in r.stdout
    assert len(r.stdout) < 10_000


# ---- 3. limits before work ---------------------------------------------------------------------------------

HUGE = (
    "name: huge\ndescription: 10^12 raw\nparameters:\n  A: {start: 1, stop: 1000}\n  B: {start: 1, stop: 1000}\n"
    '  C: {start: 1, stop: 1000}\n  D: {start: 1, stop: 1000}\nhard:\n  - {name: c, expr: "A + B + C + D > 10", '
    "reason: x}\n"
)


def test_huge_space_is_refused_before_work(tmp_path: Path) -> None:
    space = tmp_path / "huge.yaml"
    space.write_text(HUGE)
    r = run("space", "show", str(space), "--device", "H100", limit_s=30)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "1e+12 raw combinations, above the limit" in r.stderr and "--max-raw" in r.stderr
    # raising the raw limit moves the guard to the survivors, long before memory runs out
    r = run(
        "space",
        "list",
        str(space),
        "--device",
        "H100",
        "--max-raw",
        str(10**12),
        "--max-survivors",
        "1000000",
        limit_s=60,
    )
    assert r.returncode == 2 and "more than 1,000,000 instances pass the hard constraints" in r.stderr
    assert "--max-survivors" in r.stderr and "Traceback" not in r.stderr
    wide = tmp_path / "wide.yaml"
    wide.write_text("name: wide\ndescription: x\nparameters:\n  A: {start: 1, stop: 1000000000000}\n")
    r = run("space", "show", str(wide), limit_s=30)
    assert r.returncode == 2 and f"{wide}:4: the range has 1,000,000,000,000 values" in r.stderr


def test_a_range_beyond_64_bit_arithmetic_is_refused_from_its_ends(tmp_path: Path) -> None:
    """A range of 2^23 values (under the 2^24 cap) that ends at 2^63: its first value beyond 2^62 is found from the
    range's ends, as quickly as that of a short range (its 8,388,608 values were built and scanned first: about 1 s,
    2 s for a hostile file of 2^24 values)."""
    from autotune.space.spec import SpaceError, load_space

    far = tmp_path / "far.yaml"
    far.write_text(
        "name: far\ndescription: x\nparameters:\n  A: {start: 1, stop: 9223372036854775808, step: 1099511627776}\n"
    )
    t0 = time.monotonic()
    with pytest.raises(SpaceError, match=r"value 4611686018427387905 is not a number from -2\*\*62 to 2\*\*62") as e:
        load_space(far)
    assert time.monotonic() - t0 < 0.5 and e.value.line == 4


@pytest.mark.parametrize(
    "sizes, batch, line, message",
    [
        ("{square: [4]}", "{bytes: 0MB}", 5, "batch bytes '0MB' must be above 0"),
        ("{square: [4]}", "{bytes: 1e30B}", 5, "batch bytes '1e30B' must be above 0 and at most 1 PB"),
        ("{square: [4]}", "{bytes: 1e400B}", 5, "batch bytes '1e400B' must be above 0"),
        ("{square: [4]}", "3000000000", 5, "batch 3,000,000,000 at 4x4x4 is above 2^31 - 1"),
        ("{square: [3000000000]}", "1", 4, "M = 3,000,000,000 is above 2^31 - 1"),
        ("{triples: [[4, 4, 2147483648]]}", "1", 4, "K = 2,147,483,648 is above 2^31 - 1"),
    ],
)
def test_config_limits_at_load(tmp_path: Path, sizes: str, batch: str, line: int, message: str) -> None:
    cfg = tmp_path / "c.yaml"
    cfg.write_text(f"spaces: [gemm_naive]\npoints:\n  - precisions: [fp64]\n    sizes: {sizes}\n    batch: {batch}\n")
    r = run("sweep", str(cfg), "--replay", str(RECORDED), "--db", str(tmp_path / "x.sqlite"), "--quiet")
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert f"{cfg}:{line}: {message}" in r.stderr


def test_point_larger_than_gpu_memory_is_refused_before_allocating(tmp_path: Path) -> None:
    cfg = tmp_path / "mem.yaml"
    cfg.write_text(
        "spaces: [gemm_naive]\npoints:\n  - precisions: [fp64]\n    sizes: {square: [100000]}\n    batch: 100\n"
    )
    db = tmp_path / "mem.sqlite"
    r = run("sweep", str(cfg), "--replay", str(RECORDED), "--db", str(db), "--quiet")
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "1 test point(s) do not fit in 72.0 GB (90% of NVIDIA H100 80GB HBM3's 80 GB)" in r.stderr
    assert "AUTOTUNE_GPU_MEMORY" in r.stderr
    assert not db.exists()  # refused before a sweep was recorded: the database made for it is removed


def test_point_bytes_and_memory_cap() -> None:
    from autotune.sweep.limits import check_points_fit, gpu_memory, point_bytes

    p = gemm_point("fp32", "NN", 1000, 1000, 1000, 10)
    assert point_bytes(p) == (4 * 4 * 10**6 + 8 * 10**6 + 4 * 10**6) * 10 + (256 << 20)
    assert gpu_memory("NVIDIA H100 80GB HBM3") == 80 * 10**9 and gpu_memory("NVIDIA H200") == 141 * 10**9
    assert gpu_memory("Some GPU") is None
    check_points_fit([p], "Some GPU")  # unknown memory: no check
    check_points_fit([p], "x", free_bytes=point_bytes(p))
    with pytest.raises(Exception, match="do not fit"):
        check_points_fit([p], "x", free_bytes=point_bytes(p) - 1)


# ---- 4. analyze / report / emit on a database where every measurement failed ---------------------------


def _all_failed_db(path: Path) -> Path:
    from pg import SPACE, device_info, instances, points

    from autotune.store.store import SpaceRecord, Store, SweepStart
    from autotune.vocab import Measurement, Status

    with Store.open(f"sqlite:///{path}") as store:
        info = device_info()
        dev, sw = store.upsert_device(info), store.upsert_software(info, "0.1.0", "abc")
        space_id = store.upsert_space(SpaceRecord(SPACE, "spaces/t.yaml", "name: t\n", "kernels_src/t.cuh", "x"))
        store.upsert_instances(instances())
        store.upsert_points(points())
        sweep = store.begin_sweep(SweepStart("failed", "name: failed\n", dev, sw, info, {"alpha": 1.0, "beta": 0.0}, 5))
        kinds = [Status.COMPILE_ERROR, Status.WRONG, Status.LAUNCH_ERROR]
        store.record(
            sweep,
            space_id,
            [
                Measurement(i.id, p, kinds[n % 3], error="boom")
                for n, (i, p) in enumerate((i, p) for i in instances() for p in points())
            ],
        )
        store.finish_sweep(sweep, "done")
    return path


@pytest.mark.parametrize("command", [["analyze"], ["report", "--out", "REPORT"], ["emit"]])
def test_nothing_verified_to_analyze(tmp_path: Path, command: list[str]) -> None:
    db = _all_failed_db(tmp_path / "failed.sqlite")
    args = [a.replace("REPORT", str(tmp_path / "report")) for a in command]
    r = run(args[0], str(db), *args[1:])
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert "Traceback" not in r.stderr and "KeyError" not in r.stderr and "proven" not in r.stdout
    assert "nothing verified to analyze" in r.stderr and "none with status ok" in r.stderr
    assert not (tmp_path / "report").exists()
    csv = tmp_path / "m.csv"  # the same from a measurements CSV
    csv.write_text(
        "device,space,precision,shape,m,n,k,batch,instance_id,status,median_ms\n"
        "G,s,fp32,NN,4,4,4,10,a,wrong,\nG,s,fp32,NN,4,4,4,10,b,compile_error,\n"
    )
    r = run(args[0], str(csv), *args[1:])
    assert r.returncode == 2 and "nothing verified to analyze" in r.stderr and "Traceback" not in r.stderr


# ---- 5. two processes creating the same new database at once ---------------------------------------------


_BARRIER = None  # each pool process's copy of the test's barrier (`_keep_barrier`)


def _keep_barrier(barrier) -> None:  # type: ignore[no-untyped-def]
    global _BARRIER
    _BARRIER = barrier


def _open_at_once(url: str) -> str:
    """Open (create) `url` once all 4 pool processes are here: they start together, as soon as the last one arrives."""
    from autotune.store.store import Store

    assert _BARRIER is not None
    _BARRIER.wait(timeout=120)
    try:
        with Store.open(url) as store:
            store.upsert_points([])
        return "ok"
    except Exception as exc:  # noqa: BLE001 - reported to the test
        return f"{type(exc).__name__}: {exc}"


def test_concurrent_creation_of_a_new_database(tmp_path: Path) -> None:
    import multiprocessing

    ctx = multiprocessing.get_context("spawn")
    # 4 calls for 4 processes, each held at the barrier until all 4 have arrived: one call per process, all released
    # at once (instead of at a wall-clock time 0.3 s ahead, which waited 0.3 s per round)
    with ctx.Pool(4, initializer=_keep_barrier, initargs=(ctx.Barrier(4),)) as pool:
        pool.map(_open_at_once, ["sqlite:///" + str(tmp_path / "warm.sqlite")] * 4, chunksize=1)  # imports done
        for n in range(15):
            db = tmp_path / f"new{n}.sqlite"
            results = pool.map(_open_at_once, [f"sqlite:///{db}"] * 4, chunksize=1)
            assert results == ["ok"] * 4, results
            with sqlite3.connect(db) as c:
                assert c.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
                assert c.execute("select value from schema_meta where key = 'schema_version'").fetchall() == [
                    (str(SCHEMA_VERSION),)
                ]
                assert c.execute(f"select version_num from {VERSION_TABLE}").fetchall() == [(head(),)]  # one stamp


# ---- 6. SIGTERM stops a sweep like Ctrl-C ---------------------------------------------------------------


def test_sigterm_stops_a_sweep_cleanly_and_it_resumes(tmp_path: Path) -> None:
    import os
    import signal
    import time as _time

    db = tmp_path / "term.sqlite"
    args = [
        sys.executable,
        "-m",
        "autotune",
        "sweep",
        "configs/default.yaml",
        "--replay",
        str(RECORDED),
        "--db",
        str(db),
        "--quiet",
        "--max-instances",
        "30",
    ]
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "AUTOTUNE_REPLAY_DELAY": "0.05"}
    proc = subprocess.Popen(args, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    seen_inflight = False
    try:
        deadline = _time.monotonic() + 60
        while _time.monotonic() < deadline and proc.poll() is None:
            if db.exists():
                try:
                    with sqlite3.connect(db, timeout=5) as c:
                        measured = c.execute("select count(*) from measurements").fetchone()[0]
                        seen_inflight |= c.execute("select count(*) from inflight").fetchone()[0] > 0
                except sqlite3.OperationalError:  # tables not created yet
                    measured = 0
                if measured >= 5 and seen_inflight:
                    break
            _time.sleep(0.02)
        assert proc.poll() is None, "the sweep ended before it could be interrupted"
        sent = _time.monotonic()
        os.kill(proc.pid, signal.SIGTERM)
        out, err = proc.communicate(timeout=10)
        assert _time.monotonic() - sent < 10
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, err
    assert "Traceback" not in err and "sweep 1: interrupted" in out
    with sqlite3.connect(db) as c:
        assert c.execute("select status from sweeps").fetchall() == [("interrupted",)]
        assert c.execute("select count(*) from sweep_lock").fetchone()[0] == 0
        assert c.execute("select count(*) from inflight").fetchone()[0] == 0
        assert c.execute("select count(*) from measurements where status = 'crashed'").fetchone()[0] == 0
        first = c.execute("select count(*) from measurements").fetchone()[0]
    again = invoke_cli(*args[3:], AUTOTUNE_REPLAY_DELAY="0")  # the resume, in this process
    assert again.returncode == 0, again.stderr
    assert f"{first:,} already in the database" in again.stderr
    with sqlite3.connect(db) as c:
        assert c.execute("select status from sweeps order by id").fetchall() == [("interrupted",), ("done",)]
        total, distinct = c.execute(
            "select count(*), count(distinct instance_id || point_id) from measurements"
        ).fetchone()
        assert total == distinct > first


# ---- 7. scripts/run.sh installs only when pyproject.toml changed -------------------------------------------


def test_run_sh_skips_the_install_when_nothing_changed(tmp_path: Path) -> None:
    import os
    import shutil as sh

    (tmp_path / "scripts").mkdir()
    for name in ("run.sh", "setup.sh", "setup_venv.sh", "help.sh"):
        sh.copy(ROOT / "scripts" / name, tmp_path / "scripts" / name)
    sh.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    bin_dir = tmp_path / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    log = tmp_path / "calls.log"
    fake_python = bin_dir / "python"  # logs pip installs; "imports" work; no GPU
    fake_python.write_text(
        f'#!/bin/bash\nif [ "$1 $2" = "-m pip" ]; then echo pip >> {log}; exit 0; fi\n'
        'case "$*" in *cupy*) exit 1;; esac\nexit 0\n'
    )
    (bin_dir / "autotune").write_text(f'#!/bin/bash\necho autotune "$@" >> {log}\n')
    for f in (fake_python, bin_dir / "autotune"):
        f.chmod(0o755)
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    for _ in range(3):
        r = subprocess.run(
            ["bash", "scripts/run.sh"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60
        )
        assert r.returncode == 0, r.stderr
    assert log.read_text().split("\n").count("pip") == 1  # installed once, then skipped
    (tmp_path / "pyproject.toml").write_text((tmp_path / "pyproject.toml").read_text() + "\n# changed\n")
    subprocess.run(["bash", "scripts/run.sh"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    assert log.read_text().split("\n").count("pip") == 2
    assert os.path.exists(tmp_path / ".venv" / ".autotune-install-stamp")


def test_help_texts_match_what_commands_take() -> None:
    for command in ("analyze", "report"):
        r = run(command, "--help")
        assert r.returncode == 0 and "dispatch.json." not in r.stdout.replace(" ", "").replace("\n", "").replace(
            "│", ""
        )
    assert "dispatch.json" in run("emit", "--help").stdout
    assert "SIGTERM" in run("sweep", "--help").stdout
    q = run("query", "--help").stdout
    assert "ATTACH" in q and "Default: results/default.sqlite" in " ".join(q.replace("│", " ").split())


def test_batch_bytes_of_validate_reads_like_a_config() -> None:
    """`autotune validate --batch-bytes` reads a size as a sweep config's `{bytes: ...}` does (one reader:
    autotune.sweep.limits.parse_bytes), and a mistake is one UserError naming the option."""
    from autotune.dispatch.validate import parse_budget
    from autotune.errors import UserError

    assert parse_budget("500MB") == 500 * 10**6 and parse_budget("1GiB") == 2**30 and parse_budget("1000") == 1000
    for bad in ("0MB", "lots", "1e400B", ""):
        with pytest.raises(UserError, match="--batch-bytes"):
            parse_budget(bad)
