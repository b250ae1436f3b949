"""Trim Kernel Tuner cache files for committing: drop each entry's per-repetition `times` list and its `timestamp`,
and keep every other number to 6 significant digits.

    python scripts/trim_kt_cache.py OUT_DIR CACHE.json[.gz] ...

Writes OUT_DIR/<parent folder>_<file name>.json.gz (gzip, level 9). The trimmed cache is still a Kernel Tuner cache
(`time` is what Kernel Tuner's simulation mode and `autotune import kerneltuner` read); the repetitions and time stamps are
what made the benchmark hub's files large. Used for results/bench/hub/ (PROVENANCE.md there).
"""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path


def trim(src: Path, out_dir: Path) -> Path:
    opener = gzip.open if src.suffix == ".gz" else open
    with opener(src, "rt", encoding="utf-8") as f:
        data = json.load(f)
    for entry in data.get("cache", {}).values():
        if isinstance(entry, dict):
            entry.pop("times", None)
            entry.pop("timestamp", None)
            for key, value in entry.items():
                if isinstance(value, float):
                    entry[key] = float(f"{value:.6g}")
    name = src.name.removesuffix(".gz").removesuffix(".json")
    out = out_dir / f"{src.parent.name}_{name}.json.gz"
    with gzip.open(out, "wt", encoding="utf-8", compresslevel=9) as f:
        json.dump(data, f, separators=(",", ":"))
    return out


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    out_dir = Path(argv[0])
    out_dir.mkdir(parents=True, exist_ok=True)
    for arg in argv[1:]:
        out = trim(Path(arg), out_dir)
        print(f"{arg} -> {out} ({out.stat().st_size:,} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
