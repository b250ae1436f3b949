"""The dependencies pyproject.toml declares are exactly what the package imports: every third-party module the
package imports is a declared dependency, in an optional extra, or an optional import the code guards (listed
below with where it is guarded), and every declared dependency is imported."""

from __future__ import annotations

import ast
import re
import sys
import tomllib

from autotune.paths import ROOT

PACKAGE = ROOT / "autotune"
# import name -> distribution name, where they differ
DISTRIBUTION = {"yaml": "pyyaml", "cupy": "cupy-cuda12x", "cupy_backends": "cupy-cuda12x"}
# imports the code guards with try/except ImportError and goes on without (module: why it is not declared)
GUARDED = {
    "pynvml": "sweep/timing.py reads the GPU clocks when NVML's bindings are installed (nvidia-ml-py)",
    "kernel_tuner": "kernel_tuner.py hands run_kernel calls it does not run itself to Kernel Tuner when installed",
    "cloudpickle": "interop/tune_kernel.py refuses verify= with what to install when it is missing",
}


def _name(requirement: str) -> str:
    return re.split(r"[\s<>=!~;\[]", requirement.strip(), maxsplit=1)[0].lower().replace("_", "-")


def _declared() -> tuple[set[str], set[str]]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    required = {_name(r) for r in project["dependencies"]}
    optional = {_name(r) for extra in project["optional-dependencies"].values() for r in extra}
    return required, optional


def _imports() -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            for name in names:
                top = name.split(".")[0]
                if top not in sys.stdlib_module_names and top != "autotune":
                    found.setdefault(top, set()).add(str(path.relative_to(ROOT)))
    return found


def test_every_import_is_declared() -> None:
    required, optional = _declared()
    missing = {}
    for module, where in _imports().items():
        dist = DISTRIBUTION.get(module, module).lower().replace("_", "-")
        if dist not in required | optional and module not in GUARDED:
            missing[module] = sorted(where)
    assert not missing, f"imported but not declared in pyproject.toml: {missing}"


def test_every_declared_dependency_is_imported() -> None:
    required, _ = _declared()
    imported = {DISTRIBUTION.get(m, m).lower().replace("_", "-") for m in _imports()}
    assert required <= imported, f"declared but never imported: {sorted(required - imported)}"


def test_guarded_imports_are_guarded() -> None:
    """An undeclared optional import sits in a try whose handler catches ImportError (or Exception)."""
    for module, why in GUARDED.items():
        path = PACKAGE / why.split(" ")[0]
        tree = ast.parse(path.read_text())
        guarded = False
        for node in ast.walk(tree):
            if isinstance(node, ast.Try) and any(
                isinstance(n, (ast.Import, ast.ImportFrom)) and module in ast.unparse(n)
                for stmt in node.body
                for n in ast.walk(stmt)
            ):
                guarded = any(
                    re.search(r"\b(ImportError|ModuleNotFoundError|Exception)\b", ast.unparse(h.type))
                    for h in node.handlers
                    if h.type is not None
                )
                if guarded:
                    break
        assert guarded, f"{module} in {path.relative_to(ROOT)} is not imported under try/except ImportError"
