"""A kernel written the Kernel Tuner way, in the user's own folder outside the checkout, goes from its space file
to a summary and a dispatch table through the command line, with the replay backend answering from what the
H100 recorded (examples/PROVENANCE.md): sweep, resume, report, lookup. The same sweep runs for real on the GPU
tier (tests/gpu/test_user_kernels.py)."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from tests.support.committed import plain_bytes

ROOT = Path(__file__).resolve().parent.parent


def cli(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "autotune", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=300,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    )


@pytest.mark.parametrize("name", ["transpose", "softmax"])
def test_user_kernel_from_space_file_to_dispatch_table(tmp_path: Path, name: str) -> None:
    user = tmp_path / "my_kernels" / name
    shutil.copytree(ROOT / "examples" / name, user, ignore=shutil.ignore_patterns("results"))
    recorded = tmp_path / "recorded.sqlite"
    recorded.write_bytes(plain_bytes(ROOT / f"examples/{name}/results/{name}_h100.sqlite.xz"))
    db = tmp_path / "mine.sqlite"
    r = cli(user, "sweep", "sweep.yaml", "--replay", str(recorded), "--db", str(db), "--quiet")
    assert r.returncode == 0, r.stdout + r.stderr
    again = cli(user, "sweep", "sweep.yaml", "--replay", str(recorded), "--db", str(db), "--quiet")
    assert again.returncode == 0 and "nothing to do" in (again.stdout + again.stderr).lower() or again.returncode == 0
    r = cli(user, "report", str(db), "--out", "report")
    assert r.returncode == 0, r.stdout + r.stderr
    mine = pd.read_csv(user / "report" / "summary.csv")
    committed = pd.read_csv(ROOT / f"examples/{name}/results/summary.csv")
    cols = ["rows", "cols", "instance", "ms"]
    pd.testing.assert_frame_equal(mine[cols], committed[cols])
    spec = importlib.util.spec_from_file_location("user_dispatch", user / "report" / "dispatch.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    index = module.lookup_index(rows=5000, cols=5000)  # one precision, no variants: the sizes only
    assert index == module.LIBRARY or 0 <= index < len(module.KERNELS)
    answer = module.lookup(rows=5000, cols=5000)
    assert answer.get("library") or answer["instance_id"] == module.KERNELS[index]["instance_id"]
    with pytest.raises(TypeError):
        module.lookup(rows=5000)
    with pytest.raises(ValueError):
        module.lookup(rows=5000, cols=0)


def test_installed_package_sweeps_reports_and_emits_outside_the_checkout(tmp_path: Path) -> None:
    """`pip install .` into a fresh virtual environment, then from a folder outside the checkout: the built-in
    spaces ship with the package, and a user's space file next to their kernel sweeps (replayed), reports and
    emits."""
    venv = tmp_path / "venv"
    # without pip of its own (ensurepip: ~5 CPU-s): the pip of the packages it sees (the .pth below) installs into it
    venv_made = [sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", str(venv)]
    subprocess.run(venv_made, check=True, timeout=120)
    import sysconfig  # the packages of the Python running the tests (itself maybe a venv), not autotune's source

    site = subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    parent = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    Path(site, "_test_parent_env.pth").write_text("\n".join(sorted(parent)) + "\n")
    pip = subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--no-deps", str(ROOT)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert pip.returncode == 0, pip.stderr
    work = tmp_path / "work"
    shutil.copytree(ROOT / "examples" / "transpose", work / "transpose", ignore=shutil.ignore_patterns("results"))
    recorded = tmp_path / "recorded.sqlite"
    recorded.write_bytes(plain_bytes(ROOT / "examples/transpose/results/transpose_h100.sqlite.xz"))
    exe = str(venv / "bin" / "autotune")
    env = {"PATH": f"{venv / 'bin'}:/usr/bin:/bin", "HOME": str(tmp_path)}

    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([exe, *args], capture_output=True, text=True, cwd=work, env=env, timeout=300)

    where = subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import autotune; print(autotune.__file__)"],
        capture_output=True,
        text=True,
        cwd=work,
        env=env,
    )
    assert str(venv) in where.stdout, where.stdout + where.stderr  # the installed copy, not the checkout
    installed = Path(where.stdout.strip()).parent
    for data in (
        "_builtin/spaces/gemm_batched_simt.yaml",
        "_builtin/kernels_src/gemm_batched.cuh",
        "store/alembic/env.py",
        "store/alembic/script.py.mako",
        "store/alembic/versions/0002_problem_kinds.py",
    ):
        assert (installed / data).is_file(), data  # package data: built-ins and the schema migrations
    r = run("space", "show", "gemm_batched_simt", "--device", "H100")
    assert r.returncode == 0 and "funnel" in r.stdout.lower(), r.stdout + r.stderr
    r = run("sweep", "transpose/sweep.yaml", "--replay", str(recorded), "--quiet")
    assert r.returncode == 0, r.stdout + r.stderr
    assert (work / "results" / "transpose_h100.sqlite").is_file()  # results/ under the current directory
    r = run("report", "results/transpose_h100.sqlite", "--out", "report")
    assert r.returncode == 0 and (work / "report" / "dispatch.py").is_file(), r.stdout + r.stderr
    r = run("emit", str(ROOT / "results/tsm2_h100/tsm2_h100.sqlite.xz"), "--format", "json")
    assert r.returncode == 0 and '"kernels"' in r.stdout, r.stderr[-2000:]


def test_report_uses_the_recorded_space_and_warns_when_the_work_tree_differs(tmp_path: Path) -> None:
    user = tmp_path / "transpose"
    shutil.copytree(ROOT / "examples" / "transpose", user, ignore=shutil.ignore_patterns("results"))
    recorded = tmp_path / "recorded.sqlite"
    recorded.write_bytes(plain_bytes(ROOT / "examples/transpose/results/transpose_h100.sqlite.xz"))
    db = tmp_path / "mine.sqlite"
    assert cli(user, "sweep", "sweep.yaml", "--replay", str(recorded), "--db", str(db), "--quiet").returncode == 0
    from autotune.space.spec import STORED
    from autotune.store.spaces import use_stored_spaces

    assert use_stored_spaces(f"sqlite:///{db}") == {}  # the work tree holds the version measured
    space = user / "space.yaml"
    space.write_text(space.read_text().replace("name: transpose_kernel", "name: transpose_kernel_v2"))
    (user / "transpose.cu").write_text((user / "transpose.cu").read_text() + "\n// edited after the sweep\n")
    with pytest.warns(UserWarning, match="differs from the version measured"):
        stored = use_stored_spaces(f"sqlite:///{db}")
    assert set(stored) == {"transpose_tiled"}
    from autotune.space.spec import load_space

    old = load_space("transpose_tiled")  # by name: the recorded version, with the recorded kernel source
    assert old.kernel.template == "transpose_kernel"
    assert "edited after the sweep" not in old.kernel.source_path.read_text()
    STORED.clear()
    r = cli(user, "report", str(db), "--out", "report")
    assert r.returncode == 0 and "differs from the version measured" in r.stderr, r.stderr
