"""Helpers the tests share: the device harnesses of scripts/*.py (load_script), the `autotune` command run as a user
runs it (run_cli), and where Kernel Tuner lives for interop and benchmark tests (KT_PYTHON)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

from autotune.paths import ROOT


def load_script(name: str) -> ModuleType:
    """Import scripts/NAME.py as module NAME (once; its import needs no GPU)."""
    if name in sys.modules:
        return sys.modules[name]
    if str(ROOT / "scripts") not in sys.path:  # the scripts import one another (check_tiny imports check_simt)
        sys.path.insert(0, str(ROOT / "scripts"))
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def cupy_with_a_device() -> ModuleType:
    """CuPy, where it sees a CUDA device; the calling test or fixture is skipped otherwise."""
    import pytest

    cp = pytest.importorskip("cupy")
    try:
        if cp.cuda.runtime.getDeviceCount() < 1:
            pytest.skip("no CUDA device")
    except cp.cuda.runtime.CUDARuntimeError:
        pytest.skip("no CUDA device")
    return cp


def kt_python() -> Path:
    """A Python that has Kernel Tuner installed (its tests skip where there is none): $AUTOTUNE_KT_PYTHON; else this
    interpreter where it can import kernel_tuner; else `.venv-kt/bin/python` in this checkout (git ignores it:
    `python3 -m venv .venv-kt && .venv-kt/bin/pip install kernel_tuner==1.5.0 -e .`)."""
    if os.environ.get("AUTOTUNE_KT_PYTHON"):
        return Path(os.environ["AUTOTUNE_KT_PYTHON"])
    if importlib.util.find_spec("kernel_tuner") is not None:
        return Path(sys.executable)
    return ROOT / ".venv-kt" / "bin" / "python"


KT_PYTHON = kt_python()


def checkout_env(**env: str) -> dict[str, str]:
    """This process's environment for a child Python: this checkout first on PYTHONPATH (the path already set kept
    after it: a lent GPU machine's wheels live there), `env` added."""
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    return {**os.environ, "PYTHONPATH": path, **env}


def run_cli(*args: str, cwd: Path | str = ROOT, timeout: float = 300, **env: str) -> subprocess.CompletedProcess:
    """`python -m autotune ARGS` in a subprocess from `cwd`, with this checkout first on the path and `env` added."""
    return subprocess.run(
        [sys.executable, "-m", "autotune", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=checkout_env(**env),
        timeout=timeout,
    )


def invoke_cli(*args: str, cwd: Path | str = ROOT, **env: str) -> subprocess.CompletedProcess:
    """`autotune ARGS` run in this process through typer's CliRunner, from `cwd`, with `env` added: what `run_cli`
    returns (exit code, standard output, standard error), without the ~1 s start of a Python process. The command's
    changes to the environment (`--allow-path`) and the working folder are undone afterwards. For what only a real
    process shows (a signal's exit code, a traceback printed outside the command, import time, a crash of the
    interpreter), use `run_cli`."""
    from unittest import mock

    from typer.testing import CliRunner

    from autotune.cli.main import app

    before = os.getcwd()
    with mock.patch.dict(os.environ, env):
        try:
            os.chdir(cwd)
            r = CliRunner().invoke(app, list(args))
        finally:
            os.chdir(before)
    stderr = r.stderr
    if r.exception is not None and not isinstance(r.exception, SystemExit):  # what a process would print
        import traceback

        stderr += "".join(traceback.format_exception(r.exception))
    return subprocess.CompletedProcess(["autotune", *args], r.exit_code, r.stdout, stderr)
