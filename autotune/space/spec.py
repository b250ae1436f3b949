"""Space files (spaces/*.yaml) -> a checked, immutable `Space`.

A space names a kernel family's tuning parameters, derived quantities, hard and soft constraints,
and its binding to a C++ template (see docs/space-files.md). Everything is checked when the
file is loaded: a mistake is reported with the file, the line, the expression and what to do. The parts of a
space and the binding of an instance to its kernel (with its memo) are in `autotune.space.binding`; the checks of the
`kernel:` section in `autotune.space.kernel_section`.
"""

from __future__ import annotations

import difflib
import hashlib
import os
import re
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from autotune import paths
from autotune.errors import SpaceError
from autotune.expr import MAX_INT_LITERAL, Expr, ExprError, parse
from autotune.problems.base import ProblemKind
from autotune.problems.allowed_paths import ALLOW_ENV
from autotune.space.binding import (
    CPP_TYPES,
    DEVICE_NAMES,
    MEMO_SIZE,
    TYPE_SYMBOLS,
    Binding,
    Constraint,
    Geometry,
    KernelBinding,
    Located,
    Parameter,
    Problems,
)
from autotune.space.kernel_section import KernelSection
from autotune.problems.registry import DEFAULT_KIND, resolve
from autotune.yamlfile import LineDict, line_of, load_yaml

CONTEXT_NAMES = ("elem_bytes", "acc_bytes")
_IDENT = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")


@dataclass(frozen=True)
class Space(Binding):
    name: str
    description: str
    path: Path
    parameters: tuple[Parameter, ...]
    derived: tuple[tuple[str, Located], ...]  # in evaluation order
    hard: tuple[Constraint, ...]
    soft: tuple[Constraint, ...]
    kernel: KernelBinding | None
    kind: ProblemKind = DEFAULT_KIND  # the problem its kernel solves (`problem:`; the registry's default)

    @property
    def param_names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.parameters)


# space name -> file: the versions a results database recorded (autotune.store.spaces), which take precedence over
# spaces/ while that database is analyzed
STORED: dict[str, Path] = {}
_REFUSED: dict[Path, str] = {}  # a STORED entry that stands for a recorded version refused -> why


class RefusedSpace(SpaceError):
    """A space whose version recorded in the database being analyzed was refused (autotune.store.spaces warned
    once, saying why): it does not load."""


def refuse(reason: str) -> Path:
    """A STORED entry for a recorded space version that was refused (autotune.store.spaces): loading it by name
    raises RefusedSpace(reason) instead of reading the work tree's file of that name."""
    entry = Path(f"<refused recorded space {len(_REFUSED)}>")
    _REFUSED[entry] = reason
    return entry


def find_space(name_or_path: str | Path) -> Path:
    """A path as given, a space recorded by the database being analyzed, or a space name under spaces/."""
    p = Path(name_or_path)
    if p.suffix in (".yaml", ".yml") or p.exists():
        return p
    if str(name_or_path) in STORED:
        found = STORED[str(name_or_path)]
        if found in _REFUSED:
            raise RefusedSpace(_REFUSED[found])
        return found
    candidate = paths.SPACES_DIR / f"{name_or_path}.yaml"
    if candidate.exists():
        return candidate
    known = sorted(x.stem for x in paths.SPACES_DIR.glob("*.yaml"))
    raise SpaceError(f"no space named {name_or_path!r}", hint=f"give a file path or one of: {', '.join(known)}")


_REUSE: ContextVar[dict[tuple, Space] | None] = ContextVar("autotune_reuse_spaces", default=None)


@contextmanager
def reusing_spaces() -> Iterator[None]:
    """Within this block, `load_space` builds each space file once: a file with the same path, the same bytes and
    the same allowed paths (AUTOTUNE_ALLOW_PATHS) gives the Space built the first time (a `tune_kernel` call loads
    its space in several places: the folder's check, the config, the plan). Nested blocks share the outer one's."""
    token = _REUSE.set({}) if _REUSE.get() is None else None
    try:
        yield
    finally:
        if token is not None:
            _REUSE.reset(token)


def load_space(name_or_path: str | Path) -> Space:
    path = find_space(name_or_path)
    reuse = _REUSE.get()
    if reuse is None:
        return _Builder(path, load_yaml(path, SpaceError)).build()
    try:
        key = (str(path.resolve()), hashlib.sha256(path.read_bytes()).hexdigest(), os.environ.get(ALLOW_ENV))
    except OSError:  # load_yaml says what is wrong with the file
        return _Builder(path, load_yaml(path, SpaceError)).build()
    if key not in reuse:
        reuse[key] = _Builder(path, load_yaml(path, SpaceError)).build()
    return reuse[key]


