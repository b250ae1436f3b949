#!/usr/bin/env python3
"""Summarize the profiles of scripts/pyprofile/sitecustomize.py: for the run's process (the one that called
tune_kernel or run_sweep) and its GPU worker (gpu_main), the functions by cumulative time, and the worker's time
spent waiting for requests (its idle time, while the run's process records results and plans).

    python3 scripts/pyprofile/summary.py DIR [--top N]"""

from __future__ import annotations

import argparse
import io
import pstats
import sys
from pathlib import Path


def role(stats: pstats.Stats) -> str | None:
    names = {fn[2] for fn in stats.stats}  # type: ignore[attr-defined]
    if "gpu_main" in names:
        return "GPU worker"
    if "run_sweep" in names or "tune_kernel" in names:
        return "run"
    return None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("folder", type=Path)
    ap.add_argument("--top", type=int, default=30, help="functions listed per process (default 30)")
    a = ap.parse_args(argv)
    files = sorted(a.folder.glob("p*.prof"))
    if not files:
        print(f"no p*.prof in {a.folder}: was AUTOTUNE_DEVPROF set and scripts/pyprofile first on PYTHONPATH?")
        return 1
    for f in files:
        stats = pstats.Stats(str(f))
        what = role(stats)
        if what is None:
            continue
        raw = stats.stats  # type: ignore[attr-defined]
        total = max(v[3] for v in raw.values())
        print(f"==== {f.name}: {what}, {total:.2f} s")
        if what == "GPU worker":
            waiting = sum(v[3] for fn, v in raw.items() if fn[2] == "recv" and "connection.py" in fn[0])
            print(f"waiting for requests (Connection.recv): {waiting:.2f} s")
        out = io.StringIO()
        stats.stream = out  # type: ignore[attr-defined]
        stats.sort_stats("cumulative").print_stats(a.top)
        print("\n".join(line for line in out.getvalue().splitlines()[6:] if line.strip()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
