"""`autotune sweep` and `autotune query` end to end from the command line, on the recorded H100 sweep."""

import sqlite3

from tests.support.committed import committed, gunzip_to
from tests.support.harness import invoke_cli as run  # in this process: the commands are tested, not a start
from tests.support.harness import run_cli

RECORDED = committed("default")  # results/default/default.sqlite.xz, read as it is


def test_replayed_sweep_from_the_command_line(tmp_path):
    db = tmp_path / "replay.sqlite"
    r = run(
        "sweep", "configs/default.yaml", "--replay", str(RECORDED), "--db", str(db), "--quiet", "--max-instances", "20"
    )
    assert r.returncode == 0, r.stderr
    assert "sweep 1: done" in r.stdout and "best so far per test point" in r.stdout
    with sqlite3.connect(db) as c:
        n, inst = c.execute("select count(*), count(distinct instance_id) from measurements").fetchone()
    assert inst == 20 and n >= 20 * 6
    again = run(
        "sweep", "configs/default.yaml", "--replay", str(RECORDED), "--db", str(db), "--quiet", "--max-instances", "20"
    )
    assert again.returncode == 0 and "already in the database" in again.stdout
    q = run("query", "select status, count(*) as n from measurements group by status", "--db", str(db), "-f", "csv")
    assert q.returncode == 0 and q.stdout.startswith("status,n")


def test_query_is_read_only(tmp_path):
    plain = gunzip_to(RECORDED, tmp_path / "default.sqlite")
    for db in (plain, RECORDED):
        r = run("query", "delete from measurements", "--db", str(db))
        assert r.returncode == 2 and "Traceback" not in r.stderr and "read" in r.stderr.lower()
    with sqlite3.connect(plain) as c:
        assert c.execute("select count(*) from measurements").fetchone()[0] > 0


def test_bad_sweep_input_gives_clear_errors(tmp_path):
    missing = run("sweep", "configs/nope.yaml")
    assert missing.returncode == 2 and "no config file" in missing.stderr and "Traceback" not in missing.stderr
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "spaces: [no_such_space]\npoints:\n  - precisions: [fp64]\n    sizes: {square: [4]}\n    batch: 10\n"
    )
    r = run("sweep", str(bad), "--replay", str(RECORDED))
    assert r.returncode == 2 and "no_such_space" in r.stderr and f"{bad}:1" in r.stderr
    unreachable = run(
        "sweep",
        "configs/default.yaml",
        "--replay",
        str(RECORDED),
        "--db",
        "postgresql+psycopg://nobody@127.0.0.1:1/none",
    )
    assert unreachable.returncode == 2 and "cannot open database" in unreachable.stderr
    assert "Traceback" not in unreachable.stderr
    nodriver = run("query", "select 1", "--db", "postgresql+pg8000://x@127.0.0.1:1/y")
    assert nodriver.returncode == 2 and "no driver" in nodriver.stderr and "Traceback" not in nodriver.stderr
    # a process of its own: where CuPy sees a GPU, this sweep measures, and the test process holds no CUDA context
    nogpu = run_cli("sweep", "configs/default.yaml", "--db", str(tmp_path / "x.sqlite"))
    if "no GPU" in nogpu.stderr:  # on a machine without a GPU
        assert nogpu.returncode == 2 and not (tmp_path / "x.sqlite").exists()
