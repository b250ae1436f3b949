"""A space file names files only in its own folder tree: its kernel `source:` (copied into the
results database), a declared kind's `reference:`/`baseline:` file and a `problem: file.py:Class` kind (both
executed). `/etc/passwd`, `../x.cu`, a link leading out: refused with one line naming the space file, the key and the
path, unless the user allows the folder (`autotune --allow-path DIR`, AUTOTUNE_ALLOW_PATHS). Built-in spaces and the
examples load as before."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from autotune import paths
from autotune.errors import SpaceError
from autotune.problems.allowed_paths import ALLOW_ENV
from autotune.space.spec import load_space

EXAMPLE = paths.ROOT / "examples" / "transpose"
KIND = """from autotune.problems.base import ProblemKind
open(__file__ + ".ran", "w").close()  # proof that the file was executed


class Scale(ProblemKind):
    name = "scale_py"
    size_names = ("n",)

    def bytes_moved(self, point, scalars):
        return point.n

    def allocate(self, point, convention, scalars, l2_bytes, seed):
        raise NotImplementedError
"""


@pytest.fixture
def space_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The transpose example copied to tmp/user/ (its space file, kernel and reference.py)."""
    monkeypatch.delenv(ALLOW_ENV, raising=False)
    folder = tmp_path / "user"
    folder.mkdir()
    for name in ("space.yaml", "transpose.cu", "reference.py"):
        shutil.copy(EXAMPLE / name, folder / name)
    return folder


def edited(folder: Path, old: str, new: str, name: str = "s.yaml") -> Path:
    text = (folder / "space.yaml").read_text()
    assert old in text
    (folder / name).write_text(text.replace(old, new))
    return folder / name


def refused(space: Path, key: str, shown: Path) -> SpaceError:
    with pytest.raises(SpaceError) as info:
        load_space(space)
    text = str(info.value)
    assert str(space) in text and key in text and str(shown) in text and "--allow-path" in text, text
    assert ALLOW_ENV in text and len(text.splitlines()) == 2, text  # the error and what to do
    return info.value


def test_the_example_and_a_source_in_a_subfolder_load(space_dir: Path) -> None:
    assert load_space(space_dir / "space.yaml").kernel.source_path == (space_dir / "transpose.cu").resolve()
    (space_dir / "kernels").mkdir()
    shutil.move(space_dir / "transpose.cu", space_dir / "kernels" / "t.cu")
    space = edited(space_dir, "source: transpose.cu", "source: kernels/t.cu")
    assert load_space(space).kernel.source_path == (space_dir / "kernels" / "t.cu").resolve()


@pytest.mark.parametrize("name", sorted(p.stem for p in paths.SPACES_DIR.glob("*.yaml")))
def test_built_in_spaces_still_load(name: str) -> None:
    kernel = load_space(name).kernel
    assert kernel is None or kernel.source_path.is_file()  # synthetic_1e9 has no kernel


@pytest.mark.parametrize(
    "example", sorted(p.name for p in (paths.ROOT / "examples").iterdir() if (p / "space.yaml").is_file())
)
def test_examples_still_load(example: str) -> None:
    assert load_space(paths.ROOT / "examples" / example / "space.yaml").kernel.source_path.is_file()


def test_a_system_file_as_source_is_refused(space_dir: Path) -> None:
    refused(edited(space_dir, "source: transpose.cu", "source: /etc/passwd"), "kernel: source:", Path("/etc/passwd"))


def test_a_source_above_the_space_folder_is_refused(space_dir: Path) -> None:
    shutil.copy(space_dir / "transpose.cu", space_dir.parent / "x.cu")
    refused(edited(space_dir, "source: transpose.cu", "source: ../x.cu"), "kernel: source:", space_dir.parent / "x.cu")


def test_a_link_that_leads_out_is_refused(space_dir: Path) -> None:
    (space_dir / "link.cu").symlink_to("/etc/passwd")
    refused(edited(space_dir, "source: transpose.cu", "source: link.cu"), "kernel: source:", Path("/etc/passwd"))


def test_a_reference_file_outside_is_refused_and_not_run(space_dir: Path) -> None:
    outside = space_dir.parent / "ref.py"
    outside.write_text((space_dir / "reference.py").read_text() + "\nopen(__file__ + '.ran', 'w').close()\n")
    refused(
        edited(space_dir, "reference: reference.py:transpose", "reference: ../ref.py:transpose"), "reference:", outside
    )
    refused(
        edited(space_dir, "baseline: reference.py:cupy_transpose", "baseline: ../ref.py:cupy_transpose"),
        "baseline:",
        outside,
    )
    assert not Path(f"{outside}.ran").exists()


def test_a_python_kind_outside_is_refused_and_not_run(tmp_path: Path, space_dir: Path) -> None:
    kind = tmp_path / "kinds.py"
    kind.write_text(KIND)
    space = space_dir / "k.yaml"
    space.write_text("name: k\nproblem: ../kinds.py:Scale\nparameters:\n  bs: [32]\n")
    refused(space, "problem:", kind)
    assert not Path(f"{kind}.ran").exists()


def test_the_environment_allows_a_folder(space_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    extra = space_dir.parent / "shared"
    extra.mkdir()
    shutil.copy(space_dir / "transpose.cu", extra / "t.cu")
    space = edited(space_dir, "source: transpose.cu", f"source: {extra / 't.cu'}")
    refused(space, "kernel: source:", extra / "t.cu")
    monkeypatch.setenv(ALLOW_ENV, os.pathsep.join(["/nonexistent", str(extra)]))
    assert load_space(space).kernel.source_path == (extra / "t.cu").resolve()


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != ALLOW_ENV}
    return subprocess.run(
        [sys.executable, "-m", "autotune", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=dict(env, PYTHONPATH=str(paths.ROOT)),
        timeout=120,
    )


def test_the_command_line_refuses_in_one_line_and_allow_path_allows(space_dir: Path) -> None:
    shutil.copy(space_dir / "transpose.cu", space_dir.parent / "x.cu")
    space = edited(space_dir, "source: transpose.cu", "source: ../x.cu")
    r = cli("space", "show", str(space), cwd=space_dir)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    errors = [line for line in r.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and str(space) in errors[0] and "../x.cu" in errors[0], r.stderr
    r = cli("--allow-path", str(space_dir.parent), "space", "show", str(space), cwd=space_dir)
    assert r.returncode == 0, r.stderr
