"""Kernel Tuner caches through a real results database and the real command line: import (a closed cache, an
unterminated one, one cut off mid-entry), export, and the round trip reproduces every configuration's key,
status and time; the export is a cache our reader (and Kernel Tuner's, by format) accepts, and T4 too."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from autotune.interop.kerneltuner import read_cache
from autotune.interop.kt_export import keys_and_times
from tests.support.harness import invoke_cli as cli  # in this process: the commands are tested, not a start

DATA = Path(__file__).resolve().parent / "data" / "kerneltuner"
ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize(
    "fixture", ["matmul_cache.json", "matmul_cache_open.json", "matmul_cache_cut.json", "matmul_cache_kt13.json"]
)
def test_import_then_export_reproduces_keys_and_times(tmp_path: Path, fixture: str) -> None:
    cache = tmp_path / fixture
    cache.write_bytes((DATA / fixture).read_bytes())
    db = tmp_path / "kt.sqlite"
    r = cli("import", "kerneltuner", str(cache), "--db", str(db))
    assert r.returncode == 0, r.stderr
    assert "imported" in r.stdout and (tmp_path / (cache.stem + ".space.yaml")).is_file()
    original = read_cache(cache) if "cut" not in fixture else None
    again = cli("import", "kerneltuner", str(cache), "--db", str(db))  # importing twice adds nothing
    assert again.returncode == 0, again.stderr
    out, t4 = tmp_path / "out.json", tmp_path / "t4.json"
    space = json.loads((DATA / "matmul_cache.json").read_text().split('"cache"')[0].rstrip().rstrip(",") + "}")[
        "kernel_name"
    ]
    r = cli(
        "export",
        "kerneltuner",
        str(db),
        "--space",
        "".join(c if c.isalnum() else "_" for c in space),
        "--out",
        str(out),
        "--t4",
        str(t4),
    )
    assert r.returncode == 0, r.stderr
    exported = read_cache(out)
    if original is None:
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            original = read_cache(cache)
    assert keys_and_times(exported) == keys_and_times(original)
    assert exported.tune_params_keys == original.tune_params_keys
    assert exported.device_name == original.device_name
    doc = json.loads(t4.read_text())
    assert len(doc["results"]) == len(original.records)


def test_import_with_a_space_and_errors(tmp_path: Path) -> None:
    db = tmp_path / "kt.sqlite"
    r = cli(
        "import",
        "kerneltuner",
        str(DATA / "matmul_cache.json"),
        "--db",
        str(db),
        "--space",
        str(ROOT / "examples/transpose/space.yaml"),
    )
    assert r.returncode == 2 and "not parameters of space transpose_tiled" in r.stderr
    bad = tmp_path / "bad.json"
    bad.write_text('{"hello": 1}')
    r = cli("import", "kerneltuner", str(bad), "--db", str(db))
    assert r.returncode != 0 and "Traceback" not in r.stderr and "bad.json" in r.stderr
