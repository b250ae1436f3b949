"""scripts/profile_ncu.sh refuses bad input before it needs a GPU or ncu."""

from __future__ import annotations

import subprocess

from autotune.paths import ROOT

SCRIPT = ROOT / "scripts" / "profile_ncu.sh"


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True, cwd=ROOT, timeout=60)


def test_usage_without_configs() -> None:
    r = run()
    assert r.returncode == 2 and "usage:" in r.stderr


def test_missing_config_file_is_named() -> None:
    r = run("configs/profile/no_such_config.yaml")
    assert r.returncode == 2 and "no config file configs/profile/no_such_config.yaml" in r.stderr