class _Builder:
    """Checks one parsed file section by section; the first mistake raises SpaceError."""

    def __init__(self, path: Path, data: LineDict) -> None:
        self.path, self.data = path, data
        self.kind: ProblemKind = DEFAULT_KIND

    def fail(self, message: str, line: int | None, expr: str | None = None, hint: str | None = None) -> SpaceError:
        return SpaceError(message, file=self.path, line=line, expr=expr, hint=hint)

    def expr(self, text: Any, line: int | None, known: set[str], what: str) -> Expr:
        try:
            e = parse(text)
        except ExprError as exc:
            raise self.fail(f"{what}: {exc.message}", line, str(text), exc.hint) from None
        unknown = sorted(e.names - known)
        if unknown:
            close = difflib.get_close_matches(unknown[0], sorted(known), n=3)
            hint = f"did you mean {', '.join(close)}?" if close else "define it under `parameters:` or `derived:`"
            if unknown[0] in self.kind.expr_names():
                hint = (
                    f"problem sizes ({', '.join(self.kind.expr_names())}) exist only in kernel.grid/block/"
                    "shared_bytes/serves/problems.where"
                )
            raise self.fail(
                f"{what}: unknown name {unknown[0]!r}; this expression can never be evaluated", line, e.text, hint
            )
        return e

    def build(self) -> Space:
        d = self.data
        allowed = {"name", "description", "problem", "kernel", "parameters", "derived", "hard", "soft"}
        for key in d:
            if key not in allowed:
                raise self.fail(
                    f"unknown section {key!r}", line_of(d, key), hint=f"sections: {', '.join(sorted(allowed))}"
                )
        name = d.get("name")
        if not isinstance(name, str) or not _IDENT.match(name):
            raise self.fail(
                "`name:` must be an identifier (letters, digits, _)",
                line_of(d, "name") or 1,
                hint="e.g. name: gemm_batched_simt",
            )
        if "problem" in d:
            self.kind = resolve(d["problem"], self.path, line_of(d, "problem"))
        params = self.parameters(d.get("parameters"))
        known = {p.name for p in params} | set(DEVICE_NAMES) | set(CONTEXT_NAMES)
        derived = self.derived(d.get("derived") or {}, known)
        known |= {n for n, _ in derived}
        hard = self.constraints(d.get("hard") or [], "hard", known)
        soft = self.constraints(d.get("soft") or [], "soft", known)
        names = [c.name for c in hard + soft]
        dup = next((n for n in names if names.count(n) > 1), None)
        if dup:
            raise self.fail(f"constraint name {dup!r} is used twice", d.line, hint="give each constraint its own name")
        section = KernelSection(self, params)
        kernel = section.kernel(d["kernel"], known) if "kernel" in d else None
        if kernel is not None and kernel.semantics == "kerneltuner":
            hard += section.implicit_block_limit(kernel, known, names)
        return Space(
            name=name,
            description=str(d.get("description", "")),
            path=self.path,
            parameters=params,
            derived=derived,
            hard=hard,
            soft=soft,
            kernel=kernel,
            kind=self.kind,
        )

    def parameters(self, section: Any) -> tuple[Parameter, ...]:
        if not isinstance(section, dict) or not section:
            raise self.fail(
                "`parameters:` must be a non-empty mapping of name: values",
                line_of(self.data, "parameters"),
                hint="e.g. BLK_M: [16, 32, 64]",
            )
        out = []
        for name, spec in section.items():
            line = line_of(section, name)
            reserved = TYPE_SYMBOLS + self.kind.expr_names()
            if not isinstance(name, str) or not _IDENT.match(name) or name in reserved:
                raise self.fail(
                    f"bad parameter name {name!r}", line, hint=f"use an identifier other than {', '.join(reserved)}"
                )
            if name in DEVICE_NAMES or name in CONTEXT_NAMES:
                raise self.fail(f"parameter {name!r} hides a device or precision name", line, hint="rename it")
            values = self.domain(spec, line)
            if len(set(values)) != len(values):
                raise self.fail(f"parameter {name!r} lists a value twice", line, hint="remove the duplicate")
            kinds = {isinstance(v, str) for v in values}
            if len(kinds) > 1 or any(isinstance(v, bool) for v in values):
                raise self.fail(
                    f"parameter {name!r} mixes strings and numbers", line, hint="use one type per parameter"
                )
            out.append(Parameter(name, values, line))
        return tuple(out)

    def domain(self, spec: Any, line: int | None) -> tuple[Any, ...]:
        if isinstance(spec, list):
            values = tuple(spec)
        elif isinstance(spec, (int, float, str)) and not isinstance(spec, bool):
            values = (spec,)
        elif isinstance(spec, dict) and "values" in spec and len(spec) == 1:
            return self.domain(spec["values"], line)
        elif isinstance(spec, dict) and set(spec) <= {"start", "stop", "step"} and {"start", "stop"} <= set(spec):
            start, stop, step = spec["start"], spec["stop"], spec.get("step", 1)
            if not all(isinstance(v, int) and not isinstance(v, bool) for v in (start, stop, step)) or step <= 0:
                raise self.fail(
                    "a range needs integer start, stop and a positive step",
                    line,
                    hint="e.g. {start: 16, stop: 128, step: 16} (stop is included)",
                )
            span = range(start, stop + 1, step)
            if len(span) > 1 << 24:  # checked before building the tuple
                raise self.fail(
                    f"the range has {len(span):,} values, more than {1 << 24:,} (2^24) per parameter",
                    line,
                    hint="use a larger step or a narrower range",
                )
            if span and abs(span[0]) > MAX_INT_LITERAL:  # (refused below, as a list's first such value would be)
                values = (span[0],)
            elif span and span[-1] > MAX_INT_LITERAL:  # the first value beyond, found from the ends, nothing built
                values = (span[(MAX_INT_LITERAL - start) // step + 1],)
            else:
                values = tuple(span)
        elif isinstance(spec, dict) and set(spec) == {"pow2"}:
            bounds = spec["pow2"]
            if (
                not isinstance(bounds, list)
                or len(bounds) != 2
                or not all(isinstance(b, int) and b >= 1 for b in bounds)
            ):
                raise self.fail("pow2 needs [low, high] with integers >= 1", line, hint="e.g. {pow2: [8, 128]}")
            values = tuple(1 << e for e in range(64) if bounds[0] <= (1 << e) <= bounds[1])
        else:
            raise self.fail(
                "a parameter is a list, a {start, stop, step} range, {pow2: [lo, hi]} or {values: [...]}",
                line,
                hint="see docs/space-files.md",
            )
        if not values:
            raise self.fail("parameter has no values", line, hint="widen the range")
        if not all(isinstance(v, (int, float, str)) and not isinstance(v, bool) for v in values):
            raise self.fail("parameter values must be numbers or strings", line)
        big = next((v for v in values if not isinstance(v, str) and not abs(v) <= MAX_INT_LITERAL), None)
        if big is not None:  # beyond 64-bit arithmetic (a range stop of 10^20, .inf, .nan)
            raise self.fail(
                f"parameter value {big!r} is not a number from -2**62 to 2**62 (what constraints compute with)",
                line,
                hint="give values a kernel can take",
            )
        return values

    def derived(self, section: Any, known: set[str]) -> tuple[tuple[str, Located], ...]:
        if not isinstance(section, dict):
            raise self.fail("`derived:` must be a mapping of name: expression", line_of(self.data, "derived"))
        pending: dict[str, tuple[Expr, int | None]] = {}
        everything = known | set(section)
        for name, text in section.items():
            line = line_of(section, name)
            if (
                not isinstance(name, str)
                or not _IDENT.match(name)
                or name in known
                or name in TYPE_SYMBOLS + self.kind.expr_names()
            ):
                raise self.fail(f"bad or clashing derived name {name!r}", line, hint="pick a new identifier")
            pending[name] = (self.expr(text, line, everything, f"derived {name!r}"), line)
        ordered: list[tuple[str, Located]] = []
        ready = set(known)
        while pending:
            progress = [n for n, (e, _) in pending.items() if e.names <= ready]
            if not progress:
                name, (e, line) = next(iter(pending.items()))
                raise self.fail(
                    f"derived quantities depend on each other in a cycle ({', '.join(pending)})",
                    line,
                    e.text,
                    "break the cycle",
                )
            for n in progress:
                e, line = pending.pop(n)
                ordered.append((n, Located(e, line)))
                ready.add(n)
        return tuple(ordered)

    def constraints(self, section: Any, kind: str, known: set[str]) -> tuple[Constraint, ...]:
        if not isinstance(section, list):
            raise self.fail(f"`{kind}:` must be a list of {{name, expr, reason}}", line_of(self.data, kind))
        out = []
        for i, item in enumerate(section):
            line = line_of(section, i)
            if (
                not isinstance(item, dict)
                or set(item) - {"name", "expr", "reason"}
                or "expr" not in item
                or "name" not in item
            ):
                raise self.fail(
                    f"each {kind} constraint needs `name`, `expr` and a one-line `reason`",
                    line,
                    hint='e.g. - {name: max_threads, expr: "threads <= max_threads_per_block", reason: ...}',
                )
            if not isinstance(item.get("reason"), str) or not item["reason"].strip():
                raise self.fail(
                    f"{kind} constraint {item['name']!r} has no `reason`",
                    line,
                    hint="say in one line why the constraint exists",
                )
            e = self.expr(item["expr"], line_of(item, "expr"), known, f"{kind} constraint {item['name']!r}")
            out.append(Constraint(str(item["name"]), kind, e, item["reason"].strip(), line_of(item, "expr")))
        return tuple(out)


__all__ = [  # the parts of a space live in autotune.space.binding; they are imported from here too
    "CPP_TYPES",
    "MEMO_SIZE",
    "STORED",
    "TYPE_SYMBOLS",
    "Constraint",
    "Geometry",
    "KernelBinding",
    "Located",
    "Parameter",
    "Problems",
    "RefusedSpace",
    "Space",
    "find_space",
    "load_space",
    "refuse",
    "reusing_spaces",
]
