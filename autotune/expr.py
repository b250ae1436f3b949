"""A small, safe expression language for space files, evaluated over numpy arrays.

Allowed: numbers, strings, names, `+ - * / // % **`, unary `- + not`, comparisons (chained),
`and`/`or`, `x if c else y`, `a in [1, 2]` / `not in`, and the calls `min max ceil floor log2 abs`.
Everything else (attribute access, subscripts, other calls, lambdas, comprehensions, keyword
arguments, starred arguments) is rejected when the file is loaded, before anything runs.

Evaluation never uses Python's `eval`: it walks the parsed tree. Values are numpy arrays (one
element per candidate instance) or scalars. `and`, `or` and `x if c else y` are short-circuit per
element, so `K != 0 and N / K > 2` never reports a division by zero where K == 0.
"""

from __future__ import annotations

import ast
import functools
import math
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

import numpy as np

FUNCTIONS = ("min", "max", "ceil", "floor", "log2", "abs")
MAX_EXPONENT = 64
MAX_INT_LITERAL = 2**62
MAX_TEXT = 2000


class ExprError(Exception):
    """Why an expression was rejected or could not be evaluated, plus what to do about it."""

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint


class UnknownName(ExprError):
    """An expression reads a name its environment does not define."""


_BINOPS = {
    ast.Add: np.add,
    ast.Sub: np.subtract,
    ast.Mult: np.multiply,
    ast.Div: np.true_divide,
    ast.FloorDiv: np.floor_divide,
    ast.Mod: np.mod,
    ast.Pow: np.power,
}
_CMPOPS = {
    ast.Lt: np.less,
    ast.LtE: np.less_equal,
    ast.Gt: np.greater,
    ast.GtE: np.greater_equal,
    ast.Eq: np.equal,
    ast.NotEq: np.not_equal,
}
_ALLOWED = (
    ast.Expression,
    ast.BoolOp,
    ast.And,
    ast.Or,
    ast.BinOp,
    ast.UnaryOp,
    ast.USub,
    ast.UAdd,
    ast.Not,
    ast.Compare,
    ast.In,
    ast.NotIn,
    ast.IfExp,
    ast.Call,
    ast.Name,
    ast.Load,
    ast.Constant,
    ast.List,
    ast.Tuple,
    *_BINOPS,
    *_CMPOPS,
)


@dataclass(frozen=True)
class Expr:
    """A parsed, checked expression. Picklable (it keeps the tree, no compiled code)."""

    text: str
    tree: ast.Expression = field(repr=False, compare=False)
    names: frozenset[str]

    def __call__(self, env: Mapping[str, Any], mask: np.ndarray | None = None) -> Any:
        return evaluate(self, env, mask)


def parse(text: str | int | float | bool) -> Expr:
    """Parse and check an expression; raise ExprError naming the forbidden construct."""
    if isinstance(text, bool) or isinstance(text, (int, float)):
        text = repr(text)
    if not isinstance(text, str):
        raise ExprError(
            f"expected an expression, got {type(text).__name__}", "write the expression as a string or a number"
        )
    if len(text) > MAX_TEXT:
        raise ExprError(f"expression longer than {MAX_TEXT} characters", "split it into derived quantities")
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError as exc:
        raise ExprError(f"syntax error: {exc.msg}", "check brackets and operators") from None
    names: set[str] = set()
    for node in ast.walk(tree):
        _check_node(node, names)
    return Expr(text=text, tree=tree, names=frozenset(names))


