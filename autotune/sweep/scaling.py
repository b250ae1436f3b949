"""A scaling model of a sweep over P GPUs and K compile nodes. Pure: numbers in, numbers out.

A sweep is a pipeline of three stages that overlap: compiling (CPU cores), timing (GPUs) and recording (the client,
the only database writer). Each stage's total work comes from a sweep database (`Split`, read by
`scripts/scaling_model.py`):

- `compile_cpu_s`: the summed compile seconds of the sweep's kernels (`measurements.compile_s`: the NVRTC wall time
  of a kernel's compile call divided by the kernels compiled together), spread over every compiling core;
- `gpu_s_per_pair`: the GPU's seconds per (instance, point) pair, everything included (data, launches, the timed
  repetitions, verification), spread over the GPUs;
- `record_s_per_pair`: the client's seconds per recorded pair, never spread (one writer);
- `chunk_s`: the fixed cost of one Dask chunk on its GPU (round trip, the executor's start of a run);
- `start_s`: from the sweep's start to its first measurement (planning, baselines, the first compiles).

One process (no Dask) records between measurements: wall = start + max(compile / cores, pairs x (gpu + record)).
Through Dask the client records while the GPUs measure: wall = start + max(compile / cores, pairs x gpu / P +
chunks x chunk_s / P, pairs x record) + the last chunk's records (the pipeline's drain). So the speed-up is capped by
the compile cores and by the single writer: at most gpu / record, whatever P.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, replace


@dataclass(frozen=True)
class Split:
    """A sweep's work, per stage (see the module docstring)."""

    pairs: int
    kernels: int
    compile_cpu_s: float  # summed over the kernels; 0 when every kernel was in the compile cache
    gpu_s_per_pair: float
    record_s_per_pair: float
    start_s: float
    chunk_s: float = 0.0

    def scaled(self, pairs: int) -> "Split":
        """The same kernels' split for a sweep of `pairs` pairs (kernels and compile seconds in proportion)."""
        f = pairs / self.pairs if self.pairs else 0.0
        return replace(self, pairs=pairs, kernels=round(self.kernels * f), compile_cpu_s=self.compile_cpu_s * f)


@dataclass(frozen=True)
class Cluster:
    """Where the sweep runs: `gpus` GPUs on hosts of `host_cores` cores, `compile_nodes` CPU nodes of `node_cores`
    cores that compile ahead (0: each GPU host compiles for its GPUs). `dask`: False for the one-process sweep.
    `chunks_per_gpu`: chunks each GPU gets of each of the sweep's `batches` (the runner's batches)."""

    gpus: int = 1
    compile_nodes: int = 0
    host_cores: int = 16
    node_cores: int = 16
    gpus_per_host: int = 1
    dask: bool = True
    batches: int = 1
    chunks_per_gpu: int = 2

    @property
    def compile_cores(self) -> int:
        if self.compile_nodes > 0:
            return self.compile_nodes * self.node_cores
        hosts = math.ceil(self.gpus / max(1, self.gpus_per_host))
        return max(1, hosts * self.host_cores - (self.gpus if self.dask else 1))  # a core per GPU process

    @property
    def chunks(self) -> int:
        return self.batches * self.chunks_per_gpu * self.gpus


@dataclass(frozen=True)
class Prediction:
    wall_s: float
    compile_s: float  # the compile stage alone
    gpu_s: float  # the timing stage alone (per GPU)
    record_s: float  # the client's recording alone
    bound: str  # the stage that sets the pace: "compile", "gpu" or "record"


def predict(split: Split, cluster: Cluster) -> Prediction:
    """The wall time of `split` on `cluster` (module docstring). A cold sweep (compile seconds above 0) also waits
    for its pipeline to fill: one kernel's compile before the first timing (one process), before each chunk's first
    timing where each GPU worker compiles its own chunks (no compile nodes: every chunk starts its compile pipeline
    anew), or the first chunk's compile on a compile node's cores (compiling ahead: later chunks compile while
    earlier ones are timed)."""
    compile_s = split.compile_cpu_s / cluster.compile_cores
    record_s = split.pairs * split.record_s_per_pair
    kernel_s = split.compile_cpu_s / split.kernels if split.kernels and split.compile_cpu_s > 0 else 0.0
    if not cluster.dask:
        gpu_s = split.pairs * split.gpu_s_per_pair
        stages = {"compile": compile_s, "gpu": gpu_s + record_s}
        bound = max(stages, key=lambda k: stages[k])
        return Prediction(split.start_s + kernel_s + stages[bound], compile_s, gpu_s, record_s, bound)
    chunks = max(1, cluster.chunks)
    per_chunk = split.chunk_s + (kernel_s if cluster.compile_nodes == 0 else 0.0)
    gpu_s = (split.pairs * split.gpu_s_per_pair + chunks * per_chunk) / cluster.gpus
    stages = {"compile": compile_s, "gpu": gpu_s, "record": record_s}
    bound = max(stages, key=lambda k: stages[k])
    drain = record_s / chunks  # the last chunk's records come after the GPUs are done
    fill = 0.0
    if cluster.compile_nodes > 0 and kernel_s > 0:
        chunk_kernels = max(1.0, split.kernels / chunks)
        fill = chunk_kernels * kernel_s / min(float(cluster.node_cores), chunk_kernels)
    return Prediction(split.start_s + fill + stages[bound] + drain, compile_s, gpu_s, record_s, bound)


def fit_gpu_s_per_pair(wall_s: float, start_s: float, pairs: int, record_s_per_pair: float) -> float:
    """A one-process sweep's GPU seconds per pair, from its wall time (timing-bound: kernels in the cache):
    wall = start + pairs x (gpu + record)."""
    return max(0.0, (wall_s - start_s) / max(1, pairs) - record_s_per_pair)


def fit_chunk_s(split: Split, cluster: Cluster, wall_s: float) -> float:
    """The per-chunk cost that makes `predict` give `wall_s` for a measured Dask sweep (never below 0)."""
    without = predict(replace(split, chunk_s=0.0), cluster)
    if without.bound != "gpu" or cluster.chunks == 0:
        return 0.0
    return max(0.0, (wall_s - without.wall_s) * cluster.gpus / cluster.chunks)


def record_s_per_pair(times_s: list[float]) -> float:
    """The client's seconds per recorded pair, from the recording times of a Dask sweep's measurements (sorted or
    not): the median gap between consecutive records within a chunk's burst (gaps over 50 ms are between chunks)."""
    t = sorted(times_s)
    gaps = sorted(b - a for a, b in itertools.pairwise(t) if 0 <= b - a < 0.05)
    return gaps[len(gaps) // 2] if gaps else 0.0


def speedups(split: Split, gpus: list[int], nodes: list[int], base: Cluster) -> dict[tuple[int, int], float]:
    """(GPUs, compile nodes) -> the speed-up over the one-process sweep on one GPU of `base`'s host."""
    one = predict(split, replace(base, gpus=1, compile_nodes=0, dask=False)).wall_s
    return {
        (p, k): one / predict(split, replace(base, gpus=p, compile_nodes=k, dask=True)).wall_s
        for p in gpus
        for k in nodes
    }
