"""Extremely randomized regression trees on integer codes (numpy only): `hybrid`'s optional surrogate of
higher-order interactions (`--option trees=N`). A tree splits a node on a code threshold (`code <= t`); per node it
draws one random threshold per parameter that varies there and keeps the split that lowers the squared error most
(Geurts et al. 2006, "Extremely randomized trees", with K = every parameter). A leaf predicts its rows' mean; the
ensemble's mean and its spread over the trees (standard deviation) are what the search reads.

Why: the ridge surrogate of `hybrid` has main effects and pairs only, and the optimum of convolution_milo W6600 is
an interaction of three or four parameters (block_size_y 1, tile_size_x 1, tile_size_y 4, no shared memory) inside a
region whose typical instance is 100x slower; a tree can carve that corner out of a few measured rows.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Forest:
    """Per tree, its nodes in flat arrays: `feat`/`thr` (a row goes left when code[feat] <= thr), `left`/`right`
    (a leaf points to itself both ways) and `value` (a leaf's mean); every tree is `depth` levels at most."""

    feat: np.ndarray  # (trees x nodes) int64
    thr: np.ndarray
    left: np.ndarray
    right: np.ndarray
    value: np.ndarray  # (trees x nodes) float64
    depth: int

    def predict(self, codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The ensemble's mean and standard deviation over its trees, per row of `codes` (rows x parameters)."""
        x = np.ascontiguousarray(codes, dtype=np.int64)
        got = np.empty((len(self.feat), len(x)))
        ar = np.arange(len(x))
        for t in range(len(self.feat)):
            node = np.zeros(len(x), np.int64)
            for _ in range(self.depth):
                go_left = x[ar, self.feat[t, node]] <= self.thr[t, node]
                node = np.where(go_left, self.left[t, node], self.right[t, node])
            got[t] = self.value[t, node]
        return got.mean(axis=0), got.std(axis=0)


def fit_forest(codes: np.ndarray, y: np.ndarray, trees: int, depth: int, rng: np.random.Generator) -> Forest:
    """`trees` extremely randomized trees of at most `depth` levels on (rows x parameters) integer codes and
    targets `y`; a node of fewer than 2 rows, or whose rows have one target or one code in every parameter, is a
    leaf. Deterministic for a given generator state."""
    x = np.asarray(codes, dtype=np.int64)
    y = np.asarray(y, dtype=np.float64)
    built = [_tree(x, y, depth, rng) for _ in range(trees)]
    width = max(len(b[0]) for b in built)

    def stack(k: int, fill: float) -> np.ndarray:
        out = np.full((trees, width), fill, dtype=np.float64 if k == 4 else np.int64)
        for t, b in enumerate(built):
            out[t, : len(b[k])] = b[k]
        return out

    return Forest(stack(0, 0), stack(1, 0), stack(2, 0), stack(3, 0), stack(4, 0.0), depth)


def _tree(x: np.ndarray, y: np.ndarray, depth: int, rng: np.random.Generator) -> tuple[list, list, list, list, list]:
    feat: list[int] = []
    thr: list[int] = []
    left: list[int] = []
    right: list[int] = []
    value: list[float] = []
    stack = [(np.arange(len(y)), 0, -1, False)]  # (rows, level, parent, is the right child)
    while stack:
        rows, level, parent, is_right = stack.pop()
        node = len(feat)
        if parent >= 0:
            (right if is_right else left)[parent] = node
        feat.append(0)
        thr.append(np.iinfo(np.int64).max)  # a leaf: every row goes "left", to itself
        left.append(node)
        right.append(node)
        ys = y[rows]
        value.append(float(ys.mean()))
        if level >= depth or len(rows) < 2 or np.ptp(ys) == 0.0:
            continue
        xs = x[rows]
        lo, hi = xs.min(axis=0), xs.max(axis=0)
        varies = np.flatnonzero(hi > lo)
        if not len(varies):
            continue
        t = rng.integers(lo[varies], hi[varies])  # one threshold per varying parameter, in [lo, hi)
        goes = xs[:, varies] <= t[None, :]  # (rows x candidates)
        n_l = goes.sum(axis=0)
        s_l = ys @ goes
        s = ys.sum()
        n = len(ys)
        score = s_l**2 / n_l + (s - s_l) ** 2 / (n - n_l)  # the squared error falls as this rises
        k = int(np.argmax(score))
        feat[node], thr[node] = int(varies[k]), int(t[k])
        mask = goes[:, k]
        stack.append((rows[~mask], level + 1, node, True))
        stack.append((rows[mask], level + 1, node, False))
    return feat, thr, left, right, value
