"""Every code example of README.md and docs/*.md runs, as written, in the order of its page.

One test per page; its blocks share a scratch folder that stands for the checkout (the checkout's folders linked
into it, so examples read the committed files and write only there), and `/tmp/` in an example is that page's own
scratch folder. What each language means:
- `bash`: run with `set -e`, `.venv/bin/autotune`/`.venv/bin/python` being this interpreter; the lines
  `bash scripts/setup.sh`, `bash scripts/test.sh ...` and `bash scripts/run.sh` are the set-up commands (this test
  already runs inside what they set up, and run.sh is the GPU sweep), so they are left out (tests/test_docs_scripts.py
  runs them, and the README's first sweep with its setup.sh as written);
- `python`: run as a script; `yaml`: parsed, and loaded as a sweep config when it has `spaces:` and `points:`;
  `toml`: parsed; `sql`: run read-only on the committed `results/default/default.sqlite.xz` (a GEMM database);
  `cpp`/`c++`: compiled and run with g++ when it has a `main` (else syntax-checked);
- a fence without a language (a folder tree) is not code.
A comment on the line before a fence changes that: `<!-- docs-test: gpu -->` runs the block only where CuPy sees
a GPU and AUTOTUNE_DOCS_GPU=1 is set (some are sweeps of many minutes; the tests in tests/gpu/ cover the same
paths), `<!-- docs-test: nvcc -->` compiles it with nvcc where
nvcc is, `<!-- docs-test: compile (why) -->` only parses it (an example that names the reader's own package),
`<!-- docs-test: skip (why) -->` never runs it (installs from the network), and `<!-- docs-test: output -->` before a
`text` block makes it the standard output the page's previous bash or python block must print (trailing spaces aside).

The scripts the pages name run in tests/test_docs_scripts.py. So does the README's first sweep (`first_sweep()`):
every line as written, its `bash scripts/setup.sh` included, in a copy of the tracked files; this test leaves that
block to it (the same commands twice cost ~17 CPU-seconds of CI).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
PAGES = sorted([ROOT / "README.md", *(ROOT / "docs").glob("*.md")])
FENCE = re.compile(r"^(?P<indent> *)```(?P<lang>[\w+-]*)\s*$")
MARKER = re.compile(r"<!--\s*docs-test:\s*(?P<mode>gpu|nvcc|compile|skip|output)\b[^>]*-->")
SETUP_LINES = re.compile(r"^\s*bash scripts/(test|run|setup)\.sh\b")


@dataclass
class Block:
    page: Path
    line: int
    lang: str
    text: str
    mode: str  # run, gpu, nvcc, compile, skip, output


def blocks(page: Path) -> list[Block]:
    lines = page.read_text().split("\n")
    found, i = [], 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, start = len(m["indent"]), i
        body = []
        i += 1
        while i < len(lines) and not re.match(rf"^ {{{indent}}}```\s*$", lines[i]):
            body.append(lines[i][indent:])
            i += 1
        before = next((lines[j] for j in range(start - 1, -1, -1) if lines[j].strip()), "")
        marker = MARKER.search(before)
        found.append(
            Block(page, start + 1, m["lang"].lower(), "\n".join(body) + "\n", marker["mode"] if marker else "run")
        )
        i += 1
    return found


def first_sweep() -> Block:
    """The README's "first sweep" block, as written (its setup command first): tests/test_docs_scripts.py runs it in a
    fresh copy of the checkout (test_readme_first_sweep_in_a_fresh_copy), so test_examples_run_as_written leaves it
    out."""
    section = (ROOT / "README.md").read_text().split("## A first sweep", 1)[1]
    return next(b for b in blocks(ROOT / "README.md") if b.lang == "bash" and b.text in section)


def _gpu() -> bool:
    if os.environ.get("AUTOTUNE_DOCS_GPU") != "1":
        return False
    try:
        import cupy

        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:
        return False


def _scratch(tmp_path: Path) -> Path:
    """A folder that looks like the checkout: its top-level entries linked in, `configs/` and `results/` real
    folders whose entries are links (so an example may write configs/x.yaml or results/x.sqlite)."""
    work = tmp_path / "checkout"
    work.mkdir()
    for entry in ROOT.iterdir():
        if entry.name.startswith(".") or entry.name in ("site",):
            continue
        if entry.name in ("configs", "results"):
            (work / entry.name).mkdir()
            for child in entry.iterdir():
                (work / entry.name / child.name).symlink_to(child)
        else:
            (work / entry.name).symlink_to(entry)
    return work


def _env(tmp_path: Path) -> dict[str, str]:
    bindir = tmp_path / "bin"
    bindir.mkdir(exist_ok=True)
    (bindir / "autotune").write_text(f'#!/bin/sh\nexec "{sys.executable}" -m autotune "$@"\n')
    (bindir / "autotune").chmod(0o755)
    env = dict(
        os.environ,
        PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
        PATH=f"{bindir}{os.pathsep}{os.environ['PATH']}",
    )
    env.pop("AUTOTUNE_ALLOW_PATHS", None)
    return env


def _run(cmd: list[str], cwd: Path, env: dict[str, str], block: Block) -> str:
    out = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, (
        f"{block.page.relative_to(ROOT)}:{block.line} ({block.lang}) failed:\n"
        f"{block.text}\n--- stdout\n{out.stdout[-3000:]}\n--- stderr\n{out.stderr[-3000:]}"
    )
    return out.stdout


def _lines(text: str) -> list[str]:
    return [line.rstrip() for line in text.strip("\n").split("\n")]


def run_block(block: Block, work: Path, scratch: Path, env: dict[str, str]) -> str | None:
    """Run one block; its standard output where it has one (bash, python)."""
    text = block.text.replace("/tmp/", f"{scratch}/")
    lang = block.lang
    if block.mode == "compile":
        if lang == "python":
            compile(text, str(block.page), "exec")
        elif lang == "yaml":
            yaml.safe_load(text)
        return
    if lang in ("bash", "sh", "console"):
        kept = [ln for ln in text.split("\n") if not SETUP_LINES.match(ln)]
        script = "\n".join(kept).replace(".venv/bin/autotune", "autotune").replace(".venv/bin/python", sys.executable)
        script = re.sub(r"^(\s*)python3? ", rf"\1{sys.executable} ", script, flags=re.M)
        return _run(["bash", "-euo", "pipefail", "-c", script], work, env, block)
    elif lang == "python":
        (scratch / "example.py").write_text(text)
        return _run([sys.executable, str(scratch / "example.py")], work, env, block)
    elif lang == "yaml":
        data = yaml.safe_load(text)
        if isinstance(data, dict) and "spaces" in data and "points" in data:
            from autotune.sweep.config import load_config

            path = work / "configs" / f"docs_example_{block.line}.yaml"
            path.write_text(text)
            load_config(str(path))
    elif lang == "toml":
        tomllib.loads(text)
    elif lang == "sql":
        from autotune.store.query import run_query

        frame = run_query(str(ROOT / "results/default/default.sqlite.xz"), text.strip().rstrip(";"))
        assert frame is not None
    elif lang in ("cpp", "c++"):
        source = scratch / f"example_{block.line}.cpp"
        source.write_text(text)
        if block.mode == "nvcc":
            _run(
                ["nvcc", "-std=c++17", "-x", "cu", "-c", str(source), "-o", str(source.with_suffix(".o"))],
                work,
                env,
                block,
            )
        elif "main(" in text:
            exe = source.with_suffix("")
            _run(["g++", "-std=c++17", "-I", str(scratch / "tutorial"), str(source), "-o", str(exe)], work, env, block)
            _run([str(exe)], work, env, block)
        else:
            _run(["g++", "-std=c++17", "-fsyntax-only", str(source)], work, env, block)
    elif lang:
        pytest.fail(f"{block.page.relative_to(ROOT)}:{block.line}: no rule for ```{lang} blocks in this test")
    return None


def test_every_example_has_a_rule() -> None:
    """A page cannot hide an example: every fenced block is of a known language or marked."""
    langs = {b.lang for page in PAGES for b in blocks(page)}
    assert langs <= {"", "bash", "sh", "console", "python", "yaml", "toml", "sql", "cpp", "c++", "text"}, langs
    assert sum(1 for page in PAGES for b in blocks(page) if b.mode != "skip" and b.lang) > 30


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_examples_run_as_written(page: Path, tmp_path: Path) -> None:
    todo = [b for b in blocks(page) if b.lang and (b.lang != "text" or b.mode == "output")]
    if not todo:
        pytest.skip("no code examples")
    work, env = _scratch(tmp_path), _env(tmp_path)
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    if any(b.lang in ("cpp", "c++") and b.mode == "run" for b in todo) and shutil.which("g++") is None:
        pytest.skip("g++ is not installed")
    left_out = []
    printed: str | None = None  # the standard output of the last block run
    elsewhere = first_sweep()  # run as written, setup.sh included, by tests/test_docs_scripts.py
    for block in todo:
        if (block.page, block.line) == (elsewhere.page, elsewhere.line):
            left_out.append(f"{block.line} (tests/test_docs_scripts.py::test_readme_first_sweep_in_a_fresh_copy)")
            printed = None
            continue
        if (
            block.mode == "skip"
            or (block.mode == "gpu" and not _gpu())
            or (block.mode == "nvcc" and shutil.which("nvcc") is None)
            or (block.mode == "output" and printed is None)
        ):
            left_out.append(f"{block.line} ({block.mode})")
            printed = None
            continue
        if block.mode == "output":
            assert printed is not None and _lines(printed) == _lines(block.text), (
                f"{block.page.relative_to(ROOT)}:{block.line}: the block before printed\n{printed}\n"
                f"not what the page shows:\n{block.text}"
            )
            printed = None
            continue
        printed = run_block(block, work, scratch, env)
    if left_out and len(left_out) == len(todo):
        pytest.skip(f"every example here needs what this machine lacks: {', '.join(left_out)}")
