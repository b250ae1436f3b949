"""Reading a space file's `problem:` section into a `DeclaredKind` (`autotune.problems.declared`).

```yaml
problem:
  name: transpose
  sizes: [rows, cols]
  precisions: [fp32]                 # default [fp32]; a buffer or scalar of dtype T follows the precision
  arguments:                         # the kernel's arguments, in order
    - {name: out, buffer: T, shape: [cols, rows], output: true}
    - {name: inp, buffer: T, shape: [rows, cols], init: random}
    - {name: rows, scalar: int32, value: rows}
  reference: reference.py:transpose  # file.py:function (relative to the space file) or module:function
  tolerance: {fp32: 1e-6}            # max over outputs of ||got - ref|| / ||ref||
  bytes: "2 * rows * cols * elem_bytes"
  flops: 0                           # optional
  baseline: reference.py:cupy_transpose   # optional: the same operation by a library, timed like a kernel
  constants:                         # optional: __constant__ symbols set from the host before a kernel runs
    - {name: filt, dtype: float32, shape: [25], init: {function: gen.py:make}}
  check: check.py:close_enough       # optional: decides correctness (then `reference:` is optional)
```
A buffer's (or constant's) `init:` is `random` (the default), `zeros`, `ones`, an expression of the sizes and `i`
(the flat index), `{function: file.py:make}` (`make(name, sizes, precision, seed)` returns a NumPy array of the
declared shape, cast to the dtype) or host data from a file: `{file: data.npy}` or `{file: data.npz, key: NAME}`
(relative to the space file, inside its folder tree; the array's shape must equal the declared shape at the point,
and it is cast to the dtype: `FileInit`). An output is write-only unless it has an explicit `init:`: then the kernel reads and writes it (in place,
`Argument.inout`) and it is reset to its initial values before the verified launch, whatever its `init`; a
write-only output is poisoned (NaN, or -7 for integers) so an element the kernel never writes fails.
The whole vocabulary, with Python kinds: docs/kinds.md.

`load_declared` checks the section: every mistake names the file, the line and what to do.
"""

from __future__ import annotations


import difflib
import math
import re
from pathlib import Path
from typing import Any

from autotune.errors import SpaceError
from autotune.expr import Expr, ExprError, as_int, evaluate, parse
from autotune.problems import allowed_paths
from autotune.yamlfile import line_of
from autotune.problems.declared import (
    CONSTANT_MEMORY_BYTES,
    DTYPES,
    INITS,
    PRECISION_DTYPES,
    Argument,
    DeclaredKind,
    FileInit,
    Init,
    InitFunction,
)

_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_KEYS = {
    "name",
    "sizes",
    "precisions",
    "arguments",
    "reference",
    "tolerance",
    "bytes",
    "flops",
    "baseline",
    "constants",
    "check",
}  # a set literal: tests/test_docs_reference.py reads it to check docs/kinds.md


def load_declared(section: Any, path: Path, line: int | None) -> DeclaredKind:
    """Check a `problem:` mapping of the space file at `path`; raises SpaceError naming file and line."""
    return _Reader(path).read(section, line)


