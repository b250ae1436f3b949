"""A space file's `kernel:` section -> a checked `KernelBinding` (docs/own-kernel.md): its keys, the kernel file, the
template or plain function with its arguments and defines, the launch geometry, the compiler and the problems it
accepts, and the block limit `semantics: kerneltuner` adds. The rest of the file is checked by `autotune.space.spec`."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Protocol

from autotune import paths
from autotune.errors import SpaceError
from autotune.expr import Expr
from autotune.problems import allowed_paths
from autotune.problems.base import ProblemKind
from autotune.space import kt_semantics
from autotune.space.binding import DEVICE_NAMES, TYPE_SYMBOLS, Constraint, KernelBinding, Located, Parameter, Problems
from autotune.space.compiler import check_compiler, check_options
from autotune.yamlfile import LineDict, line_of

KERNEL_KEYS = {
    "source",
    "template",
    "template_args",
    "name",
    "defines",
    "convention",
    "block",
    "grid",
    "shared_bytes",
    "problems",
    "serves",
    "valid",
    "compiler",
    "compiler_options",
    "semantics",
    "arch_specific",
}


class Checker(Protocol):
    """What the section's checks use of the space file's checker (autotune.space.spec)."""

    path: Path
    data: LineDict
    kind: ProblemKind

    def fail(self, message: str, line: int | None, expr: str | None = None, hint: str | None = None) -> SpaceError: ...

    def expr(self, text: Any, line: int | None, known: set[str], what: str) -> Expr: ...


class KernelSection:
    """Checks the `kernel:` section of one space file; the first mistake raises SpaceError."""

    def __init__(self, checker: Checker, parameters: tuple[Parameter, ...]) -> None:
        self.path, self.data, self.kind = checker.path, checker.data, checker.kind
        self.fail, self.expr = checker.fail, checker.expr
        self.parameter_names = [p.name for p in parameters]

    def kernel(self, k: Any, known: set[str]) -> KernelBinding:
        line = line_of(self.data, "kernel")
        self.check_keys(k, line)
        source = self.source(k["source"], line_of(k, "source"))
        convention = self.convention(k)
        plain = "name" in k
        args = self.template_args(k, plain, known, line)
        geo_known = known | set(self.kind.expr_names())
        defines = self.defines(k, plain, geo_known)
        shared = self.located(k.get("shared_bytes", 0), line_of(k, "shared_bytes"), geo_known, "kernel.shared_bytes")
        serves, valid = (self.optional_expr(k, key, geo_known) for key in ("serves", "valid"))
        name = self.function_name(k, plain)
        compiler, options = self.compiler(k)
        semantics = self.semantics(k)
        arch_specific = self.arch_specific(k)
        return KernelBinding(
            source=str(k["source"]),
            template=name,
            template_args=tuple(args),
            convention=convention,
            block=self.triple(k, "block", geo_known),
            grid=self.triple(k, "grid", geo_known),
            shared_bytes=shared,
            problems=self.problems(k.get("problems") or {}, line),
            serves=serves,
            valid=valid,
            path=source,
            defines=tuple(defines),
            plain=plain,
            compiler=compiler,
            compiler_options=options,
            semantics=semantics,
            arch_specific=arch_specific,
        )

    def check_keys(self, k: Any, line: int | None) -> None:
        """The section is a mapping with source, block, grid, one of template/name, and no unknown key."""
        need = {"source", "block", "grid"}
        if not isinstance(k, dict) or need - set(k) or ("template" in k) == ("name" in k):
            missing = sorted(need - set(k)) if isinstance(k, dict) else sorted(need)
            what = (
                f"misses {', '.join(missing)}"
                if missing
                else "needs either `template:` (a C++ function template, "
                "with template_args) or `name:` (a plain __global__ function)"
            )
            raise self.fail(f"`kernel:` {what}", line, hint="see docs/own-kernel.md")
        for key in k:
            if key not in KERNEL_KEYS:
                raise self.fail(
                    f"kernel: unknown key {key!r}", line_of(k, key), hint=f"keys: {', '.join(sorted(KERNEL_KEYS))}"
                )

    def convention(self, k: dict) -> str:
        """`convention:`, one of the kind's (default: its first)."""
        convention = k.get("convention", self.kind.conventions[0])
        if convention not in self.kind.conventions:
            raise self.fail(
                f"unknown convention {convention!r} for the {self.kind.name} kind",
                line_of(k, "convention"),
                hint=f"one of {', '.join(self.kind.conventions)}",
            )
        return convention

    def template_args(self, k: dict, plain: bool, known: set[str], line: int | None) -> list:
        """`template_args:`: names of parameters, derived quantities or type symbols; none for a plain function."""
        args = k.get("template_args", [])
        if plain and args:
            raise self.fail("template_args go with `template:`, not with `name:`", line_of(k, "template_args"))
        if not isinstance(args, list) or (not plain and not args):
            raise self.fail("template_args must be a list of names", line_of(k, "template_args") or line)
        for a in args:
            if a not in known and a not in TYPE_SYMBOLS:
                raise self.fail(
                    f"template argument {a!r} is neither a parameter, a derived name nor one of "
                    f"{', '.join(TYPE_SYMBOLS)}",
                    line_of(k, "template_args"),
                )
        return args

    def defines(self, k: dict, plain: bool, geo_known: set[str]) -> list:
        """`defines:`: names passed as #define (a plain function's default: every parameter)."""
        defines = k.get("defines", list(self.parameter_names) if plain else [])
        if not isinstance(defines, list) or not all(isinstance(x, str) for x in defines):
            raise self.fail("kernel.defines must be a list of names", line_of(k, "defines"))
        for x in defines:
            if x not in geo_known and x not in ("T", "S"):
                raise self.fail(
                    f"kernel.defines: {x!r} is not a parameter, derived name, size, T or S",
                    line_of(k, "defines"),
                    hint=f"names: {', '.join(sorted(geo_known - set(DEVICE_NAMES)))}",
                )
        return defines

    def triple(self, k: dict, key: str, geo_known: set[str]) -> tuple[Located, ...]:
        """`block:` or `grid:`: 1 to 3 expressions."""
        items = k[key]
        if not isinstance(items, list) or not 1 <= len(items) <= 3:
            raise self.fail(f"kernel.{key} must be a list of 1 to 3 expressions", line_of(k, key))
        return tuple(self.located(x, line_of(items, i), geo_known, f"kernel.{key}") for i, x in enumerate(items))

    def optional_expr(self, k: dict, key: str, geo_known: set[str]) -> Located | None:
        """`serves:` or `valid:` when given."""
        return self.located(k[key], line_of(k, key), geo_known, f"kernel.{key}") if key in k else None

    def located(self, text: Any, line: int | None, known: set[str], what: str) -> Located:
        """The checked expression `text` with its line."""
        return Located(self.expr(text, line, known, what), line)

    def function_name(self, k: dict, plain: bool) -> str:
        """The C++ name of the template (`template:`) or plain function (`name:`)."""
        name = k["name"] if plain else k["template"]
        if not isinstance(name, str) or not re.match(r"^[A-Za-z_][A-Za-z0-9_:]*$", name):
            raise self.fail(
                f"kernel function name {name!r} is not a C++ name", line_of(k, "name" if plain else "template")
            )
        return name

    def compiler(self, k: dict) -> tuple[str, tuple[str, ...]]:
        """`compiler:` (default nvrtc) and its `compiler_options:`."""
        compiler = k.get("compiler", "nvrtc")
        if (bad := check_compiler(compiler)) is not None:
            raise self.fail(bad, line_of(k, "compiler"), hint="nvcc compiles what NVRTC rejects (e.g. <cub/cub.cuh>)")
        options, bad = check_options(k.get("compiler_options", []))
        if bad is not None:
            raise self.fail(
                bad,
                line_of(k, "compiler_options"),
                hint="remove it: the sweep chooses the output, its "
                "kind and the GPU architecture (docs/kinds.md, `compiler_options:`)",
            )
        return compiler, options

    def arch_specific(self, k: dict) -> bool:
        """`arch_specific:` true compiles for the GPU's architecture-specific target (sm_90a on an H100), the only
        one that has its own instructions (wgmma); default false (sm_90: code that also runs on later GPUs)."""
        value = k.get("arch_specific", False)
        if not isinstance(value, bool):
            raise self.fail(
                f"kernel.arch_specific: {value!r} is not true or false",
                line_of(k, "arch_specific"),
                hint="true compiles for sm_XXa (wgmma needs sm_90a); leave it out otherwise",
            )
        return value

    def semantics(self, k: dict) -> str:
        """`semantics:` native (default) or kerneltuner."""
        semantics = k.get("semantics", "native")
        if semantics not in kt_semantics.SEMANTICS:
            raise self.fail(
                f"kernel.semantics: {semantics!r} is not one of {', '.join(kt_semantics.SEMANTICS)}",
                line_of(k, "semantics"),
                hint="kerneltuner: Kernel Tuner's implicit block-size "
                "restriction and loop_unroll_factor_* parameters (docs/kinds.md)",
            )
        return semantics

    def implicit_block_limit(self, kernel: KernelBinding, known: set[str], names: list[str]) -> tuple[Constraint, ...]:
        """`semantics: kerneltuner`: Kernel Tuner's implicit hard constraint, block threads <= the device's maximum
        (kernel_tuner/util.py, config_valid). Omitted when the block reads the problem's sizes (the GPU worker still
        refuses a block the function cannot launch)."""
        if any(b.expr.names - known for b in kernel.block):
            return ()
        at = line_of(self.data["kernel"], "semantics")
        if kt_semantics.CONSTRAINT_NAME in names:
            raise self.fail(
                f"constraint name {kt_semantics.CONSTRAINT_NAME!r} is the one `semantics: kerneltuner` adds",
                at,
                hint="rename your constraint",
            )
        text = kt_semantics.implicit_constraint(tuple(b.expr.text for b in kernel.block))
        return (
            Constraint(
                kt_semantics.CONSTRAINT_NAME,
                "hard",
                self.expr(text, at, known, "kernel.semantics"),
                "Kernel Tuner's implicit restriction: a block has at most the device's maximum threads "
                "(semantics: kerneltuner)",
                at,
            ),
        )

    def source(self, given: Any, line: int | None) -> Path:
        """The kernel file: absolute, relative to the space file, or (built-in spaces) under kernels_src/."""
        if not isinstance(given, str) or not given:
            raise self.fail("kernel.source must be a file name", line)
        p = Path(given).expanduser()
        for candidate in [p] if p.is_absolute() else [self.path.parent / p, paths.KERNELS_DIR / p]:
            if candidate.is_file():
                return allowed_paths.checked(candidate, self.path, "kernel: source:", given, line)
        raise self.fail(
            f"kernel source {given!r} not found",
            line,
            hint=f"give a path relative to the space file ({self.path.parent}) or an absolute path",
        )

    def problems(self, p: Any, line: int | None) -> Problems:
        if not isinstance(p, dict):
            raise self.fail("kernel.problems must be a mapping", line)
        for key in ("precisions", "shapes"):  # `precisions:` left empty is null, not a list
            if key in p and not isinstance(p[key], list):
                raise self.fail(f"kernel.problems.{key} must be a list", line_of(p, key), hint="e.g. [fp32, fp64]")
        precisions = tuple(p.get("precisions", self.kind.precisions))
        shapes = tuple(p.get("shapes", self.kind.shapes))
        for value, allowed, key in (
            (precisions, self.kind.precisions, "precisions"),
            (shapes, self.kind.shapes, "shapes"),
        ):
            bad = [v for v in value if v not in allowed]
            if bad or not value:
                raise self.fail(
                    f"kernel.problems.{key}: {bad or 'empty'}",
                    line_of(p, key),
                    hint=f"choose from {', '.join(allowed)}",
                )
        where = None
        if "where" in p:
            where = self.located(p["where"], line_of(p, "where"), set(self.kind.expr_names()), "problems.where")
        return Problems(precisions, shapes, where)
