"""Plug-ins loaded lazily by name, for strategies and backends: a built-in name maps to "module:attr", installed
packages add theirs in an entry-point group, and a caller may give "module:attr" directly. Only the standard library
at import (the GPU worker's entry imports the backends package); the target's module is imported when it is loaded.
"""

from __future__ import annotations

import importlib
from typing import Any, Mapping


def registered(builtins: Mapping[str, str], group: str) -> dict[str, str]:
    """Every name a caller may give: the built-ins, then the entry points of `group` (name -> "module:attr")."""
    from importlib.metadata import entry_points

    names = dict(builtins)
    for ep in entry_points(group=group):
        names.setdefault(ep.name, ep.value)
    return names


def load(name: str, builtins: Mapping[str, str], group: str, what: str, attr_kind: str) -> Any:
    """What `name` (or "module:attr") registers, imported now; a UserError saying which names there are when it is
    unknown, and what failed when its module or attribute cannot be loaded. `what` names the plug-in in messages
    ("backend"), `attr_kind` what its target is ("Class", "callable")."""
    from autotune.errors import UserError

    target = builtins.get(name) or registered(builtins, group).get(name) or (name if ":" in name else None)
    if target is None:
        raise UserError(
            f"unknown {what} {name!r}",
            hint=f"choose one of {', '.join(registered(builtins, group))}, or give module:{attr_kind}",
        )
    module, _, attr = target.partition(":")
    try:
        return getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError) as exc:
        raise UserError(
            f"cannot load {what} {name!r} ({target}): {exc}",
            hint=f"check the module is installed and defines the {attr_kind.lower()}",
        ) from None
