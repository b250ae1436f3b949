"""The GPU tests reuse the cases and checks of the device harnesses in scripts/check_*.py."""
from __future__ import annotations

import importlib.util
import sys
from types import ModuleType

from autotune.paths import ROOT


def load_script(name: str) -> ModuleType:
    """Import scripts/NAME.py as module NAME (once; its import needs no GPU)."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
