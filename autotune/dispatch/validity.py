"""Validity predicates of one instance, derived from its space's `problems.where` and `kernel.valid`.

A dispatch table may answer a problem with a kernel only where the kernel runs its intended path: the
space's `valid` expression (else its `serves`; e.g. hgemm_flat_tc: `M <= BM and N <= BN and K <= BK`; above
its bounds the kernel takes a slow per-element path) and `problems.where` (e.g. `M <= 128`) must both hold. The lookup code (runtime.py,
and the C++ header) only knows one-key predicates per dimension (`{"m_multiple_of": 8}`, `{"min_k": 2}`,
`{"max_n": 56}`), so the expression is turned into such predicates by probing it:

1. a witness: a problem where the expression holds (the instance's measured points first, then a grid of
   its own parameter values +-1, powers of two and small sizes);
2. per dimension, every value 1..PROBE_MAX (batch: plus a few large counts) with the other dimensions at
   the witness: the values that hold must be exactly {v : lo <= v <= hi, v % g == 0} (hi = no limit when
   the largest probed value holds);
3. the predicates must reproduce the expression exactly on a check set: the product of the critical values
   of every dimension (bounds +-1, 1, 2, the witness), random sizes up to PROBE_MAX (batch up to 2**24), and
   a dense random sample of small sizes.
Where any step fails, `derive` returns None and the caller restricts the kernel to its tuned points
(`tuned_only`). Deterministic: fixed seeds.
"""
from __future__ import annotations

import math
from functools import lru_cache
from typing import Any, Callable, Iterable, Mapping

import numpy as np

from autotune.dispatch.runtime import DIMS

PROBE_MAX = 4096
BATCH_EXTRA = (65535, 65536, 1_000_000, 2**31 - 1)
Predicate = Callable[[np.ndarray, np.ndarray, np.ndarray, np.ndarray], np.ndarray]


def _values(space: Any, params: Mapping[str, Any], precision: str) -> dict[str, Any]:
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


def space_predicate(space: Any, params: Mapping[str, Any], precision: str) -> Predicate:
    """Vectorised `where and valid` of one instance of `space` (a autotune.space.spec.Space)."""
    kernel = space.kernel
    problems = kernel.problems if kernel is not None else None
    valid = kernel.validity if kernel is not None else None
    base = _values(space, params, precision) if valid is not None else {}

    def pred(m: np.ndarray, n: np.ndarray, k: np.ndarray, b: np.ndarray) -> np.ndarray:
        out = np.ones(m.shape, dtype=bool)
        if problems is not None and precision not in problems.precisions:
            return np.zeros(m.shape, dtype=bool)
        env = {"M": m, "N": n, "K": k, "batch": b}
        if problems is not None and problems.where is not None:
            out &= np.broadcast_to(np.asarray(space.eval(problems.where, env), dtype=bool), m.shape)
        if valid is not None:
            out &= np.broadcast_to(np.asarray(space.eval(valid, {**base, **env}), dtype=bool), m.shape)
        return out
    return pred


def predicates_hold(valid: Iterable[tuple[str, int]], dims: np.ndarray) -> np.ndarray:
    """The one-key predicates evaluated on an (n, 4) array of (m, n, k, batch)."""
    ok = np.ones(len(dims), dtype=bool)
    for key, value in valid:
        if key.endswith("_multiple_of"):
            ok &= dims[:, DIMS.index(key[: -len("_multiple_of")])] % value == 0
        elif key.startswith("min_"):
            ok &= dims[:, DIMS.index(key[4:])] >= value
        elif key.startswith("max_"):
            ok &= dims[:, DIMS.index(key[4:])] <= value
        else:
            raise ValueError(f"unknown validity predicate {key!r}")
    return ok


def _call(pred: Predicate, dims: np.ndarray) -> np.ndarray:
    dims = np.asarray(dims, dtype=np.int64)
    return np.asarray(pred(dims[:, 0], dims[:, 1], dims[:, 2], dims[:, 3]), dtype=bool)


def _product(axes: list[np.ndarray]) -> np.ndarray:
    return np.stack([g.ravel() for g in np.meshgrid(*axes, indexing="ij")], axis=1)