class _Reader:
    def __init__(self, path: Path) -> None:
        self.path = path

    def fail(self, message: str, line: int | None, hint: str | None = None, expr: str | None = None) -> SpaceError:
        return SpaceError(f"problem: {message}", file=self.path, line=line, hint=hint, expr=expr)

    def expr(self, text: Any, line: int | None, known: set[str], what: str) -> Expr:
        try:
            e = parse(text)
        except ExprError as exc:
            raise self.fail(f"{what}: {exc.message}", line, exc.hint, str(text)) from None
        unknown = sorted(e.names - known)
        if unknown:
            close = difflib.get_close_matches(unknown[0], sorted(known), n=3)
            raise self.fail(
                f"{what}: unknown name {unknown[0]!r}",
                line,
                f"did you mean {', '.join(close)}?" if close else f"names here: {', '.join(sorted(known))}",
                e.text,
            )
        return e

    def read(self, d: Any, line: int | None) -> DeclaredKind:
        self.keys(d, line)
        name, sizes, precisions = self.header(d, line)
        known = set(sizes) | {"elem_bytes"}
        args = self.arguments(d["arguments"], line_of(d, "arguments"), set(sizes))
        constants = self.constants(d.get("constants", []), line_of(d, "constants"), set(sizes), args)
        tol = self.tolerance(d)
        nbytes, flops = self.work(d, known)
        fn = {k: self.function(d[k], line_of(d, k), k) for k in ("reference", "check", "baseline") if k in d}
        return DeclaredKind(
            name=name,
            size_names=tuple(sizes),
            precisions=tuple(precisions),
            arguments=args,
            reference_fn=fn.get("reference"),
            check_fn=fn.get("check"),
            constants=constants,
            tolerance=tuple((str(k), float(v)) for k, v in tol.items()),
            bytes_expr=nbytes,
            flops_expr=flops,
            baseline_fn=fn.get("baseline"),
            source=str(self.path),
            lines=(line_of(d, "bytes"), line_of(d, "flops")),
        )

    def keys(self, d: Any, line: int | None) -> None:
        """The section is a mapping of known keys holding the required ones."""
        if not isinstance(d, dict):
            raise self.fail("must be a kind name, module:Class, file.py:Class, or a mapping", line, "see docs/kinds.md")
        for key in d:
            if key not in _KEYS:
                raise self.fail(f"unknown key {key!r}", line_of(d, key) or line, f"keys: {', '.join(sorted(_KEYS))}")
        for key in ("name", "sizes", "arguments", "bytes"):
            if key not in d:
                raise self.fail(f"missing `{key}:`", line, "see docs/kinds.md")
        if "reference" not in d and "check" not in d:
            raise self.fail(
                "missing `reference:` (or `check:`)",
                line,
                "give reference: file.py:function (the expected outputs), check: file.py:function (a "
                "function that decides), or both; see docs/kinds.md",
            )

    def header(self, d: dict, line: int | None) -> tuple[str, list[str], list[str]]:
        """`name:`, `sizes:` and `precisions:` (default [fp32])."""
        name = d["name"]
        if not isinstance(name, str) or not _IDENT.match(name):
            raise self.fail("`name:` must be an identifier", line_of(d, "name"), "e.g. name: transpose")
        sizes = d["sizes"]
        if (
            not isinstance(sizes, list)
            or not sizes
            or not all(isinstance(s, str) and _IDENT.match(s) for s in sizes)
            or len(set(sizes)) != len(sizes)
        ):
            raise self.fail("`sizes:` must be a list of distinct identifiers", line_of(d, "sizes"), "e.g. [rows, cols]")
        precisions = d.get("precisions", ["fp32"])
        if not isinstance(precisions, list) or not precisions or any(p not in PRECISION_DTYPES for p in precisions):
            raise self.fail(f"`precisions:` must list some of {', '.join(PRECISION_DTYPES)}", line_of(d, "precisions"))
        return name, sizes, precisions

    def tolerance(self, d: dict) -> dict[Any, float]:
        """`tolerance:` (default none): precision -> a number >= 0."""
        tol = d.get("tolerance", {})
        try:  # YAML reads 1e-6 (no dot) as a string
            tol = {k: float(v) for k, v in tol.items()} if isinstance(tol, dict) else None
        except (TypeError, ValueError):
            tol = None
        if tol is None or not all(v >= 0 for v in tol.values()):
            raise self.fail(
                "`tolerance:` maps precisions to non-negative numbers",
                line_of(d, "tolerance"),
                "e.g. {fp32: 1e-5, fp16: 1e-2}",
            )
        return tol

    def work(self, d: dict, known: set[str]) -> tuple[Expr, Expr | None]:
        """`bytes:` and `flops:` (optional) as expressions of the sizes; a constant one is checked now."""
        flops = self.expr(d["flops"], line_of(d, "flops"), known, "flops") if "flops" in d else None
        nbytes = self.expr(d["bytes"], line_of(d, "bytes"), known, "bytes")
        for what, e, least in (("bytes", nbytes, 1), ("flops", flops, 0)):
            if e is None or e.names:
                continue  # only a constant can be checked before the sizes are known
            try:
                value = evaluate(e, {})
                number = None if value is None else float(value)
            except ExprError as exc:  # (1 / 0, 2 ** 2000)
                raise self.fail(
                    f"`{what}:` cannot be computed: {exc}", line_of(d, what), "write the work of one problem", e.text
                ) from None
            if number is not None and not (math.isfinite(number) and number >= least):
                raise self.fail(
                    f"`{what}:` is {number:g}; it must be {'positive' if least else 'a number >= 0'}",
                    line_of(d, what),
                    "it counts the work of one problem, from its sizes",
                    e.text,
                )
        return nbytes, flops

    def function(self, text: Any, line: int | None, what: str) -> str:
        if not isinstance(text, str) or text.count(":") != 1:
            raise self.fail(
                f"`{what}:` must be file.py:function or module:function",
                line,
                "e.g. reference.py:transpose (relative to the space file)",
            )
        target, fn = text.split(":")
        if not _IDENT.match(fn):
            raise self.fail(f"`{what}:` {fn!r} is not a function name", line)
        if target.endswith(".py"):
            return f"{self.file(target, line, f'`{what}:`', f'problem: {what}:')}:{fn}"
        return text

    def file(self, given: str, line: int | None, what: str, key: str) -> Path:
        """The file `given` (relative to the space file) resolved, when it exists in an allowed folder tree."""
        file = self.path.parent / given  # (an absolute `given` stays itself)
        if not file.is_file():
            raise self.fail(f"{what}: no file {file}", line, "give a path relative to the space file")
        return allowed_paths.checked(file, self.path, key, given, line)

    def dtype(self, dtype: Any, at: int | None, what: str) -> str:
        if dtype != "T" and dtype not in DTYPES:
            raise self.fail(f"{what}: unknown dtype {dtype!r}", at, f"one of T (the precision), {', '.join(DTYPES)}")
        return dtype

    def arguments(self, items: Any, line: int | None, sizes: set[str]) -> tuple[Argument, ...]:
        if not isinstance(items, list) or not items:
            raise self.fail(
                "`arguments:` must be a non-empty list, in the kernel's order",
                line,
                "e.g. - {name: out, buffer: T, shape: [rows, cols], output: true}",
            )
        out: list[Argument] = []
        for i, a in enumerate(items):
            at = line_of(items, i) or line
            if not isinstance(a, dict) or "name" not in a or (("buffer" in a) == ("scalar" in a)):
                raise self.fail(
                    "each argument needs `name` and either `buffer: DTYPE` or `scalar: DTYPE`",
                    at,
                    "e.g. {name: n, scalar: int32, value: rows * cols}",
                )
            extra = set(a) - {"name", "buffer", "scalar", "shape", "value", "init", "output"}
            if extra:
                raise self.fail(
                    f"argument {a['name']!r}: unknown key {sorted(extra)[0]!r}",
                    at,
                    "keys: name, buffer or scalar, shape, value, init, output",
                )
            dtype = self.dtype(a.get("buffer", a.get("scalar")), at, f"argument {a['name']!r}")
            if any(x.name == a["name"] for x in out):
                raise self.fail(f"argument name {a['name']!r} is used twice", at)
            if "buffer" in a:
                shape = a.get("shape")
                shape = shape if isinstance(shape, list) else [shape] if shape is not None else None
                if not shape:
                    raise self.fail(
                        f"buffer {a['name']!r} needs `shape:` (a list of size expressions)",
                        at,
                        "e.g. shape: [rows, cols]",
                    )
                output = bool(a.get("output", False))
                init = self.init(a.get("init", "random"), at, sizes, f"argument {a['name']!r}")
                out.append(
                    Argument(
                        a["name"],
                        dtype,
                        tuple(self.expr(s, at, sizes, f"argument {a['name']!r} shape") for s in shape),
                        init=init,
                        output=output,
                        inout=output and "init" in a,
                        line=at,
                    )
                )
            else:
                if "value" not in a:
                    raise self.fail(f"scalar {a['name']!r} needs `value:` (an expression of the sizes)", at)
                out.append(
                    Argument(a["name"], dtype, value=self.expr(a["value"], at, sizes, f"argument {a['name']!r} value"))
                )
        if not any(x.output for x in out):
            raise self.fail("no argument is marked `output: true`", line, "mark the buffers the kernel writes")
        for x in out:  # a constant shape is checked against the file now; one of the sizes at each point
            if isinstance(x.init, FileInit) and not any(e.names for e in x.shape):
                x.init.check(tuple(as_int(evaluate(e, {})) for e in x.shape), f"{x.name!r}")
        return tuple(out)

    def init(self, given: Any, at: int | None, sizes: set[str], what: str) -> Init:
        """A buffer's or constant's `init:` form (see the module docstring)."""
        if isinstance(given, dict) and "file" in given:
            return self.file_init(given, at, what)
        if isinstance(given, dict):
            if set(given) != {"function"}:
                raise self.fail(
                    f"{what}: `init:` as a mapping is {{function: file.py:make}} or {{file: data.npy}}",
                    at,
                    "make(name, sizes, precision, seed) returns a NumPy array of the declared shape",
                )
            return InitFunction(self.function(given["function"], at, f"{what} init: function"))
        if given in INITS:
            return str(given)
        return self.expr(given, at, sizes | {"i"}, f"{what} init")

    def constants(
        self, items: Any, line: int | None, sizes: set[str], args: tuple[Argument, ...]
    ) -> tuple[Argument, ...]:
        """`constants:`: {name: SYMBOL, dtype: DTYPE, shape: [expr, ...], init: FORM} each, copied into the kernel
        module's `__constant__` SYMBOL before an instance runs at a point."""
        if not isinstance(items, list):
            raise self.fail(
                "`constants:` must be a list of {name, dtype, shape, init}",
                line,
                "e.g. - {name: filt, dtype: float32, shape: [25], init: {function: gen.py:filt}}",
            )
        out: list[Argument] = []
        for i, c in enumerate(items):
            at = line_of(items, i) or line
            if (
                not isinstance(c, dict)
                or not {"name", "dtype", "shape"} <= set(c)
                or set(c) - {"name", "dtype", "shape", "init"}
            ):
                raise self.fail(
                    "each constant is {name: SYMBOL, dtype: DTYPE, shape: [...], init: FORM}",
                    at,
                    "e.g. {name: filt, dtype: float32, shape: [25], init: random} (init: default random)",
                )
            name = c["name"]
            if not isinstance(name, str) or not _IDENT.match(name):
                raise self.fail(
                    f"constant {name!r}: `name:` must be the kernel's __constant__ symbol (an identifier)", at
                )
            if any(x.name == name for x in (*args, *out)):
                raise self.fail(
                    f"constant name {name!r} is used twice (arguments and constants share one namespace)",
                    at,
                    "the reference and the check receive both by name",
                )
            self.dtype(c["dtype"], at, f"constant {name!r}")
            shape = c["shape"] if isinstance(c["shape"], list) else [c["shape"]]
            if not shape:
                raise self.fail(f"constant {name!r}: `shape:` is empty", at, "e.g. shape: [25]")
            exprs = tuple(self.expr(s, at, sizes, f"constant {name!r} shape") for s in shape)
            const = Argument(
                name,
                c["dtype"],
                exprs,
                init=self.init(c.get("init", "random"), at, sizes, f"constant {name!r}"),
                line=at,
            )
            if not any(e.names for e in exprs) and c["dtype"] != "T":
                nbytes = math.prod(as_int(evaluate(e, {})) for e in exprs) * DTYPES[c["dtype"]]
                if nbytes > CONSTANT_MEMORY_BYTES:
                    raise self.fail(
                        f"constant {name!r} is {nbytes:,} bytes; constant memory holds {CONSTANT_MEMORY_BYTES:,}",
                        at,
                        "make it smaller, or pass it as a buffer",
                    )
            out.append(const)
        return tuple(out)

    def file_init(self, d: dict, line: int | None, what: str) -> FileInit:
        """`init: {file: data.npy}` or `{file: data.npz, key: NAME}`: the file exists in the space's folder tree and
        holds that array."""
        what = f"{what} init"
        if set(d) - {"file", "key"} or not isinstance(d["file"], str) or not d["file"]:
            raise self.fail(f"{what}: a file init is {{file: data.npy}} or {{file: data.npz, key: NAME}}", line)
        given, key = d["file"], d.get("key")
        resolved = self.file(given, line, what, f"problem: {what}: file:")
        is_npz = resolved.suffix == ".npz"
        if resolved.suffix not in (".npy", ".npz"):
            raise self.fail(f"{what}: {given!r} is not a .npy or .npz file", line, "save it with numpy.save/savez")
        if is_npz != (key is not None) or (key is not None and not isinstance(key, str)):
            raise self.fail(
                f"{what}: "
                + ("a .npz file needs `key:` (the array's name)" if is_npz else "`key:` goes with a .npz file only"),
                line,
            )
        init = FileInit(str(resolved), key, given, str(self.path), line)
        try:
            init.shape()
        except KeyError:
            import zipfile

            with zipfile.ZipFile(resolved) as z:
                keys = [n.removesuffix(".npy") for n in z.namelist()]
            raise self.fail(f"{what}: {given} has no array {key!r}", line, f"keys: {', '.join(keys)}") from None
        except (OSError, ValueError) as exc:
            raise self.fail(f"{what}: cannot read {given}: {exc}", line, "save it with numpy.save/savez") from None
        return init