def _check_node(node: ast.AST, names: set[str]) -> None:
    if not isinstance(node, _ALLOWED):
        what = {
            ast.Attribute: "attribute access",
            ast.Subscript: "subscripts",
            ast.Lambda: "lambdas",
            ast.ListComp: "comprehensions",
            ast.GeneratorExp: "comprehensions",
            ast.DictComp: "comprehensions",
            ast.SetComp: "comprehensions",
            ast.Starred: "starred arguments",
            ast.NamedExpr: "assignment",
            ast.Is: "`is`",
            ast.IsNot: "`is not`",
            ast.Dict: "dict literals",
            ast.Set: "set literals",
        }.get(type(node), type(node).__name__)
        raise ExprError(
            f"{what} is not allowed in expressions",
            "use arithmetic, comparisons, and/or/not, `x if c else y`, `in [..]` and " + ", ".join(FUNCTIONS),
        )
    if isinstance(node, ast.Call):
        if not isinstance(node.func, ast.Name):
            _check_node(node.func, set())  # names the construct: attribute access, lambda, ...
            raise ExprError(
                "calling the result of an expression is not allowed", f"only {', '.join(FUNCTIONS)} can be called"
            )
        if node.func.id not in FUNCTIONS:
            raise ExprError(f"call of {node.func.id} is not allowed", f"only {', '.join(FUNCTIONS)} can be called")
        if node.keywords:
            raise ExprError("keyword arguments are not allowed", "pass arguments by position")
        want = (2, None) if node.func.id in ("min", "max") else (1, 1)
        if len(node.args) < want[0] or (want[1] is not None and len(node.args) > want[1]):
            raise ExprError(
                f"{node.func.id}() takes {'at least 2 arguments' if want[1] is None else '1 argument'}",
                f"e.g. {node.func.id}({'a, b' if want[1] is None else 'x'})",
            )
    elif isinstance(node, ast.Name):
        if node.id.startswith("_"):
            raise ExprError(f"name {node.id!r} is not allowed", "names may not start with an underscore")
        if node.id not in FUNCTIONS:
            names.add(node.id)
    elif isinstance(node, ast.Constant):
        value = node.value
        if isinstance(value, bool) or value is None:
            pass
        elif isinstance(value, int):
            if abs(value) > MAX_INT_LITERAL:
                raise ExprError("integer literal too large", "keep literals below 2**62")
        elif not isinstance(value, (float, str)):
            raise ExprError(f"literal {value!r} is not allowed", "use numbers or strings")
    elif isinstance(node, ast.Compare):
        for op, right in zip(node.ops, node.comparators, strict=True):
            if isinstance(op, (ast.In, ast.NotIn)) and not isinstance(right, (ast.List, ast.Tuple)):
                raise ExprError(
                    "`in` needs a literal list on its right, e.g. `x in [1, 2, 4]`",
                    "write the allowed values as a list",
                )


def evaluate(expr: Expr, env: Mapping[str, Any], mask: np.ndarray | None = None) -> Any:
    """Evaluate over `env` (name -> scalar or array). `mask` limits error checks to selected rows."""
    try:
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            return _eval(expr.tree.body, env, mask)
    except KeyError as exc:
        raise UnknownName(f"unknown name {exc.args[0]!r}", "define it as a parameter or derived quantity") from None
    except (TypeError, ValueError) as exc:
        raise ExprError(f"type error: {exc}", "check that strings are only compared with strings") from None


def where_rows(
    text: str, env: Mapping[str, Any], count: int, error: Callable[..., Exception], names: str, label: str = "--where"
) -> np.ndarray:
    """The rows (`count` of them) for which a user's filter expression holds over `env`.

    A mistake raises `error(f"{label}: message", expr=text, hint=...)` (a UserError class); an unknown
    name's hint lists `names`, the names the filter may read."""
    try:
        result = np.asarray(parse(text)(env))
    except UnknownName as exc:
        raise error(f"{label}: {exc.message}", expr=text, hint=f"names: {names}") from None
    except ExprError as exc:
        raise error(f"{label}: {exc.message}", expr=text, hint=exc.hint) from None
    return np.broadcast_to(result.astype(bool), (count,))


def _active(values: Any, mask: np.ndarray | None) -> Any:
    """The elements of `values` the error checks care about."""
    if mask is None or np.shape(values) != np.shape(mask):
        return values
    return np.asarray(values)[mask]


def _and_mask(mask: np.ndarray | None, cond: Any) -> np.ndarray | None:
    cond = np.asarray(cond, dtype=bool)
    if cond.ndim == 0:
        return mask if bool(cond) else (np.zeros_like(mask) if mask is not None else cond)
    return cond if mask is None else (mask & cond)


def _eval(node: ast.AST, env: Mapping[str, Any], mask: np.ndarray | None) -> Any:
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        return env[node.id]
    if isinstance(node, (ast.List, ast.Tuple)):
        return [_eval(e, env, mask) for e in node.elts]
    if isinstance(node, ast.UnaryOp):
        value = _eval(node.operand, env, mask)
        if isinstance(node.op, ast.Not):
            return np.logical_not(value)
        _require_number(value, "unary minus" if isinstance(node.op, ast.USub) else "unary plus")
        if np.asarray(value).dtype == bool:  # like Python: -True == -1 (numpy refuses to negate booleans)
            value = np.asarray(value).astype(np.int64)
        return np.negative(value) if isinstance(node.op, ast.USub) else value
    if isinstance(node, ast.BinOp):
        return _binop(node, env, mask)
    if isinstance(node, ast.BoolOp):
        result = np.asarray(_eval(node.values[0], env, mask), dtype=bool)
        for value_node in node.values[1:]:
            go_on = result if isinstance(node.op, ast.And) else np.logical_not(result)
            sub = _and_mask(mask, go_on)
            value = np.asarray(_eval(value_node, env, sub), dtype=bool)
            result = np.logical_and(result, value) if isinstance(node.op, ast.And) else np.logical_or(result, value)
        return result
    if isinstance(node, ast.Compare):
        return _compare(node, env, mask)
    if isinstance(node, ast.IfExp):
        cond = np.asarray(_eval(node.test, env, mask), dtype=bool)
        if cond.ndim == 0:
            return _eval(node.body if bool(cond) else node.orelse, env, mask)
        yes = _eval(node.body, env, _and_mask(mask, cond))
        no = _eval(node.orelse, env, _and_mask(mask, ~cond))
        return np.where(cond, yes, no)
    if isinstance(node, ast.Call):
        return _call(node, env, mask)
    raise ExprError(f"cannot evaluate {type(node).__name__}")  # unreachable after _check_node


