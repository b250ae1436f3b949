"""A recorded-like GEMM sweep made up without a GPU, for tests and benchmarks of the analyzer and the tables."""

from __future__ import annotations

import numpy as np
import pandas as pd


def synthetic_measurements(
    n_instances: int,
    sizes: list[tuple[int, int, int]],
    *,
    batch: int = 1000,
    precisions: tuple[str, ...] = ("fp64",),
    shapes: tuple[str, ...] = ("NN",),
    fail_rate: float = 0.02,
    noise: float = 0.02,
    seed: int = 0,
) -> pd.DataFrame:
    """A recorded-like sweep for tests and benchmarks (no GPU): tiled kernels on a roofline.

    Each synthetic instance has tile sizes (bm, bn, bk) and an efficiency; its time at (m, n, k) is the
    memory-roofline time inflated by tile padding waste and a per-instance, per-size-class factor, plus
    log-normal noise. Some (instance, point) pairs fail. Deterministic for a given seed.
    """
    rng = np.random.default_rng(seed)
    tiles = np.array([8, 16, 32, 64, 128])
    bm, bn, bkk = (rng.choice(tiles, n_instances) for _ in range(3))
    eff = rng.uniform(0.3, 1.0, n_instances)
    affinity = rng.uniform(0.6, 1.4, (n_instances, 4))  # how well an instance likes each size class
    ids = np.array([f"syn{j:05d}" for j in range(n_instances)])
    frames = []
    for precision in precisions:
        elem = {"fp64": 8, "fp32": 4, "fp16": 2}[precision]
        for shape in shapes:
            for m, n, k in sizes:
                key = f"{precision}:{shape}:{m}x{n}x{k}:b{batch}"
                mem_ms = batch * elem * (m * k + k * n + m * n) / 3.0e12 * 1e3
                waste = (np.ceil(m / bm) * bm / m) * (np.ceil(n / bn) * bn / n) * (np.ceil(k / bkk) * bkk / k)
                cls = min(3, int(np.log2(max(m, n, k)) // 2))
                base = mem_ms * (1.0 + 0.15 * (waste - 1.0)) / eff * affinity[:, cls] + 0.002
                med = base * np.exp(rng.normal(0.0, noise, n_instances))
                spread = med * rng.uniform(0.002, 2 * noise + 0.003, n_instances)
                ok = rng.random(n_instances) >= fail_rate
                frames.append(
                    pd.DataFrame(
                        {
                            "instance_id": ids,
                            "point_key": key,
                            "precision": precision,
                            "shape": shape,
                            "m": m,
                            "n": n,
                            "k": k,
                            "batch": batch,
                            "status": np.where(ok, "ok", "wrong"),
                            "median_ms": np.where(ok, med, np.nan),
                            "p20_ms": np.where(ok, med - spread, np.nan),
                            "p80_ms": np.where(ok, med + spread, np.nan),
                        }
                    )
                )
    return pd.concat(frames, ignore_index=True)
