"""Limits before work for an imported Kernel Tuner cache: a file above the size limit is refused
before it is read, a cache of more entries than the entry limit before any is stored; each error names its knob
(`--max-cache-mb` / AUTOTUNE_MAX_CACHE_MB, `--max-entries` / AUTOTUNE_MAX_CACHE_ENTRIES), and nothing is written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from autotune.interop.kerneltuner import CacheFormatError, CacheLimitError, read_cache
from autotune.interop.kt_store import limit_hint
from tests.support.harness import run_cli as cli

ROOT = Path(__file__).resolve().parent.parent
HEADER = {
    "device_name": "NVIDIA H100",
    "kernel_name": "k",
    "problem_size": [64, 64],
    "tune_params_keys": ["bx"],
    "tune_params": {"bx": list(range(1, 1001))},
    "objective": "time",
}


def cache_text(n: int) -> str:
    entries = ",\n".join(
        f'"{b}": {json.dumps({"bx": b, "time": 0.5 + b, "times": [0.5 + b]})}' for b in range(1, n + 1)
    )
    return json.dumps(HEADER)[:-1] + ', "cache": {\n' + entries + "}\n}\n"


def test_a_file_above_the_size_limit_is_refused_before_reading(tmp_path: Path) -> None:
    big = tmp_path / "big.json"
    big.write_bytes(b"\xff" * (2**20 + 1))  # not even text: reading it would fail otherwise
    with pytest.raises(CacheLimitError, match="above the limit") as info:
        read_cache(big, max_bytes=2**20)
    assert "--max-cache-mb 2" in limit_hint(info.value) and "AUTOTUNE_MAX_CACHE_MB=2" in limit_hint(info.value)
    with pytest.raises(CacheFormatError, match="not UTF-8"):
        read_cache(big, max_bytes=2 * 2**20)  # the limit raised: now it is read (and is no cache)


def test_the_entry_limit_counts_entries(tmp_path: Path) -> None:
    path = tmp_path / "c.json"
    path.write_text(cache_text(5))
    assert len(read_cache(path, max_entries=5).records) == 5
    with pytest.raises(CacheLimitError, match="more than 4 entries") as info:
        read_cache(path, max_entries=4)
    assert "--max-entries 5" in limit_hint(info.value)


@pytest.mark.parametrize(
    "args, env, knob",
    [
        (("--max-entries", "3"), {}, "--max-entries"),
        ((), {"AUTOTUNE_MAX_CACHE_ENTRIES": "3"}, "AUTOTUNE_MAX_CACHE_ENTRIES"),
        (("--max-cache-mb", "1"), {}, "--max-cache-mb"),
        ((), {"AUTOTUNE_MAX_CACHE_MB": "1"}, "AUTOTUNE_MAX_CACHE_MB"),
    ],
)
def test_import_refuses_above_a_limit_and_names_the_knob(tmp_path: Path, args: tuple, env: dict, knob: str) -> None:
    cache = tmp_path / "c.json"
    text = cache_text(4)
    if "mb" in knob.lower():
        text += " " * 2**20  # trailing white space: a valid cache of 4 entries, above 1 MB
    cache.write_text(text)
    r = cli("import", "kerneltuner", str(cache), "--db", "x.sqlite", *args, cwd=tmp_path, **env)
    assert r.returncode == 2, r.stdout + r.stderr
    errors = [line for line in r.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and str(cache) in errors[0] and "limit" in errors[0], r.stderr
    assert knob in r.stderr and "Traceback" not in r.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.json"], "nothing is written"


def test_import_below_the_limits_works(tmp_path: Path) -> None:
    cache = tmp_path / "c.json"
    cache.write_text(cache_text(4))
    r = cli("import", "kerneltuner", str(cache), "--db", "x.sqlite", "--max-entries", "4", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "imported 4 configurations" in r.stdout


def test_a_gzipped_cache_is_read_and_its_unpacked_size_is_limited(tmp_path: Path) -> None:
    """The benchmark hub ships its caches as .json.gz (results/bench/hub/ keeps them as .json.xz): they import as they are; a small
    gzip file that unpacks past the byte limit (a gzip bomb) is refused while unpacking."""
    import gzip

    gz = tmp_path / "c.json.gz"
    gz.write_bytes(gzip.compress(cache_text(20).encode()))
    assert len(read_cache(gz).records) == 20
    bomb = tmp_path / "bomb.json.gz"
    bomb.write_bytes(gzip.compress(b" " * (4 * 2**20)))
    assert bomb.stat().st_size < 2**20
    with pytest.raises(CacheLimitError, match="above the limit"):
        read_cache(bomb, max_bytes=2**20)
    (tmp_path / "bad.json.gz").write_bytes(gzip.compress(b"{}")[:-6])
    with pytest.raises(CacheFormatError, match="damaged gzip"):
        read_cache(tmp_path / "bad.json.gz")


def test_an_xz_cache_is_read_and_its_unpacked_size_is_limited(tmp_path: Path) -> None:
    """results/bench/hub keeps its caches as .json.xz: read as they are; an xz bomb and a cut file are refused."""
    import lzma

    xz = tmp_path / "c.json.xz"
    xz.write_bytes(lzma.compress(cache_text(20).encode()))
    assert len(read_cache(xz).records) == 20
    bomb = tmp_path / "bomb.json.xz"
    bomb.write_bytes(lzma.compress(b" " * (4 * 2**20)))
    with pytest.raises(CacheLimitError, match="above the limit"):
        read_cache(bomb, max_bytes=2**20)
    (tmp_path / "cut.json.xz").write_bytes(lzma.compress(cache_text(20).encode())[:-40])
    with pytest.raises(CacheFormatError, match="damaged xz"):
        read_cache(tmp_path / "cut.json.xz")


def test_the_committed_hub_caches_import(tmp_path: Path) -> None:
    hub = ROOT / "results" / "bench" / "hub" / "convolution_milo_A100.json.xz"
    r = cli(
        "import",
        "kerneltuner",
        str(hub),
        "--db",
        str(tmp_path / "hub.sqlite"),
        "--space-out",
        str(tmp_path / "hub.space.yaml"),
        cwd=tmp_path,
    )  # (never beside the committed cache)
    assert r.returncode == 0, r.stderr
    assert not list(hub.parent.glob("*.space.yaml"))
    assert "imported 4362 configurations (161 failed)" in " ".join(r.stdout.split())
