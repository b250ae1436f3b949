"""`random`: a seeded sample of `budget` instances drawn without replacement (all of them, shuffled, without
a budget). A resumed sweep with the same seed draws the same sample."""

from __future__ import annotations

from typing import Sequence

import numpy as np

from autotune.space.instance import Instance
from autotune.sweep.strategies.brute import BruteForce


class RandomSample(BruteForce):
    """`budget` instances drawn without replacement (all of them without a budget), seeded."""

    def __init__(self, instances: Sequence[Instance], budget: int | None = None, seed: int = 0) -> None:
        pool = list(instances)
        order = np.random.default_rng(seed).permutation(len(pool))
        super().__init__([pool[i] for i in order], budget, seed)
