"""`autotune sweep --replay X` on a database whose recorded times or statistics are damaged: one `error:` line that
names the file and the row (exit 2), never a JSONDecodeError traceback. The numbers are read through
`autotune.untrusted`. One case is what an older autotune's packed file gives when decompressed with plain `xz -d`:
`times_ms` written as `ns:...` and the medians NULL."""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

import pytest

from tests.support.committed import committed, gunzip_to
from tests.support.harness import run_cli


@pytest.mark.parametrize(
    ("table", "damage"),
    [
        ("measurements", "times_ms = 'ns:1443136,1443200,1444000', median_ms = NULL"),  # an older pack, plain xz -d
        ("measurements", """times_ms = '[0.1, "fast"]'"""),
        ("measurements", "times_ms = '[1e999, 0.2]'"),  # JSON's 1e999 is infinity
        ("measurements", "median_ms = 'abc'"),
        ("baselines", "median_ms = '-1e400'"),
    ],
)
def test_a_damaged_recording_is_one_line_naming_the_file_and_row(tmp_path: Path, table: str, damage: str) -> None:
    recording = gunzip_to(committed("default"), tmp_path / "recording.sqlite")
    with sqlite3.connect(recording) as conn:
        conn.execute(f"UPDATE {table} SET {damage} WHERE status = 'ok'")
    conn.close()
    r = run_cli(
        "sweep",
        "configs/default.yaml",
        "--replay",
        str(recording),
        "--db",
        str(tmp_path / "new.sqlite"),
        "--quiet",
        TMPDIR=str(tmp_path),
    )
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr[-3000:]
    errors = [line for line in r.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, r.stderr
    assert str(recording) in errors[0] and re.search(rf"{table} row \d+", errors[0]), errors[0]
