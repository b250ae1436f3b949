"""Loading the user's Python (problem kinds, reference and baseline functions) so it also loads in the GPU worker.

A `file.py` is imported under a stable module name derived from its absolute path (`_autotune_file_<stem>_<hash>`),
registered in `sys.modules` while it runs (dataclasses and pickle look their module up there), with its folder on
`sys.path` meanwhile so it may import its neighbours. The worker process (spawn) cannot import that name, so
every class the file defines is registered with `copyreg`: its instances pickle as "import this file, then build
this class", and unpickling re-imports the file the same way in whichever process receives them. Instances of a
class from an importable module (`module:Class`, `module:object`, entry points) pickle as usual: a spawned process
starts with its parent's `sys.path`.
"""

from __future__ import annotations

import copyreg
import hashlib
import importlib
import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

FILE_ATTRIBUTE = "__autotune_file__"  # set on a module imported from a file: the file's absolute path


def module_name(path: Path) -> str:
    """The stable module name of a user's file (the same in every process and every run)."""
    text = str(path)
    stem = re.sub(r"\W", "_", Path(text).stem) or "file"
    return f"_autotune_file_{stem}_{hashlib.sha1(text.encode()).hexdigest()[:12]}"


def import_file(path: str | Path) -> ModuleType:
    """The module of the file at `path` (absolute), imported once per process; the file's own exceptions
    propagate (the caller says which file raised)."""
    path = Path(path).resolve()
    name = module_name(path)
    module = sys.modules.get(name)
    if module is not None:
        return module
    if not path.is_file():
        raise FileNotFoundError(f"no file {path}")
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    setattr(module, FILE_ATTRIBUTE, str(path))
    folder = str(path.parent)
    sys.modules[name] = module
    sys.path.insert(0, folder)  # the file may import its neighbours
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    finally:
        sys.path.remove(folder)
    for value in list(vars(module).values()):
        if isinstance(value, type) and value.__module__ == name:
            copyreg.pickle(value, _reduce)
    return module


class NoSuchName(ImportError):
    """The file or module imported, but defines no such name."""


def load_attribute(spec: str) -> Any:
    """`/abs/file.py:name` or `module:name` (a dotted name reaches into classes) -> the object. NoSuchName when
    the module has no such name; the module's own exceptions at import propagate."""
    target, name = spec.rsplit(":", 1)
    module = import_file(target) if target.endswith(".py") else importlib.import_module(target)
    obj: Any = module
    for part in name.split("."):
        if not hasattr(obj, part):
            raise NoSuchName(f"{Path(target).name if target.endswith('.py') else target} defines no {name!r}")
        obj = getattr(obj, part)
    return obj


def origin(cls: type) -> str | None:
    """The file a class was loaded from by `import_file`, or None."""
    return getattr(sys.modules.get(cls.__module__), FILE_ATTRIBUTE, None)


def _reduce(obj: Any) -> Any:
    """copyreg reducer of an instance of a class defined in a user's file: `_rebuild` re-imports the file."""
    cls = type(obj)
    rv = obj.__reduce_ex__(2)
    if isinstance(rv, str) or not rv:
        return rv
    func, args, *rest = rv
    where = origin(cls)
    if where is None:
        return rv
    if func is copyreg.__newobj__ and args and args[0] is cls:  # type: ignore[attr-defined]  # typeshed omits it
        return (_rebuild, (where, cls.__qualname__, tuple(args[1:]), False), *rest)
    if func is cls:  # a class whose __reduce__ calls itself
        return (_rebuild, (where, cls.__qualname__, tuple(args), True), *rest)
    return rv


def _rebuild(path: str, qualname: str, args: tuple, call: bool) -> Any:
    cls: Any = import_file(path)
    for part in qualname.split("."):
        cls = getattr(cls, part)
    return cls(*args) if call else cls.__new__(cls, *args)


__all__ = ["NoSuchName", "import_file", "load_attribute", "module_name", "origin"]
