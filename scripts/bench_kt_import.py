#!/usr/bin/env python3
"""Benchmark: importing a 50,000-entry Kernel Tuner cache into a new SQLite results database (target: under
10 s). Writes the cache with autotune.interop.kerneltuner.write_cache (Kernel Tuner's exact layout), then times
`import_cache` (reading, the space written from tune_params, instances, measurements). No GPU needed.

  python scripts/bench_kt_import.py
"""

import time
import tempfile
import itertools
from pathlib import Path
from autotune.interop.kerneltuner import KTCache, KTRecord, write_cache
from autotune.interop.kt_store import import_cache
from autotune.store.store import Store

keys = ("a", "b", "c", "d")
vals = {"a": list(range(50)), "b": list(range(50)), "c": list(range(5)), "d": list(range(4))}
recs = tuple(
    KTRecord(dict(zip(keys, combo, strict=True)), "ok", 1.0 + i * 1e-6, (1.0, 1.1), {"compile_time": 3.0})
    for i, combo in enumerate(itertools.product(*vals.values()))
)
tmp = Path(tempfile.mkdtemp())
write_cache(KTCache("NVIDIA H100", "k", (4096, 4096), keys, vals, "time", recs), tmp / "c.json")
t0 = time.perf_counter()
with Store.open(str(tmp / "db.sqlite")) as st:
    got = import_cache(tmp / "c.json", st)
print(len(recs), "records imported in", round(time.perf_counter() - t0, 2), "s")