def _require_number(value: Any, what: str) -> None:
    kind = np.asarray(value).dtype.kind
    if kind not in "biuf":
        raise ExprError(
            f"type error: {what} needs numbers, got {np.asarray(value).dtype}",
            "strings can only be compared (==, !=, in)",
        )


def _binop(node: ast.BinOp, env: Mapping[str, Any], mask: np.ndarray | None) -> Any:
    left = _eval(node.left, env, mask)
    right = _eval(node.right, env, mask)
    op = type(node.op)
    for side in (left, right):
        _require_number(side, "arithmetic")
    # like Python, True + True == 2 (numpy's boolean + is a logical or)
    left, right = (np.asarray(v).astype(np.int64) if np.asarray(v).dtype == bool else v for v in (left, right))
    if op in (ast.Div, ast.FloorDiv, ast.Mod) and np.any(_active(right, mask) == 0):
        raise ExprError("division by zero", "guard the division, e.g. `d != 0 and n / d > 1`, or fix the range")
    if op is ast.Pow:
        exponent = _active(right, mask)
        if np.any(np.abs(exponent) > MAX_EXPONENT):
            raise ExprError(f"exponent larger than {MAX_EXPONENT}", "powers are limited to keep evaluation bounded")
        if np.asarray(right).dtype.kind in "iu" and np.any(_active(right, mask) < 0):
            left = np.asarray(left, dtype=float)
        base = np.abs(np.asarray(_active(left, mask), dtype=float))
        if base.size and np.any(np.log2(np.maximum(base, 1.0)) * np.max(np.abs(exponent)) > 62):
            raise ExprError("power result too large", "powers must stay below 2**62")
    return _BINOPS[op](left, right)


def _compare(node: ast.Compare, env: Mapping[str, Any], mask: np.ndarray | None) -> Any:
    left = _eval(node.left, env, mask)
    result: Any = True
    for op, right_node in zip(node.ops, node.comparators, strict=True):
        right = _eval(right_node, env, mask)
        if isinstance(op, (ast.In, ast.NotIn)):
            # `right` is the evaluated literal list (checked at parse time); compared item by item, since an item
            # may be an array over the rows (np.isin would flatten it and test every row against every row's value)
            hit = np.zeros(np.shape(left), dtype=bool)
            for item in right:
                hit = np.logical_or(hit, np.asarray(left) == np.asarray(item))
            part = hit if isinstance(op, ast.In) else np.logical_not(hit)
        else:
            lk, rk = np.asarray(left).dtype.kind, np.asarray(right).dtype.kind
            if (lk in "USO") != (rk in "USO"):
                if isinstance(op, (ast.Eq, ast.NotEq)):
                    part = np.full(np.broadcast(np.asarray(left), np.asarray(right)).shape, isinstance(op, ast.NotEq))
                else:
                    raise ExprError(
                        "type error: cannot order a string against a number", "compare strings with == / != / in only"
                    )
            else:
                part = _CMPOPS[type(op)](left, right)
        result = np.logical_and(result, part)
        left = right
    return result


def _call(node: ast.Call, env: Mapping[str, Any], mask: np.ndarray | None) -> Any:
    name = node.func.id  # type: ignore[attr-defined]
    args = [_eval(a, env, mask) for a in node.args]
    for a in args:
        _require_number(a, f"{name}()")
    if name in ("min", "max"):
        return functools.reduce(np.minimum if name == "min" else np.maximum, args)
    x = args[0]
    if name == "abs":
        return np.abs(x)
    if name == "log2":
        if np.any(_active(x, mask) <= 0):
            raise ExprError("log2 of a value <= 0", "guard it, e.g. `x > 0 and log2(x) ...`")
        return np.log2(x)
    rounded = np.ceil(x) if name == "ceil" else np.floor(x)
    return rounded.astype(np.int64) if isinstance(rounded, np.ndarray) else int(rounded)


def as_int(value: Any) -> int:
    """A scalar expression result as a Python int (launch geometry, template arguments)."""
    v = np.asarray(value).item()
    if isinstance(v, float):
        if not math.isfinite(v) or v != int(v):
            raise ExprError(f"expected an integer, got {v}", "use // or ceil()/floor() for integer results")
        v = int(v)
    if isinstance(v, bool):
        return int(v)
    if not isinstance(v, int):
        raise ExprError(f"expected an integer, got {v!r}")
    return v
