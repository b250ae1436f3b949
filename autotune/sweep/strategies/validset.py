"""The valid instances of a space as a search space for a model-based sampler, and the map from any proposal
onto the nearest valid instance not taken yet.

A sampler proposes parameter values from per-parameter ranges (the product of the ranges holds far more
combinations than the space's constraints keep); `ValidSet.take_nearest` answers with the valid instance
nearest to the proposal that was not proposed before, so only valid instances are ever measured and none twice.
Distance: per numeric parameter, the gap on its range scaled to [0, 1] (on a log scale when every value is
positive and the largest is at least 4 times the smallest: tile sizes and block sizes are powers of two); per
categorical parameter, 1 when the values differ. Ties go to the instance given first (deterministic).
One proposal costs a few vectorized passes over an (instances x parameters) float32 matrix: about 10 ms for
10^6 instances of 6 parameters.
"""

from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

import numpy as np
from optuna.distributions import BaseDistribution, CategoricalDistribution, FloatDistribution, IntDistribution

from autotune.space.instance import Instance

MISSING = "-"  # the value of a parameter an instance does not have (spaces whose instances differ in keys)


class ValidSet:
    """Instances (each once, in the given order) with one Optuna distribution per parameter that varies."""

    def __init__(self, instances: Sequence[Instance]) -> None:
        self.instances = list(instances)
        names = list(dict.fromkeys(k for inst in self.instances for k, _ in inst.params))
        columns = {n: [inst.param_dict.get(n, MISSING) for inst in self.instances] for n in names}
        self.distributions: dict[str, BaseDistribution] = {}
        self._coord: dict[str, Any] = {}  # name -> (numeric: (lo, span, log)) | (categorical: {value: code})
        cols = []
        for name, values in columns.items():
            distinct = list(dict.fromkeys(values))
            if len(distinct) < 2:
                continue  # a constant: nothing to search
            nums: list[int | float] = [v for v in distinct if isinstance(v, (int, float)) and not isinstance(v, bool)]
            if len(nums) == len(distinct):  # numeric
                lo, hi = min(nums), max(nums)
                log = lo > 0 and hi >= 4 * lo
                ints = all(isinstance(v, int) for v in nums)
                self.distributions[name] = (
                    IntDistribution(int(lo), int(hi), log=log)
                    if ints
                    else FloatDistribution(float(lo), float(hi), log=log)
                )
                f = math.log if log else float
                span = (f(hi) - f(lo)) or 1.0
                self._coord[name] = (f(lo), span, log)
                arr = np.asarray(values, dtype=np.float64)
                cols.append(((np.log(arr) if log else arr) - f(lo)) / span)
            else:
                self.distributions[name] = CategoricalDistribution(distinct)
                codes = {v: i for i, v in enumerate(distinct)}
                self._coord[name] = codes
                cols.append(np.fromiter((codes[v] for v in values), dtype=np.float64, count=len(values)))
        self._names = list(self.distributions)
        self._x = np.stack(cols, axis=1).astype(np.float32) if cols else np.zeros((len(self.instances), 0), np.float32)
        self.free = np.ones(len(self.instances), dtype=bool)
        self._by_id: dict[str, int] | None = None

    def __len__(self) -> int:
        return len(self.instances)

    @property
    def left(self) -> int:
        """Instances not taken yet."""
        return int(self.free.sum())

    def params(self, row: int) -> dict[str, Any]:
        """The instance's values of the searched parameters (what its Optuna trial records)."""
        d = self.instances[row].param_dict
        return {n: d.get(n, MISSING) for n in self._names}

    def row_of(self, instance_id: str) -> int | None:
        if self._by_id is None:
            self._by_id = {inst.id: i for i, inst in enumerate(self.instances)}
        return self._by_id.get(instance_id)

    def take(self, row: int) -> None:
        self.free[row] = False

    def nearest(self, proposal: Mapping[str, Any]) -> int | None:
        """The row of the free instance nearest to `proposal` (None when every instance was taken)."""
        if not self.free.any():
            return None
        d = np.zeros(len(self.instances), dtype=np.float32)
        for j, name in enumerate(self._names):
            coord = self._coord[name]
            col = self._x[:, j]
            if isinstance(coord, dict):
                code = coord.get(proposal.get(name), -1)
                d += col != code
            else:
                lo, span, log = coord
                v = float(proposal[name])
                x = ((math.log(v) if log else v) - lo) / span
                d += np.abs(col - np.float32(x))
        d[~self.free] = np.inf
        return int(np.argmin(d))

    def take_nearest(self, proposal: Mapping[str, Any]) -> int | None:
        row = self.nearest(proposal)
        if row is not None:
            self.take(row)
        return row
