"""Every script under scripts/ that README.md or a page of docs/ names runs, on a CPU, in CI.

Each runs in a scratch checkout (tests/test_docs_examples.py's: the checkout's entries linked in) whose `.venv` is
this interpreter: its `--help`, a dry run or its CPU path; one that only measures on a GPU must stop there with one
`error:` line and no traceback. CuPy sees no GPU here (CUDA_VISIBLE_DEVICES is empty), and ncu is off the PATH. A
script a page names without an entry in SCRIPTS fails (a Python script: its `--help` at least). The README's first
sweep also runs as written in a copy of the tracked files, its `bash scripts/setup.sh` included.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from test_docs_examples import PAGES, ROOT, _env, _scratch, first_sweep, run_block


SCRIPT_NAME = re.compile(r"\bscripts/([a-z0-9_]+\.(?:sh|py)|pyprofile)\b")
PY = ".venv/bin/python"


def documented_scripts() -> list[str]:
    return sorted({name for page in PAGES for name in SCRIPT_NAME.findall(page.read_text())})


@dataclass(frozen=True)
class ScriptRun:
    """One run of a script on a CPU: a bash command in a scratch checkout (`{out}`: an empty scratch folder) and a
    text its output holds. `needs_gpu`: the script only measures, so without a
    GPU it must stop with one `error:` line and no traceback."""

    command: str
    expect: str
    needs_gpu: bool = False


def _help(name: str, expect: str = "usage:") -> ScriptRun:
    runner = f"{PY} " if name.endswith(".py") else "bash "
    return ScriptRun(f"{runner}scripts/{name} --help", expect)


# every documented shell script, and the Python scripts that do more here than --help (the rest: --help)
SCRIPTS: dict[str, list[ScriptRun]] = {
    "setup.sh": [ScriptRun("bash scripts/setup.sh && .venv/bin/autotune --help", "Usage:")],
    "run.sh": [ScriptRun("bash scripts/run.sh", "no GPU visible to CuPy"), _help("run.sh", "default sweep")],
    "test.sh": [ScriptRun("bash scripts/test.sh -q -p no:xdist tests/test_expr.py", " passed")],
    "python.sh": [ScriptRun('source scripts/python.sh && echo "$py" && "$py" -m autotune --help', ".venv/bin/python")],
    "walkthrough.sh": [
        ScriptRun("bash scripts/walkthrough.sh {out}/walk 5", "walk-through done"),
        _help("walkthrough.sh", "--replay"),
    ],
    "build_wheelhouse.sh": [_help("build_wheelhouse.sh", "wheelhouse")],  # downloads: network
    "gpu_tier.sh": [
        ScriptRun("bash scripts/gpu_tier.sh {out}/tier", "CuPy sees no GPU", needs_gpu=True),
        _help("gpu_tier.sh", "GPU test tier"),
    ],
    "ci_chromium.sh": [_help("ci_chromium.sh", "Chromium")],  # installs with apt-get: root and network
    "bench_search_jobs.sh": [ScriptRun("bash scripts/bench_search_jobs.sh {out} 1 0 5", "packed")],  # no job starts
    "compile_bound_search_h100.sh": [
        ScriptRun("bash scripts/compile_bound_search_h100.sh", "CB_SIMULATE=1", needs_gpu=True),
        _help("compile_bound_search_h100.sh", "CB_SIMULATE"),
    ],
    "profile_ncu.sh": [ScriptRun("bash scripts/profile_ncu.sh configs/profile/flat32.yaml", "ncu", needs_gpu=True)],
    **{
        name: [ScriptRun(f"R={{out}}/r bash scripts/{name}", "REPLAY=1", needs_gpu=True), _help(name, "REPLAY=1")]
        for name in (
            "tables2_h100.sh",
            "tables4_h100.sh",
            "tables4_small_h100.sh",
            "tables5_softmax_h100.sh",
            "tables5_revalidate_h100.sh",
            "tables7_h100.sh",
        )
    },
    "bench_lookup.py": [
        _help("bench_lookup.py"),
        ScriptRun(
            f"{PY} scripts/bench_lookup.py --queries 500 results/tsm2_h100/dispatch.json --out {{out}}/lookup.json",
            "agree on every query: True",
        ),
    ],
    "tables6_eval.py": [_help("tables6_eval.py", "rescored_figures")],
    "bench_kt_import.py": [ScriptRun(f"TMPDIR={{out}} {PY} scripts/bench_kt_import.py", "records imported")],
    "pyprofile": [
        ScriptRun(
            f'AUTOTUNE_DEVPROF={{out}}/prof PYTHONPATH="scripts/pyprofile:$PYTHONPATH" {PY} -c "import autotune" && '
            f"ls {{out}}/prof && {PY} scripts/pyprofile/summary.py {{out}}/prof",
            ".prof",
        )
    ],
    **{
        name: [_help(name), ScriptRun(f"{PY} scripts/{name} {args}", "error:", needs_gpu=True)]
        for name, args in (
            ("check_tsm2.py", "--out {out}/tsm2"),
            ("check_hgemm.py", "--out {out}/hgemm"),
            ("check_wgmma.py", "--out {out}/wgmma"),
            ("check_tiny.py", ""),
            ("bench_sweep.py", "--instances 2 --out {out}/sweep.json"),
            ("bench_compile_scaling.py", "--out {out}/scaling"),
            ("check_dmma.py", "--no-timing"),
        )
    },
}


def _script_checkout(tmp_path: Path) -> Path:
    """The scratch checkout with a `.venv` that is this interpreter (set up: its install stamp says so; it installs
    nothing: pip through it fails)."""
    work = _scratch(tmp_path)
    bindir = work / ".venv" / "bin"
    bindir.mkdir(parents=True)
    (bindir / "python").write_text(
        '#!/bin/sh\nif [ "$1" = -m ] && [ "$2" = pip ]; then echo "this test\'s .venv installs nothing" >&2; exit 1; fi\n'
        f'exec "{sys.executable}" "$@"\n'
    )
    (bindir / "autotune").write_text(f'#!/bin/sh\nexec "{sys.executable}" -m autotune "$@"\n')
    for exe in bindir.iterdir():
        exe.chmod(0o755)
    digest = subprocess.run(["sha256sum", str(ROOT / "pyproject.toml")], capture_output=True, text=True, check=True)
    (work / ".venv" / ".autotune-install-stamp").write_text(digest.stdout.split()[0] + " \n")
    return work


def _cpu_env(tmp_path: Path) -> dict[str, str]:
    """No GPU (CUDA_VISIBLE_DEVICES empty; no ncu on the PATH), and no pytest state of this run."""
    env = {k: v for k, v in _env(tmp_path).items() if not k.startswith("PYTEST_")}
    env["PATH"] = os.pathsep.join(d for d in env["PATH"].split(os.pathsep) if not (Path(d) / "ncu").exists())
    env["CUDA_VISIBLE_DEVICES"] = ""
    return env


def test_every_documented_script_has_a_run() -> None:
    """A page cannot name a script that CI does not run: each has an entry (a Python script: --help at least)."""
    named = documented_scripts()
    assert {"setup.sh", "run.sh", "test.sh", "walkthrough.sh"} <= set(named)
    for name in named:
        assert (ROOT / "scripts" / name).exists(), f"a page names scripts/{name}, which does not exist"
        assert name in SCRIPTS or name.endswith(".py"), f"scripts/{name} is named in the docs: add it to SCRIPTS"


SLOW_SCRIPTS = {"bench_kt_import.py", "walkthrough.sh"}  # their first run: 10-15 s each on an idle core
SCRIPT_RUNS = [
    pytest.param(
        name,
        run,
        id=f"{name}[{i}]",
        marks=[
            *([pytest.mark.slow] if name in SLOW_SCRIPTS and i == 0 else []),
        ],
    )
    for name in documented_scripts()
    for i, run in enumerate(SCRIPTS.get(name) or [_help(name)])
]


@pytest.mark.parametrize("name, run", SCRIPT_RUNS)
def test_documented_script_runs_on_a_cpu(name: str, run: ScriptRun, tmp_path: Path) -> None:
    work = _script_checkout(tmp_path)
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    command = run.command.replace("{out}", str(out_dir))
    done = subprocess.run(
        ["bash", "-c", command], cwd=work, env=_cpu_env(tmp_path), capture_output=True, text=True, timeout=300
    )
    said = done.stdout + done.stderr
    shown = f"{command}\nexit {done.returncode}\n--- stdout\n{done.stdout[-3000:]}\n--- stderr\n{done.stderr[-3000:]}"
    assert run.expect in said, shown
    if run.needs_gpu:
        lines = [line for line in done.stderr.split("\n") if line.strip()]
        assert done.returncode != 0 and "Traceback" not in said, shown
        assert len(lines) == 1 and lines[0].startswith("error:"), shown
    else:
        assert done.returncode == 0 and "Traceback" not in said, shown


# the network errors of pip that mean "no package index here" (setup.sh then cannot install, whatever it does)
NO_INDEX = (
    "Failed to establish a new connection",
    "Temporary failure in name resolution",
    "Network is unreachable",
    "No matching distribution found",
    "Could not find a version that satisfies",
)


@pytest.mark.slow
def test_readme_first_sweep_in_a_fresh_copy(tmp_path: Path) -> None:
    """The README's first sweep, every line as written, in a copy of the checkout's tracked files (no .venv): its
    `bash scripts/setup.sh` builds .venv with the package alone (nothing of the test or docs extras: those come with
    scripts/test.sh), and the commands after it run with that .venv. setup.sh builds on this interpreter (PYTHON), so
    pip installs only the package itself; it needs a package index for its build tools: without one, the commands
    after it run as tests/test_docs_examples.py runs a page's (this interpreter as .venv), and the test skips.
    test_docs_examples.py leaves this block to this test: it is the README example's one run."""
    copy = tmp_path / "clone"
    tracked = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    for name in filter(None, tracked.decode().split("\0")):
        source = ROOT / name
        if source.is_file():
            (copy / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, copy / name)
    block = first_sweep()
    script = block.text
    assert script.startswith("bash scripts/setup.sh"), script
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_") and k != "PYTHONPATH"}
    env.update(PYTHON=sys.executable, CUDA_VISIBLE_DEVICES="")
    env.pop("AUTOTUNE_ALLOW_PATHS", None)
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script.replace("/tmp/", f"{scratch}/")],
        cwd=copy,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    said = done.stdout[-3000:] + "\n--- stderr\n" + done.stderr[-3000:]
    if done.returncode != 0 and not (copy / ".venv/bin/autotune").exists() and any(e in said for e in NO_INDEX):
        # the README's example still runs (test_docs_examples.py leaves it to this test), its setup.sh aside
        printed = run_block(block, copy, scratch, _env(tmp_path))
        assert (scratch / "first" / "dispatch.json").exists() and printed and "skipped" in printed, printed
        pytest.skip(f"setup.sh found no package index for pip (the commands after it ran): {said[-500:]}")
    assert done.returncode == 0, said
    assert (scratch / "first" / "dispatch.json").exists() and "skipped" in done.stdout, said
    site = subprocess.run(
        [str(copy / ".venv/bin/python"), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    installed = {p.name.split("-")[0].lower() for p in Path(site).glob("*.dist-info")}
    assert "autotune" in installed and not installed & {"pytest", "mkdocs", "hypothesis", "ruff", "mypy"}, installed


def test_setup_refuses_an_old_python_in_one_line(tmp_path: Path) -> None:
    """setup.sh on a Python older than 3.11 says so and how to choose another, before it creates anything."""
    shutil.copytree(ROOT / "scripts", tmp_path / "scripts")
    shutil.copy2(ROOT / "pyproject.toml", tmp_path)
    old = tmp_path / "python3.10"
    old.write_text('#!/bin/sh\n[ "$1" = --version ] && { echo "Python 3.10.12"; exit 0; }\nexit 1\n')
    old.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    done = subprocess.run(
        ["bash", "scripts/setup.sh"], cwd=tmp_path, env={**env, "PYTHON": str(old)}, capture_output=True, text=True
    )
    assert done.returncode == 1 and not (tmp_path / ".venv").exists(), done
    assert done.stderr.strip().split("\n") == [
        f"error: autotune needs Python 3.11 or newer; {old} is Python 3.10.12: run with PYTHON=python3.11 (or newer)"
    ]
