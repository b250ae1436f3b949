"""GPU tier: what a user's problem does wrong on the GPU, through the real GpuBackend.

The problem's own faults (a reference that raises or returns what the outputs cannot hold, buffers that cannot be
made, a kernel name the source lacks) are not data about an instance: the sweep stops with one error naming the
culprit, records nothing for the pair and leaves nothing in flight, so the same command measures everything once
the user fixed it. A kernel's own faults (an out-of-bounds write) are data: that instance is a `launch_error`, the
worker is replaced and the next instance is measured."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from autotune.errors import UserError
from autotune.store.store import Store
from tests.support.gpu_sweep import gpu_sweep

pytestmark = pytest.mark.gpu
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "transpose"
POINTS = "[{sizes: {rows: 64, cols: 96}}]"


@pytest.fixture
def user(tmp_path: Path) -> Path:
    folder = tmp_path / "user"
    shutil.copytree(EXAMPLE, folder, ignore=shutil.ignore_patterns("results"))
    return folder


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, (path, old)
    path.write_text(text.replace(old, new, 1))


def sweep(tmp_path: Path, folder: Path, max_instances: int = 4) -> Store:
    return gpu_sweep(tmp_path, folder / "space.yaml", POINTS, max_instances)


def rows(store: Store, sql: str) -> list[tuple]:
    with store.engine.connect() as conn:
        return [tuple(r) for r in conn.exec_driver_sql(sql).fetchall()]


PROBLEM_FAULTS = {
    "reference raises": (
        "reference.py",
        'return {"out": arrays["inp"].T.copy()}',
        'raise RuntimeError("boom in the reference")',
        r"reference\.py:transpose failed.*boom",
    ),
    "reference wrong size": (
        "reference.py",
        'return {"out": arrays["inp"].T.copy()}',
        'return {"out": arrays["inp"][:3]}',
        r"reference\.py:transpose failed.*reshape",
    ),
    "reference not an array": (
        "reference.py",
        'return {"out": arrays["inp"].T.copy()}',
        'return {"out": "not an array"}',
        r"reference\.py:transpose failed",
    ),
    "reference forgets an output": (
        "reference.py",
        'return {"out": arrays["inp"].T.copy()}',
        'return {"output": arrays["inp"].T.copy()}',
        r"returned no out",
    ),
    "buffer shape negative": (
        "space.yaml",
        "shape: [cols, rows], output: true",
        "shape: [cols, rows - 100], output: true",
        r"buffers could not be made|negative|shape",
    ),
    "kernel name missing": (
        "space.yaml",
        "name: transpose_kernel",
        "name: transpose_kernel_renamed",
        r"no kernel named 'transpose_kernel_renamed'",
    ),
}


@pytest.mark.parametrize("case", list(PROBLEM_FAULTS))
def test_a_problem_fault_stops_the_sweep_records_nothing_and_resumes_once_fixed(
    tmp_path: Path, user: Path, case: str
) -> None:
    file, old, new, words = PROBLEM_FAULTS[case]
    original = (user / file).read_text()
    edit(user / file, old, new)
    with pytest.raises(UserError) as err:
        sweep(tmp_path, user)
    print(f"{case}: {err.value}")
    assert re.search(words, str(err.value)), str(err.value)
    store = Store.open(f"sqlite:///{tmp_path / 'db.sqlite'}")
    assert rows(store, "SELECT COUNT(*) FROM measurements") == [(0,)]
    assert rows(store, "SELECT COUNT(*) FROM inflight") == [(0,)]
    (user / file).write_text(original)  # fixed: the same sweep measures every pair
    store = sweep(tmp_path, user)
    statuses = dict(rows(store, "SELECT status, COUNT(*) FROM measurements GROUP BY status"))
    assert statuses.get("ok", 0) + statuses.get("skipped", 0) == 4, statuses


def test_a_huge_buffer_is_refused_or_fails_as_the_problems_fault(tmp_path: Path, user: Path) -> None:
    edit(user / "space.yaml", "shape: [rows, cols], init: random", "shape: [rows, cols, 100000000000], init: random")
    with pytest.raises(UserError) as err:
        sweep(tmp_path, user)
    print(f"huge buffer: {err.value}")
    store = Store.open(f"sqlite:///{tmp_path / 'db.sqlite'}")
    assert rows(store, "SELECT COUNT(*) FROM measurements") == [(0,)]


def test_an_out_of_bounds_write_is_one_instances_launch_error_and_the_sweep_goes_on(tmp_path: Path, user: Path) -> None:
    """Instances with TILE_DIM 64 write far past `out` (an illegal address: a poisoned context); the others are ok."""
    edit(
        user / "transpose.cu",
        "__shared__ float tile[TILE_DIM][TILE_DIM + PAD];",
        "__shared__ float tile[TILE_DIM][TILE_DIM + PAD];\n"
        "#if TILE_DIM == 64\n    if (threadIdx.x == 0) out[(1ll << 40) + blockIdx.x] = 1.0f;\n#endif",
    )
    store = sweep(tmp_path, user, max_instances=52)
    frame = store.measurements()
    by_tile: dict[int, set[str]] = {}
    for tile, status, error in zip(frame.TILE_DIM, frame.status, frame.error, strict=True):
        by_tile.setdefault(int(tile), set()).add(status if status != "skipped" else "ok")
        if int(tile) == 64:
            assert status == "launch_error" and "illegal" in (error or "").lower(), (tile, status, error)
    print(f"out of bounds: {sorted((t, sorted(s)) for t, s in by_tile.items())}")
    assert by_tile[64] == {"launch_error"} and by_tile[32] == {"ok"}, by_tile
