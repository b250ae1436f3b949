"""`-o/--out FILE` writes the format its extension names (`autotune emit`: .json, .cuh/.h/.hpp, .py, .csv; `autotune
space export`: .csv, .json): `emit -o x.cuh` used to write JSON without a word. An explicit --format that disagrees
with the extension wins with one warning line; an extension naming no format, without --format, is one error line
and writes nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TABLE = ROOT / "examples" / "transpose" / "results" / "dispatch.json"


def cli(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "autotune", *args],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=300,
    )


def kind_of(text: str) -> str:
    """Which of the formats `text` is."""
    if text.lstrip().startswith("{"):
        json.loads(text)
        return "json"
    if "constexpr" in text and "#pragma once" in text:
        return "cpp"
    if text.startswith('"""') and "def lookup(" in text:
        return "python"
    if text.startswith("precision,shape,"):
        return "csv"
    return "unknown"


@pytest.mark.parametrize(
    "name, fmt",
    [("t.json", "json"), ("t.cuh", "cpp"), ("t.h", "cpp"), ("t.hpp", "cpp"), ("t.py", "python"), ("T.CSV", "csv")],
)
def test_emit_writes_the_format_of_the_extension(tmp_path: Path, name: str, fmt: str) -> None:
    r = cli(tmp_path, "emit", str(TABLE), "-o", name)
    assert r.returncode == 0 and "warning" not in r.stderr, r.stderr
    assert kind_of((tmp_path / name).read_text()) == fmt


def test_a_format_that_disagrees_with_the_extension_wins_with_one_warning(tmp_path: Path) -> None:
    r = cli(tmp_path, "emit", str(TABLE), "--format", "json", "-o", "t.cuh")
    assert r.returncode == 0, r.stderr
    lines = [line for line in r.stderr.splitlines() if line.startswith("warning:")]
    assert len(lines) == 1 and "--format json" in lines[0] and "t.cuh" in lines[0], r.stderr
    assert kind_of((tmp_path / "t.cuh").read_text()) == "json"


@pytest.mark.parametrize("name", ["t.txt", "table", "t.html"])
def test_an_extension_naming_no_format_is_one_error_line(tmp_path: Path, name: str) -> None:
    r = cli(tmp_path, "emit", str(TABLE), "-o", name)
    assert r.returncode == 2 and r.stderr.startswith("error:") and "Traceback" not in r.stderr, r.stderr
    assert "--format" in r.stderr and not (tmp_path / name).exists()
    r = cli(tmp_path, "emit", str(TABLE), "-o", name, "--format", "csv")  # said: written as asked
    assert r.returncode == 0 and "warning" not in r.stderr and kind_of((tmp_path / name).read_text()) == "csv"


def test_space_export_writes_the_format_of_the_extension(tmp_path: Path) -> None:
    r = cli(tmp_path, "space", "export", "gemm_naive", "-o", "i.json", "--device", "H100")
    assert r.returncode == 0, r.stderr
    assert json.loads((tmp_path / "i.json").read_text())["space"] == "gemm_naive"
    r = cli(tmp_path, "space", "export", "gemm_naive", "-o", "i.yaml", "--device", "H100")
    assert r.returncode == 2 and r.stderr.startswith("error:") and not (tmp_path / "i.yaml").exists(), r.stderr
