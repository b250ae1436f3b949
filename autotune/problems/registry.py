"""Finding a problem kind by what a space file says: a built-in name (`gemm`), an installed package's entry point
in the group `autotune.problems`, `file.py:Class` or `file.py:object` (relative to the space file),
`module:Class` or `module:object` (an importable module; `object` an already built kind), or an inline
declaration (`autotune.problems.declared`). Files load through `autotune.problems.loading`, so the kinds they
define also load in the GPU worker process. Every failure is one SpaceError naming the space file, the line of
`problem:` and what to do (docs/kinds.md).

This module's list of built-in kinds is the one place outside `problems/gemm/` that names GEMM.
"""

from __future__ import annotations

import inspect
import traceback
from importlib.metadata import EntryPoint, entry_points
from pathlib import Path
from typing import Any

from autotune.errors import SpaceError
from autotune.problems import allowed_paths
from autotune.problems.base import ProblemKind
from autotune.problems.declared_file import load_declared
from autotune.problems.gemm import GEMM
from autotune.problems.loading import NoSuchName, load_attribute
from autotune.problems.recorded import load_recorded

ENTRY_POINT_GROUP = "autotune.problems"
BUILT_IN: dict[str, ProblemKind] = {GEMM.name: GEMM}
DEFAULT_KIND: ProblemKind = GEMM  # the kind of a space file without `problem:`
DOCS = "docs/kinds.md"


def default_kind() -> ProblemKind:
    """The kind of a space file that says no `problem:`."""
    return DEFAULT_KIND


def installed() -> dict[str, EntryPoint]:
    """Kinds that installed packages register (entry points), by name, not loaded yet."""
    return {ep.name: ep for ep in entry_points(group=ENTRY_POINT_GROUP)}


def resolve(spec: Any, path: Path, line: int | None) -> ProblemKind:
    """The kind a space file at `path` names or declares (SpaceError with file and line otherwise)."""
    if isinstance(spec, dict):
        if spec.get("recorded") is True:  # an imported cache's measurements: replay only
            return load_recorded(spec, path, line)
        return load_declared(spec, path, line)
    if not isinstance(spec, str) or not spec:
        raise SpaceError(
            "`problem:` must be a kind name, module:Class, file.py:Class or a mapping",
            file=path,
            line=line,
            hint="e.g. problem: gemm",
        )
    if spec in BUILT_IN:
        return BUILT_IN[spec]
    plugins = installed()
    if spec in plugins:
        return _entry_point(plugins[spec], path, line)
    if ":" not in spec:
        known = sorted(BUILT_IN) + sorted(plugins)
        raise SpaceError(
            f"unknown problem kind {spec!r}",
            file=path,
            line=line,
            hint=f"built-in and installed kinds: {', '.join(known)}; or module:Class, file.py:Class, "
            f"or declare it inline ({DOCS})",
        )
    target, name = spec.rsplit(":", 1)
    if target.endswith(".py"):
        file = path.parent / target  # (an absolute target stays itself)
        if not file.is_file():
            raise SpaceError(
                f"problem kind {spec!r}: no file {file}",
                file=path,
                line=line,
                hint="give the file relative to the space file (file.py:Class)",
            )
        target = str(allowed_paths.checked(file, path, "problem:", target, line))
    try:
        obj = load_attribute(f"{target}:{name}")
    except NoSuchName as exc:
        raise SpaceError(
            f"problem kind {spec!r}: {exc}",
            file=path,
            line=line,
            hint="name a class (or a built kind) that the file or module defines",
        ) from None
    except ModuleNotFoundError as exc:
        if not (exc.name and (target == exc.name or target.startswith(exc.name + "."))):
            raise _import_failed(spec, target, exc, path, line) from None
        beside = path.parent / f"{target.replace('.', '/')}.py"
        hint = (
            f"{beside.name} is beside the space file: write problem: {beside.name}:{name}"
            if beside.is_file()
            else "install the package that provides it, or give file.py:Class"
        )
        raise SpaceError(
            f"problem kind {spec!r}: cannot import {exc.name or target!r}", file=path, line=line, hint=hint
        ) from None
    except Exception as exc:  # noqa: BLE001 - the user's module raised while it was imported
        raise _import_failed(spec, target, exc, path, line) from None
    return _instance(obj, repr(spec), path, line)


