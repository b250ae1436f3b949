"""Validity predicates of one instance, derived from its space's `problems.where` and `kernel.valid`.

A dispatch table may answer a problem with a kernel only where the kernel runs its intended path: the
space's `valid` expression (else its `serves`; e.g. a kernel valid only up to its tile, `M <= BM and N <= BN`;
above its bounds the kernel takes a slow per-element path) and `problems.where` must both hold. The lookup code
(runtime.py, and the C++ header) only knows one-key predicates per size of the kind (`{"<size>_multiple_of": 8}`,
`{"min_<size>": 2}`, `{"max_<size>": 56}`), so the expression is turned into such predicates by probing it over
the kind's sizes (`ProblemKind.size_names`; the expressions read them under the kind's `env` names):

1. a witness: a problem where the expression holds (the instance's measured points first, then a grid of
   its own parameter values +-1, powers of two and small sizes; the kind's tie sizes at 1, 2 and 1000);
2. per size, every value 1..PROBE_MAX (tie sizes: plus a few large counts) with the other sizes at the
   witness: the values that hold must be exactly {v : lo <= v <= hi, v % g == 0} (hi = no limit when the
   largest probed value holds);
3. the predicates must reproduce the expression exactly on a check set: the product of the critical values
   of every size (bounds +-1, 1, 2, the witness), random sizes up to PROBE_MAX (tie sizes up to 2**24), and
   a dense random sample of small sizes.
Where any step fails, `derive` returns None and the caller restricts the kernel to its tuned points
(`tuned_only`). Deterministic: fixed seeds.
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Any, Callable, Iterable, Mapping, Sequence

import numpy as np

PROBE_MAX = 4096
TIE_EXTRA = (65535, 65536, 1_000_000, 2**31 - 1)  # large values a tie size is probed at too
MAX_GRID = 2_000_000  # witness candidates drawn from the product grid at most (more: a random sample)
Predicate = Callable[..., np.ndarray]  # one int64 array per size of the kind, in order -> bool array


def expr_values(space: Any, params: Mapping[str, Any], precision: str) -> dict[str, Any]:
    """Like Space.values, but a derived quantity that cannot be evaluated (an instance recorded before one of
    its parameters existed) is left out: an expression that reads it fails, the others still work."""
    from autotune.devices import get_device

    env = {**space.context(precision, get_device(None)), **params}
    for name, located in space.derived:
        try:
            env[name] = space.eval(located, env)
        except Exception:  # noqa: BLE001 - see the docstring
            pass
    return env


def recorded_params(space: Any, row: Any) -> dict[str, Any]:
    """An instance's parameters from one of its measurement rows (a pandas Series): the column named as the
    parameter, else param_NAME; one the row lacks (an instance measured before the parameter existed) is left out,
    a whole float is an int."""
    import pandas as pd

    params = {}
    for p in space.param_names:
        col = p if p in row.index else f"param_{p}"
        if col in row.index and not pd.isna(row[col]):
            v = row[col]
            params[p] = int(v) if isinstance(v, (float, np.floating)) and float(v).is_integer() else v
    return params


@lru_cache(maxsize=None)
def _env_names(kind: Any) -> tuple[tuple[str, int], ...] | None:
    """(expression name, size index) pairs of a kind's `env`: which size each name reads, found by probing the
    kind with distinct sizes; None when a name is not one size itself (then expressions cannot be vectorised)."""
    primes = (2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41, 43, 47, 53, 59, 61, 67, 71)
    n = len(kind.size_names)
    if 2 * n > len(primes):
        return None
    probes = []
    for values in (primes[:n], primes[n : 2 * n]):
        point = kind.point(kind.precisions[0], kind.shapes[0], dict(zip(kind.size_names, values, strict=True)))
        probes.append((values, kind.env(point)))
    out = []
    for name in probes[0][1]:
        at = [i for i in range(n) if all(env.get(name) == values[i] for values, env in probes)]
        if len(at) != 1:
            return None
        out.append((name, at[0]))
    return tuple(out)


def expr_env(kind: Any, columns: Sequence[np.ndarray]) -> dict[str, np.ndarray]:
    """The names a space expression reads for arrays of problems (one array per size, the kind's order), as the
    kind's `env` names them (e.g. a kind may read its size m as M). ValueError when the kind's env is not a
    renaming of its sizes."""
    names = _env_names(kind)
    if names is None:
        raise ValueError(f"{kind.name}: its expression names are not its sizes renamed; cannot evaluate them on arrays")
    return {name: columns[i] for name, i in names}


def space_predicate(space: Any, params: Mapping[str, Any], precision: str) -> Predicate:
    """Vectorised `where and valid` of one instance of `space` (a autotune.space.spec.Space), over the sizes of
    the space's kind in order."""
    kernel = space.kernel
    problems = kernel.problems if kernel is not None else None
    valid = kernel.validity if kernel is not None else None
    base = expr_values(space, params, precision) if valid is not None else {}
    kind = space.kind

    def pred(*columns: np.ndarray) -> np.ndarray:
        shape = np.shape(columns[0])
        out = np.ones(shape, dtype=bool)
        if problems is not None and precision not in problems.precisions:
            return np.zeros(shape, dtype=bool)
        env = expr_env(kind, columns)
        if problems is not None and problems.where is not None:
            out &= np.broadcast_to(np.asarray(space.eval(problems.where, env), dtype=bool), shape)
        if valid is not None:
            out &= np.broadcast_to(np.asarray(space.eval(valid, {**base, **env}), dtype=bool), shape)
        return out

    return pred


def predicates_hold(valid: Iterable[tuple[str, int]], dims: np.ndarray, names: Sequence[str]) -> np.ndarray:
    """The one-key predicates evaluated on an (n, len(names)) array of sizes named `names`."""
    names = list(names)
    ok = np.ones(len(dims), dtype=bool)
    for key, value in valid:
        if key.endswith("_multiple_of") and key[: -len("_multiple_of")] in names:
            ok &= dims[:, names.index(key[: -len("_multiple_of")])] % value == 0
        elif key.startswith("min_") and key[4:] in names:
            ok &= dims[:, names.index(key[4:])] >= value
        elif key.startswith("max_") and key[4:] in names:
            ok &= dims[:, names.index(key[4:])] <= value
        else:
            raise ValueError(f"unknown validity predicate {key!r} (sizes: {', '.join(names)})")
    return ok


def _call(pred: Predicate, dims: np.ndarray) -> np.ndarray:
    dims = np.asarray(dims, dtype=np.int64)
    return np.asarray(pred(*(dims[:, j] for j in range(dims.shape[1]))), dtype=bool)


def _grid(axes: list[np.ndarray], rng: np.random.Generator) -> np.ndarray:
    """Every combination of the axes' values, or MAX_GRID drawn at random where there are more."""
    if math.prod(len(a) for a in axes) <= MAX_GRID:
        return np.stack([g.ravel() for g in np.meshgrid(*axes, indexing="ij")], axis=1)
    return np.stack([rng.choice(a, MAX_GRID) for a in axes], axis=1)


def _witness(
    pred: Predicate,
    hints: Iterable[Sequence[int]],
    values: Iterable[int],
    tie: Sequence[bool],
    rng: np.random.Generator,
) -> np.ndarray | None:
    d = len(tie)
    hints = np.asarray(list(hints), dtype=np.int64).reshape(-1, d)
    if len(hints):
        ok = _call(pred, hints)
        if ok.any():
            return hints[np.argmax(ok)]
    base = {1, 2, 3, 4, 5, 6, 7, 8} | {2**i for i in range(13)} | {2**i + 1 for i in range(12)}
    for v in values:
        if 1 <= v <= PROBE_MAX:
            base |= {v - 1, v, v + 1}
    axis = np.array(sorted(x for x in base if 1 <= x <= PROBE_MAX), dtype=np.int64)
    axes = [np.array([1, 2, 1000], dtype=np.int64) if t else axis for t in tie]
    grid = _grid(axes, rng)
    ok = _call(pred, grid)
    return grid[np.argmax(ok)] if ok.any() else None


def derive(
    pred: Predicate,
    names: Sequence[str],
    hints: Iterable[Sequence[int]] = (),
    values: Iterable[int] = (),
    seed: int = 0,
    tie_sizes: Sequence[str] = (),
) -> tuple[tuple[str, int], ...] | None:
    """One-key predicates over the sizes `names` equal to `pred` (see the module docstring); None when they cannot
    express it.

    `hints`: problems (sizes in order) where the instance was measured; `values`: its integer parameters;
    `tie_sizes`: sizes probed up to large values too (a kind's batch-like counts).
    A predicate that holds nowhere gives ((f"max_{names[0]}", 0),): never valid.
    """
    names = list(names)
    tie = [n in tie_sizes for n in names]
    rng = np.random.default_rng(seed)
    w = _witness(pred, hints, values, tie, rng)
    if w is None:
        return ((f"max_{names[0]}", 0),)
    valid: list[tuple[str, int]] = []
    crit: list[set[int]] = []
    for d, name in enumerate(names):
        scan = np.arange(1, PROBE_MAX + 1, dtype=np.int64)
        if tie[d]:
            scan = np.concatenate([scan, np.array(TIE_EXTRA, dtype=np.int64)])
        dims = np.repeat(w[None, :], len(scan), axis=0)
        dims[:, d] = scan
        held = scan[_call(pred, dims)]
        if len(held) == 0:  # the witness itself holds: cannot happen unless the predicate is not a function
            return None
        lo, hi = int(held.min()), int(held.max())
        g = math.gcd(*held.tolist())
        unbounded = hi == int(scan.max())
        expect = scan[(scan >= lo) & ((scan <= hi) | unbounded) & (scan % g == 0)]
        if len(expect) != len(held) or (expect != held).any():
            return None
        if g > 1 and (unbounded or lo < hi):
            valid.append((f"{name}_multiple_of", g))
        if lo > 1:
            valid.append((f"min_{name}", lo))
        if not unbounded:
            valid.append((f"max_{name}", hi))
        c = {1, 2, 3, lo - 1, lo, lo + 1, lo + g, int(w[d]), PROBE_MAX}
        if not unbounded:
            c |= {hi - g, hi - 1, hi, hi + 1, hi + g}
        crit.append({x for x in c if 1 <= x})
    rng = np.random.default_rng(seed)
    n = len(names)
    check = [_grid([np.array(sorted(c), dtype=np.int64) for c in crit], rng)]
    big = np.exp(rng.uniform(0, math.log(PROBE_MAX), (20000, n))).astype(np.int64)
    bat = np.exp(rng.uniform(0, math.log(2**24), (20000, n))).astype(np.int64)
    check.append(np.maximum(np.where(tie, bat, big), 1))
    small = rng.integers(1, 161, (20000, n))
    check.append(np.where(tie, rng.choice([1, 2, 7, 1000, 65536], (20000, n)), small))
    near = np.stack([rng.integers(max(1, int(w[j]) - 16), int(w[j]) + 17, 5000) for j in range(n)], axis=1)
    check.append(np.where(tie, rng.choice([1, 2, 1000], (5000, n)), near))
    dims = np.concatenate(check).astype(np.int64)
    if (_call(pred, dims) != predicates_hold(valid, dims, names)).any():
        return None
    return tuple(valid)


def _file_key(space_name: str) -> tuple[str, int]:
    """The file a space name resolves to now (the work tree's, or a database's recorded version while that database
    is analyzed: `spec.find_space`) and its modification time: what the caches below are keyed by, so a name that
    resolves elsewhere, or a file edited since, is loaded again."""
    from autotune.space.spec import find_space

    path = find_space(space_name).resolve()
    return str(path), path.stat().st_mtime_ns


def _load(space_name: str) -> Any:
    return _load_file(_file_key(space_name))


@lru_cache(maxsize=None)
def _load_file(key: tuple[str, int]) -> Any:
    from autotune.space.spec import load_space

    return load_space(key[0])


def instance_validity(
    space_name: str, params: Mapping[str, Any], precision: str, hints: Iterable[Sequence[int]] = ()
) -> tuple[tuple[str, int], ...] | None:
    """Predicates of one instance of a space file (None: not expressible, restrict it to its tuned points).
    `hints`: problems where it was measured, sizes in the kind's order."""
    key = _file_key(space_name)
    return _instance_validity(key, tuple(sorted(params.items())), precision, tuple(map(tuple, hints)))


@lru_cache(maxsize=None)
def _instance_validity(key: tuple[str, int], params: tuple, precision: str, hints: tuple) -> tuple | None:
    space = _load_file(key)
    p = dict(params)
    kind = space.kind
    never = ((f"max_{kind.size_names[0]}", 0),)
    if space.kernel is None or (space.kernel.validity is None and space.kernel.problems.where is None):
        return () if space.kernel is None or precision in space.kernel.problems.precisions else never
    if _env_names(kind) is None:
        return None
    values = [
        int(v)
        for v in expr_values(space, p, precision).values()
        if isinstance(v, (int, np.integer)) and not isinstance(v, bool)
    ]
    return derive(space_predicate(space, p, precision), kind.size_names, hints, values, tie_sizes=kind.tie_sizes())
