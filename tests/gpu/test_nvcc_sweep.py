"""GPU tier: a kernel that includes <cub/cub.cuh> and reduces with cub::BlockReduce is
swept with `compiler: nvcc` through the real GpuBackend (cubins built by nvcc, loaded by the GPU worker, verified
and timed); the same space under NVRTC fails to compile in every instance, and the sweep stops the space after the
first few, saying why once. Needs nvcc besides the GPU."""

from __future__ import annotations

import shutil
import textwrap
from pathlib import Path

import pytest

from autotune.store.store import Store
from autotune.sweep.backends.local import GpuBackend, LocalOptions
from autotune.sweep.config import parse_config
from autotune.sweep.runner import run_sweep

pytestmark = [pytest.mark.gpu, pytest.mark.nvcc]
DATA = Path(__file__).resolve().parents[1] / "data"


class Notes:
    def __init__(self) -> None:
        self.notes: list[str] = []

    def start(self, total: int, done: int) -> None: ...
    def measured(self, m, best) -> None: ...  # noqa: ANN001
    def note(self, text: str) -> None:
        self.notes.append(text)


def user_space(tmp_path: Path, compiler: str | None) -> Path:
    """The CUB space in a folder of its own, with `compiler:` as given (None: the default, NVRTC)."""
    (tmp_path / "space").mkdir()
    for name in ("cub_block_sum.cu", "reference.py"):
        shutil.copy(DATA / "cub_space" / name, tmp_path / "space")
    text = (DATA / "cub_space" / "space.yaml").read_text()
    if compiler is None:  # (and no -O3, which NVRTC does not take: its only failure is CUB's)
        text = text.replace("  compiler: nvcc\n", "").replace('  compiler_options: ["-O3"]\n', "")
        assert "\n  compiler" not in text
    (tmp_path / "space" / "space.yaml").write_text(text)
    return tmp_path / "space" / "space.yaml"


def sweep(tmp_path: Path, space: Path, extra: str = "") -> tuple[Store, object, list[str]]:
    cfg = parse_config(
        textwrap.dedent(f"""\
        name: cub
        spaces: [{space}]
        points: [{{sizes: {{n: [1000, 100003, 4000000]}}}}]
        repetitions: 5
        database: sqlite:///{tmp_path / "db.sqlite"}
        """)
        + extra,
        file=tmp_path / "cub.yaml",
    )
    store = Store.open(cfg.database)
    notes = Notes()
    with GpuBackend(LocalOptions(cache_dir=tmp_path / "cache")) as backend:
        summary = run_sweep(cfg, store, backend, notes)
    return store, summary, notes.notes


def test_a_cub_kernel_sweeps_with_nvcc(tmp_path: Path) -> None:
    store, summary, notes = sweep(tmp_path, user_space(tmp_path, "nvcc"))
    frame = store.measurements()
    counts = frame.status.value_counts().to_dict()
    assert len(frame) == 6 * 3, frame[["instance", "status", "error"]]
    assert counts.get("ok", 0) + counts.get("skipped", 0) == len(frame), frame[["instance", "status", "error"]]
    assert counts.get("ok", 0) >= 3  # at least the best of each point is verified and timed in full
    assert (frame.compile_s.dropna() > 0).all()
    assert not [n for n in notes if "stopped" in n]
    # resumed: everything is in the database and the compile cache; nothing is measured again
    _, again, _ = sweep(tmp_path, tmp_path / "space" / "space.yaml")
    assert again.measured == 0


def test_under_nvrtc_the_same_space_fails_alike_and_stops_early(tmp_path: Path) -> None:
    store, summary, notes = sweep(tmp_path, user_space(tmp_path, None), "stop_after_failures: 2\n")
    frame = store.measurements()
    assert set(frame.status) == {"compile_error"}, frame[["instance", "status", "error"]]
    assert len(frame) < 6 * 3  # the space stopped before its last instances
    stops = [n for n in notes if "stopped" in n]
    assert len(stops) == 1 and "cub_total_nvcc" in stops[0] and "compile error" in stops[0], notes
    assert summary.status == "done"