def _import_failed(spec: str, target: str, exc: Exception, path: Path, line: int | None) -> SpaceError:
    short = Path(target).name if target.endswith(".py") else target
    run = f"python {target}" if target.endswith(".py") else f"python -c 'import {target}'"
    return SpaceError(
        f"problem kind {spec!r}: importing {short} raised {_raised(exc, target)}",
        file=path,
        line=line,
        hint=f"fix {short} ({run} shows the traceback)",
    )


def _entry_point(ep: EntryPoint, path: Path, line: int | None) -> ProblemKind:
    try:
        obj = ep.load()
    except Exception as exc:  # noqa: BLE001 - the installed package failed to import
        raise SpaceError(
            f"problem kind {ep.name!r}: the entry point {ep.value} (group {ENTRY_POINT_GROUP}) failed "
            f"to load: {_raised(exc, ep.module)}",
            file=path,
            line=line,
            hint=f"reinstall or fix the package that provides it (python -c 'import {ep.module}')",
        ) from None
    return _instance(obj, f"{ep.name!r} (entry point {ep.value})", path, line)


def _instance(obj: Any, spec: str, path: Path, line: int | None) -> ProblemKind:
    """The kind `obj` is: a built instance, or a ProblemKind subclass built with no arguments."""
    if isinstance(obj, ProblemKind):
        return obj
    if not (isinstance(obj, type) and issubclass(obj, ProblemKind)):
        raise SpaceError(
            f"problem kind {spec}: {_what(obj)} is not an autotune.problems.base.ProblemKind",
            file=path,
            line=line,
            hint=f"name a subclass of ProblemKind or an instance of one ({DOCS})",
        )
    if inspect.isabstract(obj):
        missing = ", ".join(sorted(getattr(obj, "__abstractmethods__", ())))
        raise SpaceError(
            f"problem kind {spec}: {obj.__name__} does not implement {missing}",
            file=path,
            line=line,
            hint="define these methods (autotune/problems/base.py says what each returns)",
        )
    needed = _required_arguments(obj)
    if needed:
        raise SpaceError(
            f"problem kind {spec}: {obj.__name__}(...) needs arguments {', '.join(needed)}",
            file=path,
            line=line,
            hint="give `module:object` (or file.py:object) with a built instance, or give the arguments defaults",
        )
    try:
        return obj()
    except Exception as exc:  # noqa: BLE001 - the user's constructor raised
        raise SpaceError(
            f"problem kind {spec}: {obj.__name__}() raised {_raised(exc, None)}",
            file=path,
            line=line,
            hint=f"fix {obj.__name__}.__init__, or give a built instance (module:object)",
        ) from None


def _required_arguments(cls: type) -> list[str]:
    try:
        sig = inspect.signature(cls)
    except (TypeError, ValueError):
        return []
    return [
        p.name
        for p in sig.parameters.values()
        if p.default is p.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
    ]


def _raised(exc: BaseException, target: str | None) -> str:
    """`Type: message` on one line, with the line of `target` (a file) where it was raised."""
    text = f"{type(exc).__name__}: {exc}".splitlines()[0] if str(exc) else type(exc).__name__
    if target and target.endswith(".py"):
        lines = [f.lineno for f in traceback.extract_tb(exc.__traceback__) if f.filename == target]
        if isinstance(exc, SyntaxError) and exc.filename == target:
            lines.append(exc.lineno or 0)
        if lines and lines[-1]:
            text += f" (line {lines[-1]})"
    return text


def _what(obj: Any) -> str:
    return f"class {obj.__name__}" if isinstance(obj, type) else f"{type(obj).__name__} object"
