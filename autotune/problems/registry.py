"""Finding a problem kind by what a space file says: a built-in name (`gemm`), `module:Class` or
`file.py:Class` (relative to the space file), an installed package's entry point in the group
`autotune.problems`, or an inline declaration (`autotune.problems.declared`)."""
from __future__ import annotations

from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

from autotune.errors import SpaceError
from autotune.problems.base import ProblemKind
from autotune.problems.declared import load_declared
from autotune.problems.gemm import GEMM

ENTRY_POINT_GROUP = "autotune.problems"
BUILT_IN: dict[str, ProblemKind] = {GEMM.name: GEMM}


def installed() -> dict[str, Any]:
    """Kinds that installed packages register (entry points), by name, not loaded yet."""
    return {ep.name: ep for ep in entry_points(group=ENTRY_POINT_GROUP)}


def resolve(spec: Any, path: Path, line: int | None) -> ProblemKind:
    """The kind a space file at `path` names or declares (SpaceError with file and line otherwise)."""
    if isinstance(spec, dict):
        return load_declared(spec, path, line)
    if not isinstance(spec, str) or not spec:
        raise SpaceError("`problem:` must be a kind name, module:Class, file.py:Class or a mapping", file=path,
                         line=line, hint="e.g. problem: gemm")
    if spec in BUILT_IN:
        return BUILT_IN[spec]
    plugins = installed()
    if spec in plugins:
        return _instance(plugins[spec].load(), spec, path, line)
    if ":" not in spec:
        known = sorted(BUILT_IN) + sorted(plugins)
        raise SpaceError(f"unknown problem kind {spec!r}", file=path, line=line,
                         hint=f"built-in and installed kinds: {', '.join(known)}; or module:Class, file.py:Class, "
                              "or declare it inline (README.md, 'Bring your own kernel')")
    from autotune.problems.declared_data import load_function

    target, name = spec.rsplit(":", 1)
    if target.endswith(".py") and not Path(target).is_absolute():
        target = str((path.parent / target).resolve())
    try:
        obj = load_function(f"{target}:{name}")
    except (ImportError, OSError, SyntaxError) as exc:
        raise SpaceError(f"cannot load problem kind {spec!r}: {exc}", file=path, line=line,
                         hint="check the module is importable (or the file exists) and defines the class") from None
    return _instance(obj, spec, path, line)


def _instance(obj: Any, spec: str, path: Path, line: int | None) -> ProblemKind:
    kind = obj() if isinstance(obj, type) else obj
    if not isinstance(kind, ProblemKind):
        raise SpaceError(f"{spec} is not an autotune.problems.base.ProblemKind", file=path, line=line,
                         hint="subclass ProblemKind (see autotune/problems/base.py)")
    return kind
