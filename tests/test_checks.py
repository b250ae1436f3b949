"""The static checks CI runs, as tests (configuration in pyproject.toml and mkdocs.yml; the same hooks in
.pre-commit-config.yaml): ruff's lint rules, mypy on the package, and the documentation site built with warnings
as errors. Each runs the real tool; where it is not installed the test skips, unless AUTOTUNE_REQUIRE_CHECKS=1
(set by .ci/run), where a missing tool fails. The tree is formatted by `ruff format` (checked here too)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import warnings
from collections import Counter
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


MYPY_BASELINE = ROOT / "tests" / "data" / "mypy_baseline.txt"


def _mypy_errors(text: str) -> list[str]:
    """`path: message [code]` per error (no line numbers, so that edits elsewhere in a file do not move them)."""
    found = []
    for line in text.splitlines():
        m = re.match(r"^(?P<path>[^:]+):\d+(?::\d+)?: error: (?P<msg>.*)$", line)
        if m:
            found.append(f"{m['path']}: {m['msg']}")
    return sorted(found)


def _baseline() -> Counter[str]:
    """The listed errors of tests/data/mypy_baseline.txt; none when the file is absent or lists none."""
    if not MYPY_BASELINE.exists():
        return Counter()
    return Counter(line for line in MYPY_BASELINE.read_text().splitlines() if line and not line.startswith("#"))


def test_mypy_finds_no_new_error() -> None:
    """mypy on the package (configuration: pyproject.toml [tool.mypy]). The errors it found when the check was
    introduced, in modules other helpers were changing at the time, are listed in tests/data/mypy_baseline.txt:
    a new error fails this test; a fixed one is reported so that its line is deleted (the list only shrinks).
    Once the list is empty (or the file deleted) this is a plain check: mypy exits 0."""
    out = _run([_tool("mypy"), "--no-incremental", "--cache-dir", os.devnull])
    assert "error:" in out.stdout or out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    baseline = _baseline()
    now = Counter(_mypy_errors(out.stdout))
    new = now - baseline
    assert not new, "new mypy errors:\n" + "\n".join(sorted(new.elements()))
    if not baseline:
        assert out.returncode == 0, "mypy is not clean:\n" + out.stdout[-3000:] + out.stderr[-3000:]
    fixed = baseline - now
    if fixed:
        warnings.warn(
            f"{sum(fixed.values())} errors of tests/data/mypy_baseline.txt are fixed: delete their lines", stacklevel=1
        )


def test_an_absent_or_empty_baseline_lists_no_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With no baseline left, the mypy test above requires a clean run (no error is excused)."""
    monkeypatch.setattr(sys.modules[__name__], "MYPY_BASELINE", tmp_path / "absent.txt")
    assert _baseline() == Counter()
    (tmp_path / "absent.txt").write_text("# comments only\n\n")
    assert _baseline() == Counter()
    (tmp_path / "absent.txt").write_text("# c\na.py: msg  [code]\n")
    assert _baseline() == Counter({"a.py: msg  [code]": 1})


def test_the_documentation_builds_strict(tmp_path: Path) -> None:
    out = _run([_tool("mkdocs"), "build", "--strict", "--site-dir", str(tmp_path / "site")])
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-4000:]
    assert (tmp_path / "site" / "cli" / "index.html").read_text().count("autotune sweep") >= 1
