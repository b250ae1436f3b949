"""The one-import switch stays light: `import autotune.kernel_tuner` (a Kernel Tuner script's first line after the
switch, and every spawned process that re-imports such a script) loads neither the results database's SQLAlchemy
nor pandas, Optuna, YAML or Kernel Tuner; the call imports what it needs. Kernel Tuner's failure markers never import
Kernel Tuner (its import took 4.6 s of a matrix multiply's call on an H100 host). Checked in fresh interpreters."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

from autotune.interop.kt_space import KTProblem, write_space_folder

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("sqlalchemy", "pandas", "optuna", "yaml", "kernel_tuner", "cupy", "autotune.store.store")


def _python(code: str, *paths: Path) -> dict:
    env = dict(os.environ, AUTOTUNE_PREWARM="0")
    env["PYTHONPATH"] = os.pathsep.join([*map(str, paths), str(ROOT), env.get("PYTHONPATH", "")])
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_importing_the_switch_loads_no_database_tables_or_kernel_tuner() -> None:
    got = _python(
        "import json, sys\nimport autotune.kernel_tuner\nfrom autotune.kernel_tuner import run_kernel, tune_kernel\n"
        f"print(json.dumps(sorted(m for m in {HEAVY!r} if m in sys.modules)))"
    )
    assert got == [], f"`import autotune.kernel_tuner` imported {got}"


def test_a_sweeps_store_and_plan_do_not_import_pandas() -> None:
    """What a tune_kernel call imports for its sweep (the runner, the store, the planner) leaves pandas out;
    the frames that need it import it themselves."""
    got = _python(
        "import json, sys\nimport autotune.sweep.runner, autotune.store.store, autotune.space.generator\n"
        "import autotune.interop.kt_export, autotune.interop.kt_store, autotune.sweep.backends.local\n"
        "print(json.dumps(['pandas' in sys.modules, 'sqlalchemy' in sys.modules]))"
    )
    assert got == [False, True]


FAKE_UTIL = """
class ErrorConfig(str):
    def __str__(self):
        return self.__class__.__name__
class CompilationFailedConfig(ErrorConfig):
    pass
class RuntimeFailedConfig(ErrorConfig):
    pass
"""


def test_failure_markers_are_kernel_tuners_only_where_the_script_imported_it(tmp_path: Path) -> None:
    """A stand-in `kernel_tuner` package (its import leaves a file behind): the markers are strings and the package is
    never imported by autotune; after the script's `import kernel_tuner.util`, they are its classes."""
    pkg = tmp_path / "kernel_tuner"
    pkg.mkdir()
    (pkg / "__init__.py").write_text(f"open({str(tmp_path / 'imported')!r}, 'w').close()\n")
    (pkg / "util.py").write_text(FAKE_UTIL)
    got = _python(
        "import json, sys\nfrom autotune.interop.kt_export import kt_marker\n"
        "before = kt_marker('CompilationFailedConfig')\nimported = 'kernel_tuner' in sys.modules\n"
        "import kernel_tuner.util\nafter = kt_marker('CompilationFailedConfig')\n"
        "print(json.dumps([type(before).__name__, str(before), imported, type(after).__name__, str(after), "
        "isinstance(after, kernel_tuner.util.ErrorConfig), type(kt_marker('NoSuchMarker')).__name__]))",
        tmp_path,
    )
    assert got == [
        "str",
        "CompilationFailedConfig",
        False,
        "CompilationFailedConfig",
        "CompilationFailedConfig",
        True,
        "str",
    ]


def test_the_generated_checks_warm_is_a_no_op_without_device_arrays(tmp_path: Path) -> None:
    """`warm(outputs)` (called by the GPU worker's prepare) compares on the device only; with host arrays (or a
    verify= function) it does nothing and returns None, and `check` still judges as before."""
    import importlib.util

    from autotune.problems.declared_data import HostArrays

    a = np.arange(64, dtype=np.float32)
    args = [np.zeros_like(a), a, a, np.int32(64)]
    write_space_folder(
        KTProblem(
            kernel_name="vector_add",
            source_text="__global__ void vector_add(float *c, float *a, float *b, int n) {}",
            source_file=None,
            problem_size=(64,),
            arguments=args,
            tune_params={"block_size_x": [32]},
            grid_div=(None, None, None),
            block_size_names=("block_size_x", "block_size_y", "block_size_z"),
            answer=[a + a, None, None, None],
        ),
        tmp_path,
    )
    spec = importlib.util.spec_from_file_location("kt_check_warm", tmp_path / "kt_check.py")
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    outputs = HostArrays({"c": np.full(64, np.nan, np.float32)})
    assert module.warm(outputs) is None and not any(k[0] == "dev" for k in module._CACHE if isinstance(k, tuple))
    assert module.check(HostArrays({"c": a + a}), None, {}, {}) is True
    assert "64 of 64 elements differ" in module.check(outputs, None, {}, {})


def test_limits_the_gpu_worker_read_are_this_processs_without_cupy() -> None:
    """`devices.know_gpu` (GpuBackend.device_limits: the GPU worker's reading) makes `get_device()` answer them:
    planning and every instance's geometry then import no CuPy in the script's process."""
    got = _python(
        "import json, sys, dataclasses\nfrom autotune.devices import PROFILES, get_device, know_gpu\n"
        "gpu = dataclasses.replace(next(iter(PROFILES.values())), name='worker-read GPU', source='gpu')\n"
        "know_gpu(gpu)\nprint(json.dumps([get_device(None).name, get_device(None) is gpu, 'cupy' in sys.modules]))"
    )
    assert got == ["worker-read GPU", True, False]
