"""The Python module `autotune emit --format python` writes is standalone (docs/analysis.md): it runs with the Python
standard library only (`python -I -S`: no site-packages, no current directory, no PYTHONPATH) and answers every
problem as autotune.dispatch.runtime does, for committed tables of every structure (regions, nearest, cost, model)."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

from autotune.dispatch.runtime import Lookup

ROOT = Path(__file__).resolve().parent.parent
TABLES = {
    "regions": "results/default/dispatch.json",
    "nearest": "results/softmax_model_h100/dispatch.json",
    "cost": "results/tc_final_h100/dispatch.json",
    "model": "results/small_tables_h100/model/dispatch.json",
    "transpose": "examples/transpose/results/dispatch.json",
}
PROBE = """
import json, sys, time
sys.path.insert(0, sys.argv[1])
import dispatch_standalone as d
problems = json.loads(sys.stdin.read())
answers = [d._LOOKUP.index(p, s, sizes) for p, s, sizes in problems]
foreign = sorted(m for m in sys.modules if m.split(".")[0] in ("autotune", "numpy", "pandas", "yaml"))
start = time.perf_counter()
for _ in range(5):
    for p, s, sizes in problems:
        d._LOOKUP.index(p, s, sizes)
per_call_us = (time.perf_counter() - start) / (5 * len(problems)) * 1e6
print(json.dumps({"answers": answers, "foreign": foreign, "per_call_us": per_call_us}))
"""


def problems(table: dict, count: int, seed: int) -> list[tuple[str, str, list[int]]]:
    """The table's tuned points and `count` random problems around them."""
    rng = random.Random(seed)
    out = [(p["precision"], p["shape"], [p["sizes"][n] for n in table["size_names"]]) for p in table["points"]]
    for _ in range(count):
        base = rng.choice(table["points"])
        sizes = [max(1, int(base["sizes"][n] * rng.uniform(0.3, 3.0))) for n in table["size_names"]]
        out.append((rng.choice(table["precisions"]), rng.choice(table["shapes"]), sizes))
    return out


@pytest.mark.parametrize("name", sorted(TABLES))
def test_the_emitted_module_runs_with_the_standard_library_only(tmp_path: Path, name: str) -> None:
    source = ROOT / TABLES[name]
    table = json.loads(source.read_text())
    module = tmp_path / "dispatch_standalone.py"
    r = subprocess.run(
        [sys.executable, "-m", "autotune", "emit", str(source), "--format", "python", "--out", str(module)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=300,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    asked = problems(table, 300, seed=len(name))
    probe = subprocess.run(
        [sys.executable, "-I", "-S", "-c", PROBE, str(tmp_path)],
        input=json.dumps(asked),
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin"},
        timeout=300,
    )
    assert probe.returncode == 0, probe.stderr[-3000:]
    got = json.loads(probe.stdout)
    assert got["foreign"] == []
    lookup = Lookup(table)
    assert got["answers"] == [lookup.index(p, s, sizes) for p, s, sizes in asked]
    print(f"{name}: {got['per_call_us']:.1f} us per lookup_index call (mean over {len(asked)} problems)")
