"""`autotune sweep --replay` of a space imported from a Kernel Tuner cache (issue 57's gap): the import writes the
space's test points as a recorded kind (`problem: {name: kerneltuner, sizes: [size_x, size_y], recorded: true}`), a
sweep config names them, and a search replays the imported measurements; measuring such a space on a GPU is one
error saying what to do. On a real cache: the benchmark hub's convolution on an AMD W7800 (results/bench/hub/, 4,362
configurations measured by the hub's authors with Kernel Tuner)."""

from __future__ import annotations

import json
import lzma
import sqlite3
from pathlib import Path

import pytest

from autotune.errors import UserError
from autotune.paths import ROOT
from autotune.sweep.config import load_config
from autotune.sweep.runner import run_sweep
from autotune.store.store import Store
from tests.support.harness import invoke_cli as cli  # in this process: the commands are tested, not a start

HUB = ROOT / "results/bench/hub/convolution_milo_W7800.json.xz"


def imported(tmp_path: Path, budget: int) -> tuple[Path, Path]:
    """The hub's cache imported through the command line, and a sweep config searching its point."""
    cache = tmp_path / "conv_W7800.json.xz"
    cache.write_bytes(HUB.read_bytes())
    db = tmp_path / "kt.sqlite"
    r = cli("import", "kerneltuner", str(cache), "--db", str(db))
    assert r.returncode == 0, r.stderr
    config = tmp_path / "sweep.yaml"
    config.write_text(
        f"spaces: [{cache.name.removesuffix('.xz')}.space.yaml]\n"
        "points:\n  - sizes: {size_x: 4096, size_y: 4096}\n"
        f"strategy: {{name: hybrid, budget: {budget}}}\n"
    )
    return config, db


def test_a_search_replays_an_imported_cache(tmp_path: Path) -> None:
    config, db = imported(tmp_path, 30)
    assert "recorded: true" in (tmp_path / "conv_W7800.json.space.yaml").read_text()
    out = tmp_path / "out.sqlite"
    r = cli("sweep", str(config), "--replay", str(db), "--db", str(out), "--quiet")
    assert r.returncode == 0, r.stderr
    assert "sweep 1: done" in r.stdout and "kerneltuner:fp32:-:4096x4096" in " ".join((r.stdout + r.stderr).split())
    times = {
        key: e["time"]
        for key, e in json.loads(lzma.decompress(HUB.read_bytes()))["cache"].items()
        if isinstance(e.get("time"), (int, float))
    }
    with sqlite3.connect(out) as c:
        rows = c.execute(
            "select i.params, m.status, m.log from measurements m join instances i on i.id = m.instance_id"
        ).fetchall()
    assert len(rows) == 30  # the budget, every one a configuration of the cache with its recorded time
    names = ("block_size_x", "block_size_y", "tile_size_x", "tile_size_y", "read_only", "use_padding", "use_shmem")
    names += ("use_cmem", "filter_height", "filter_width")
    ok = [(json.loads(p), json.loads(log)) for p, status, log in rows if status == "ok"]
    assert len(ok) >= 20
    for p, log in ok:
        assert log["time"] == pytest.approx(times[",".join(str(p[k]) for k in names)])


def test_measuring_such_a_space_on_a_gpu_is_one_error_saying_what_to_do(tmp_path: Path) -> None:
    cache = tmp_path / "matmul.json"  # Kernel Tuner 1.5.0's own cache writer (tests/data/kerneltuner/README.md)
    cache.write_text((ROOT / "tests/data/kerneltuner/matmul_cache.json").read_text())
    r = cli("import", "kerneltuner", str(cache), "--db", str(tmp_path / "kt.sqlite"))
    assert r.returncode == 0, r.stderr
    config = tmp_path / "sweep.yaml"
    config.write_text("spaces: [matmul.space.yaml]\npoints:\n  - sizes: {size_x: 4096, size_y: 4096}\n")

    from tests.support.formula_backend import FormulaBackend

    class Gpu(FormulaBackend):  # a backend that measures (no recording of its own): run_sweep refuses before it is used
        def device_info(self):  # pragma: no cover - never reached
            raise AssertionError("the GPU was asked")

    with Store.open(str(tmp_path / "gpu.sqlite")) as store, pytest.raises(UserError) as err:
        run_sweep(load_config(config), store, Gpu(), None)  # type: ignore[arg-type]
    assert "recorded measurements only" in err.value.message and "--replay" in (err.value.hint or "")
