"""The package's layering (pyproject.toml, [tool.importlinter]): later pipeline stages import earlier ones,
never the reverse, and no import cycles between stages. Runs the real import-linter on the real package."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def test_layers_are_kept() -> None:
    exe = shutil.which("lint-imports") or str(Path(sys.executable).with_name("lint-imports"))
    if not Path(exe).exists():
        pytest.skip("import-linter is not installed (pip install -e '.[test]')")
    out = subprocess.run([exe, "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "0 broken" in out.stdout


def _layout_names() -> set[str]:
    """The names of docs/development.md's layout under `autotune/`: `vocab.py`, `sweep/`, ... (the first column of
    each entry indented two spaces; several names of one entry are separated by a comma and a space)."""
    text = (ROOT / "docs" / "development.md").read_text()
    block = text.split("## Layout", 1)[1].split("```", 2)[1]
    names: set[str] = set()
    inside = False
    for line in block.splitlines():
        if line.startswith("autotune/"):
            inside = True
        elif line and not line.startswith(" "):
            inside = False  # the next top-level folder of the repository (docs/, spaces/, ...)
        elif inside and line.startswith("  ") and not line.startswith("   "):
            first = re.match(r"\w+(?:\.py|/)(?:, \w+(?:\.py|/))*", line.strip())
            assert first, f"docs/development.md's layout: an entry that names no module: {line!r}"
            names.update(first.group().split(", "))
    return names


def _package_names() -> set[str]:
    """autotune's top-level subpackages (`sweep/`) and modules (`vocab.py`); the package's own __init__/__main__
    are its front door, not a room."""
    pkg = ROOT / "autotune"
    dirs = {f"{p.name}/" for p in pkg.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    files = {p.name for p in pkg.glob("*.py") if p.name not in ("__init__.py", "__main__.py")}
    return dirs | files


def test_the_layout_page_names_every_top_level_module_and_nothing_else() -> None:
    named, present = _layout_names(), _package_names()
    assert len(named) > 10, named  # the parser found the layout
    assert not present - named, f"docs/development.md's layout lacks {sorted(present - named)}"
    assert not named - present, f"docs/development.md's layout names {sorted(named - present)}, which autotune/ lacks"


def test_every_top_level_module_is_in_the_pipeline_contract() -> None:
    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    layers = next(c["layers"] for c in contracts if c["name"].startswith("the pipeline"))
    in_layers = {name.strip() for layer in layers for name in layer.split("|")}
    modules = {f"autotune.{n.removesuffix('/').removesuffix('.py')}" for n in _package_names()}
    assert not modules - in_layers, f"not in the import-linter layers: {sorted(modules - in_layers)}"
    assert not in_layers - modules, f"the import-linter layers name {sorted(in_layers - modules)}, which do not exist"
