"""The worker groups of tests/conftest.py reach pytest-xdist (`--dist loadgroup`, what scripts/test.sh passes): xdist
reads the `xdist_group` marks in its own collection hook, which ran before the conftest's added them, so that no group
was ever formed (the PostgreSQL tests and tests/test_faults.py ran on both workers at once)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from autotune.paths import ROOT

pytest.importorskip("xdist")


def test_the_groups_of_the_conftest_reach_xdist() -> None:
    ids = [
        "tests/test_validate_kinds.py::test_gemm_keeps_its_columns_and_batch_rule",  # a module of ONE_WORKER
        "tests/test_query.py::test_select_returns_a_frame[postgresql]",  # skipped: no server
    ]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "AUTOTUNE_TEST_PG"))}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-n", "1", "--dist", "loadgroup", "-v", "-p", "no:cacheprovider", *ids],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert f"{ids[0]}@test_validate_kinds " in done.stdout, done.stdout[-3000:]
    assert f"{ids[1]}@postgresql " in done.stdout, done.stdout[-3000:]