def _witness(pred: Predicate, hints: Iterable[tuple[int, int, int, int]], values: Iterable[int]) -> np.ndarray | None:
    hints = np.asarray(list(hints), dtype=np.int64).reshape(-1, 4)
    if len(hints):
        ok = _call(pred, hints)
        if ok.any():
            return hints[np.argmax(ok)]
    base = {1, 2, 3, 4, 5, 6, 7, 8} | {2**i for i in range(13)} | {2**i + 1 for i in range(12)}
    for v in values:
        if 1 <= v <= PROBE_MAX:
            base |= {v - 1, v, v + 1}
    axis = np.array(sorted(x for x in base if 1 <= x <= PROBE_MAX), dtype=np.int64)
    grid = _product([axis, axis, axis, np.array([1, 2, 1000], dtype=np.int64)])
    ok = _call(pred, grid)
    return grid[np.argmax(ok)] if ok.any() else None


def derive(pred: Predicate, hints: Iterable[tuple[int, int, int, int]] = (), values: Iterable[int] = (),
           seed: int = 0) -> tuple[tuple[str, int], ...] | None:
    """One-key predicates equal to `pred` (see the module docstring); None when they cannot express it.

    `hints`: problems (m, n, k, batch) where the instance was measured; `values`: its integer parameters.
    A predicate that holds nowhere gives (("max_m", 0),): never valid.
    """
    w = _witness(pred, hints, values)
    if w is None:
        return (("max_m", 0),)
    valid: list[tuple[str, int]] = []
    crit: list[set[int]] = []
    for d, name in enumerate(DIMS):
        scan = np.arange(1, PROBE_MAX + 1, dtype=np.int64)
        if name == "batch":
            scan = np.concatenate([scan, np.array(BATCH_EXTRA, dtype=np.int64)])
        dims = np.repeat(w[None, :], len(scan), axis=0)
        dims[:, d] = scan
        held = scan[_call(pred, dims)]
        if len(held) == 0:  # the witness itself holds: cannot happen unless the predicate is not a function
            return None
        lo, hi = int(held.min()), int(held.max())
        g = 0
        for v in held:
            g = math.gcd(g, int(v))
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
    check = [_product([np.array(sorted(c), dtype=np.int64) for c in crit])]
    big = np.exp(rng.uniform(0, math.log(PROBE_MAX), (20000, 3))).astype(np.int64)
    bat = np.exp(rng.uniform(0, math.log(2**24), (20000, 1))).astype(np.int64)
    check.append(np.concatenate([np.maximum(big, 1), np.maximum(bat, 1)], axis=1))
    small = rng.integers(1, 161, (20000, 3))
    check.append(np.concatenate([small, rng.choice([1, 2, 7, 1000, 65536], (20000, 1))], axis=1))
    check.append(np.concatenate([rng.integers(max(1, int(w[0]) - 16), int(w[0]) + 17, (5000, 1)),
                                 rng.integers(max(1, int(w[1]) - 16), int(w[1]) + 17, (5000, 1)),
                                 rng.integers(max(1, int(w[2]) - 16), int(w[2]) + 17, (5000, 1)),
                                 rng.choice([1, 2, 1000], (5000, 1))], axis=1))
    dims = np.concatenate(check).astype(np.int64)
    if (_call(pred, dims) != predicates_hold(valid, dims)).any():
        return None
    return tuple(valid)


@lru_cache(maxsize=None)
def _load(space_name: str) -> Any:
    from autotune.space.spec import load_space
    return load_space(space_name)


def instance_validity(space_name: str, params: Mapping[str, Any], precision: str,
                      hints: Iterable[tuple[int, int, int, int]] = ()) -> tuple[tuple[str, int], ...] | None:
    """Predicates of one instance of a space file (None: not expressible, restrict it to its tuned points)."""
    return _instance_validity(space_name, tuple(sorted(params.items())), precision, tuple(map(tuple, hints)))


@lru_cache(maxsize=None)
def _instance_validity(space_name: str, params: tuple, precision: str, hints: tuple) -> tuple | None:
    space = _load(space_name)
    p = dict(params)
    if space.kernel is None or (space.kernel.validity is None and space.kernel.problems.where is None):
        return () if space.kernel is None or precision in space.kernel.problems.precisions else (("max_m", 0),)
    values = [int(v) for v in _values(space, p, precision).values()
              if isinstance(v, (int, np.integer)) and not isinstance(v, bool)]
    return derive(space_predicate(space, p, precision), hints, values)
