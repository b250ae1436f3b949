"""One error path for the command line: an output path that cannot be written is one line
naming the file, exit 2, no traceback; warnings print as one readable line, without Python's source lines.

The commands run in this process (`invoke_cli`: the command's own error handling, an exception that escapes it shown
as its traceback); the warning's line, which the process prints, in a process of its own (`run_cli`)."""

from __future__ import annotations

from pathlib import Path

import pytest


from autotune.paths import ROOT
from tests.support.harness import invoke_cli as cli
from tests.support.harness import run_cli
from tests.support.old_schema import older_copy

EXAMPLE_DB = ROOT / "examples" / "transpose" / "results" / "transpose_h100.sqlite.xz"


@pytest.fixture
def blocker(tmp_path: Path) -> Path:
    """A plain file where a folder would have to be (fails as root too, unlike a read-only folder)."""
    f = tmp_path / "a_file"
    f.write_text("not a folder\n")
    return f


@pytest.mark.parametrize(
    "args",
    [
        ("space", "export", "gemm_naive", "--format", "csv", "-o", "{blocker}/instances.csv"),
        ("report", str(EXAMPLE_DB), "--out", "{blocker}/report"),
        (
            "emit",
            str(ROOT / "examples" / "transpose" / "results" / "dispatch.json"),
            "-f",
            "cpp",
            "-o",
            "{blocker}/dispatch.cuh",
        ),
        # the cache is writable, the T4 file is not: neither is written (the cache used to be, before the T4 failed)
        (
            "export",
            "kerneltuner",
            str(EXAMPLE_DB),
            "--space",
            "transpose_tiled",
            "--point",
            "transpose:fp32:-:4096x4096",
            "--out",
            "c.json",
            "--t4",
            "{blocker}/t4.json",
        ),
        (
            "export",
            "kerneltuner",
            str(EXAMPLE_DB),
            "--space",
            "transpose_tiled",
            "--point",
            "transpose:fp32:-:4096x4096",
            "--out",
            "{blocker}/c.json",
        ),
        (
            "workload",
            "config",
            str(ROOT / "configs" / "workloads" / "small_h100.yaml"),
            "--space",
            "gemm_batched_simt",
            "--out",
            "{blocker}/s.yaml",
        ),
        ("import", "kerneltuner", "{cache}", "--db", "{blocker}/x.sqlite"),
        ("import", "kerneltuner", "{cache}", "--db", "x.sqlite", "--space-out", "{blocker}/s.yaml"),
    ],
)
def test_an_output_path_that_cannot_be_written_is_one_line(tmp_path: Path, blocker: Path, args: tuple) -> None:
    cache = tmp_path / "in" / "cache.json"
    cache.parent.mkdir()
    cache.write_text(KT_CACHE)
    before = set(tmp_path.rglob("*"))
    r = cli(*(a.format(blocker=blocker, cache=cache) for a in args), cwd=tmp_path)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "Traceback" not in r.stderr
    errors = [line for line in r.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and str(blocker) in errors[0], r.stderr
    assert ".tmp" not in errors[0], r.stderr  # the user's path, never a temporary file's
    assert set(tmp_path.rglob("*")) == before, "nothing is written when an output cannot be"


KT_CACHE = """{
"device_name": "NVIDIA H100", "kernel_name": "k", "problem_size": [64, 64],
"tune_params_keys": ["bx"], "tune_params": {"bx": [16, 32]}, "objective": "time",
"cache": {
"16": {"bx": 16, "time": 0.5, "times": [0.5, 0.5]},
"32": {"bx": 32, "time": 0.25, "times": [0.25, 0.25]}}
}
"""


def test_a_warning_is_one_readable_line(tmp_path: Path) -> None:
    """An older database read through a migrated copy warns; the warning is one `warning: ...` line."""
    db = older_copy(EXAMPLE_DB, tmp_path / "old.sqlite", 2)
    r = run_cli("query", "SELECT COUNT(*) AS n FROM measurements", "--db", str(db), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    warned = [line for line in r.stderr.splitlines() if "migrated copy" in line]
    assert warned and all(line.startswith("warning: ") for line in warned), r.stderr
    assert "UserWarning" not in r.stderr and "warnings.warn" not in r.stderr


@pytest.mark.parametrize(
    "edit, words",
    [
        (lambda d: d.update(kernels=[]), "names a kernel the table does not list"),
        (lambda d: d.update(format="something else"), "not a dispatch table"),
    ],
)
def test_a_broken_dispatch_table_is_one_line(tmp_path: Path, edit, words: str) -> None:
    import json

    data = json.loads((ROOT / "examples" / "transpose" / "results" / "dispatch.json").read_text())
    edit(data)
    (tmp_path / "t.json").write_text(json.dumps(data))
    for args in (("emit", "t.json", "-f", "cpp"), ("validate", "t.json", "--db", str(EXAMPLE_DB), "--random", "3")):
        r = cli(*args, cwd=tmp_path)
        assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
        assert [line for line in r.stderr.splitlines() if line.startswith("error:")][0].count(words) == 1, r.stderr


def test_report_writes_every_file_or_none(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`report --out` once wrote file by file, so a failure half-way left a half-written report (mixing old and
    new files). Now every file lands at the end: a failure leaves --out as it was, and no staging folder stays."""
    from typer.testing import CliRunner

    from autotune.cli.main import app
    import autotune.dispatch.report as report_module

    out = tmp_path / "report"
    out.mkdir()
    (out / "summary.csv").write_text("old\n")

    def broken(*args, **kwargs):  # noqa: ANN002, ANN003 - fails after the first files of the report are written
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(report_module, "emit_python", broken, raising=False)
    import autotune.dispatch.emit as emit_module  # cli/analyze imports it where used

    monkeypatch.setattr(emit_module, "emit_python", broken)
    r = CliRunner().invoke(app, ["report", str(EXAMPLE_DB), "--out", str(out)])
    assert r.exit_code != 0
    assert sorted(p.name for p in out.iterdir()) == ["summary.csv"] and (out / "summary.csv").read_text() == "old\n"
    assert [p.name for p in tmp_path.iterdir()] == ["report"]  # no staging folder left beside it
    monkeypatch.undo()
    r = CliRunner().invoke(app, ["report", str(EXAMPLE_DB), "--out", str(out)])
    assert r.exit_code == 0, r.output
    names = {p.name for p in out.iterdir()}
    assert {"summary.csv", "dispatch.json", "dispatch.py", "dispatch.cuh"} <= names
    assert (out / "summary.csv").read_text() != "old\n" and str(out / "dispatch.json") in r.output.replace("\n", "")
