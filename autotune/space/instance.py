"""Instances: one point of a space, i.e. one kernel to compile, with a stable identity.

The ID is derived from the space name and the parameter values only, so it is identical across
runs, machines and orderings of the space file. The procedural name is for people and C++ code.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Mapping

ParamValue = int | float | str


def plain_value(value: Any) -> ParamValue:
    """numpy scalars -> Python scalars, so hashing and JSON see one representation."""
    if hasattr(value, "item"):
        value = value.item()
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def instance_id(space: str, params: Mapping[str, Any]) -> str:
    canonical = json.dumps({k: plain_value(v) for k, v in params.items()}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(f"{space}|{canonical}".encode()).hexdigest()[:16]


@dataclass(frozen=True)
class Instance:
    """An immutable, hashable (space, parameters) pair."""

    space: str
    params: tuple[tuple[str, ParamValue], ...]

    @classmethod
    def of(cls, space: str, params: Mapping[str, Any]) -> "Instance":
        return cls(space, tuple((k, plain_value(v)) for k, v in params.items()))

    def __hash__(self) -> int:
        # computed once per object: a plan's dicts hash each instance once per test point it serves
        h = self.__dict__.get("_hash")
        if h is None:
            h = hash((self.space, self.params))
            object.__setattr__(self, "_hash", h)
        return h

    def __getstate__(self) -> dict[str, Any]:
        # str hashes differ between processes: the cached hash stays in this one
        return {k: v for k, v in self.__dict__.items() if k != "_hash"}

    @cached_property
    def id(self) -> str:
        return instance_id(self.space, dict(self.params))

    @cached_property
    def name(self) -> str:
        parts = [self.space] + [f"{k}{v}" for k, v in self.params]
        return re.sub(r"[^A-Za-z0-9_]", "_", "_".join(str(p) for p in parts))

    @property
    def param_dict(self) -> dict[str, ParamValue]:
        return dict(self.params)
