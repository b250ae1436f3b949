"""autotune: autotuning framework and search-space explorer for GPU kernels.

The library's front door (autotune/workflows), loaded on first use so that `import autotune` and `autotune --help`
stay light:

    import autotune
    cfg = autotune.load_config("configs/default.yaml")
    summary = autotune.launch_sweep(cfg, autotune.Launch(replay="results/default/default.sqlite.xz")).summary
    loaded = autotune.load_results(cfg.database)
    table = autotune.build_table(loaded, autotune.TableOptions(tol=0.05)).table
"""

from typing import Any

__version__ = "0.1.0"  # the one version: pyproject.toml reads it, sweeps record it, every dispatch.json names it

_PUBLIC = {  # name -> the module that defines it
    "load_results": "autotune.workflows.results",
    "Loaded": "autotune.workflows.results",
    "TableOptions": "autotune.workflows.tables",
    "build_table": "autotune.workflows.tables",
    "report_folder": "autotune.workflows.tables",
    "kernels_against_tol": "autotune.workflows.tables",
    "load_config": "autotune.sweep.config",
    "Launch": "autotune.workflows.sweeps",
    "launch_sweep": "autotune.workflows.sweeps",
    "ValidationOptions": "autotune.workflows.validation",
    "validate_table": "autotune.workflows.validation",
    "ActiveOptions": "autotune.workflows.active",
    "active_tuning": "autotune.workflows.active",
    "bake": "autotune.workflows.bake",
}

__all__ = ["__version__", *_PUBLIC]


def __getattr__(name: str) -> Any:
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module 'autotune' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)


def __dir__() -> list[str]:
    return sorted([*globals(), *_PUBLIC])
