"""Run a Kernel Tuner-style script in a fresh Python process (a user's script's own start: the one-import switch,
the prewarm at import) and read the JSON its last line prints."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.support.harness import checkout_env

ROOT = Path(__file__).resolve().parents[2]


def run_switched(code: str, *args: str, tmp_path: Path) -> Any:
    """`python -c code *args` in `tmp_path` with a fresh compile cache and the prewarm on; the last stdout line
    parsed as JSON (the process must exit 0)."""
    env = checkout_env(AUTOTUNE_COMPILE_CACHE=str(tmp_path / "compile"), AUTOTUNE_PREWARM="1")
    proc = subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, env=env, timeout=300, cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])
