"""The static checks CI runs, as tests (configuration in pyproject.toml and mkdocs.yml; the same hooks in
.pre-commit-config.yaml): ruff's lint rules, mypy on the package, and the documentation site built with warnings
as errors. Each runs the real tool; where it is not installed the test skips, unless AUTOTUNE_REQUIRE_CHECKS=1
(set by .ci/run), where a missing tool fails. The tree is formatted by `ruff format` (checked here too)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _tool(name: str) -> str:
    exe = shutil.which(name) or str(Path(sys.executable).with_name(name))
    if not Path(exe).exists():
        if os.environ.get("AUTOTUNE_REQUIRE_CHECKS") == "1":
            pytest.fail(f"{name} is not installed, and CI requires it (pip install -e '.[test,docs]')")
        pytest.skip(f"{name} is not installed (pip install -e '.[test,docs]')")
    return exe


def _run(args: list[str], timeout: float = 600) -> subprocess.CompletedProcess:
    env = dict(
        os.environ,
        PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
        NO_MKDOCS_2_WARNING="1",
    )
    return subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=timeout, env=env)


def test_ruff_lint_is_clean() -> None:
    out = _run([_tool("ruff"), "check", "--no-cache", "autotune", "scripts", "tests", "docs/hooks"])
    assert out.returncode == 0, out.stdout[-6000:] + out.stderr[-2000:]


def test_the_tree_is_formatted() -> None:
    """`ruff format --check`: run `ruff format .` before committing (the pre-commit hook does)."""
    out = _run([_tool("ruff"), "format", "--check", "--no-cache", "."])
    assert out.returncode == 0, out.stdout[-6000:] + out.stderr[-2000:]


def test_mypy_is_clean() -> None:
    """mypy on the package (configuration: pyproject.toml [tool.mypy]) finds no error; no error is excused."""
    out = _run([_tool("mypy"), "--no-incremental", "--cache-dir", os.devnull])
    assert out.returncode == 0, "mypy is not clean:\n" + out.stdout[-3000:] + out.stderr[-3000:]


def test_the_documentation_builds_strict(tmp_path: Path) -> None:
    out = _run([_tool("mkdocs"), "build", "--strict", "--site-dir", str(tmp_path / "site")])
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-4000:]
    assert (tmp_path / "site" / "cli" / "index.html").read_text().count("autotune sweep") >= 1
