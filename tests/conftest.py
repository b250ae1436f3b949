"""Test tiers: unit (everywhere), nvcc (where nvcc is), gpu (where CuPy sees a GPU).

Under pytest-xdist (`-n N --dist loadgroup`, what scripts/test.sh passes), the tests that use the PostgreSQL
server run in one worker, one after another: some restart or stop the server (tests/test_faults.py), which must
not cut another test's connection (tests/test_faults.py, whose fake GPU workers run under 1 s watchdogs, joins
that worker too, so that two of its sweeps never compete for the cores); and the GPU tests share one GPU. The modules of
ONE_WORKER build an expensive module-scoped input (a committed database loaded and its tables built, a replayed sweep,
a dask cluster): each keeps to one worker, which builds it once instead of once per worker."""

from __future__ import annotations

import contextlib
import os
import shutil

import pytest

# `import autotune.kernel_tuner` starts a GPU backend in the background (kt_prewarm): not in the test process, where
# an unused one would hold compile processes and a CUDA context through other tests (tests that want it say so)
os.environ.setdefault("AUTOTUNE_PREWARM", "0")


@contextlib.contextmanager
def _spaces_restored():
    from autotune.space import spec

    before = dict(spec.STORED)
    yield
    spec.STORED.clear()
    spec.STORED.update(before)


@pytest.fixture(autouse=True, scope="module")
def _module_leaves_the_spaces():
    """The spaces a database recorded (`autotune.space.spec.STORED`, process-global, set by an in-process `analyze`
    or `report`) stay with the module or test that pointed the loader at them: a later test in the same process
    must load the work tree's (an older hgemm_flat_tc without CDIRECT reached an nvcc test under xdist)."""
    with _spaces_restored():
        yield


@pytest.fixture(autouse=True)
def _test_leaves_the_spaces():
    with _spaces_restored():
        yield


# module -> what its module-scoped fixtures build (seconds on one core, measured in the full suite)
# The kernel families' and the examples' build checks (instances through nvcc and ptxas for their target: about
# four CPU-minutes). CI (.ci/run) sets AUTOTUNE_SKIP_KERNEL_BUILD=1 to keep under its time limit: a kernel lands only after
# its GPU run, and scripts/gpu_tier.sh runs these files there (nvcc is on the GPU machine).
KERNEL_BUILD = ("test_kernels_compile_", "test_examples_compile.py")  # file names start with these
ONE_WORKER = {
    "test_dispatch_committed.py": "five committed databases loaded and their tables built (about 20 s)",
    "test_tables6_neighbours.py": "the committed softmax database with a validation replayed into it (about 5 s)",
    "test_dask_backend.py": "a local dask cluster and the recorded transpose sweep (about 5 s)",
    "test_validate_kinds.py": "the stencil recording and its report (about 3 s)",
    "test_validate.py": "a replayed sweep and its table (about 2.5 s)",
}


def _have_gpu() -> bool:
    try:
        import cupy

        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:
        return False


@pytest.hookimpl(tryfirst=True)  # before xdist's, which reads the groups (a conftest of the arguments loads first)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    gpu = None
    nvcc = shutil.which("nvcc") is not None
    for item in items:
        fixtures = getattr(item, "fixturenames", ())
        callspec = getattr(item, "callspec", None)
        if "fresh_pg_url" in fixtures or (callspec is not None and callspec.params.get("db_url") == "postgresql"):
            item.add_marker(pytest.mark.xdist_group("postgresql"))
        if "gpu" in item.keywords:
            item.add_marker(pytest.mark.xdist_group("gpu"))
        if item.path.name == "test_faults.py":  # watchdogs of 1 s over spawned workers: one at a time
            item.add_marker(pytest.mark.xdist_group("postgresql"))
        if item.path.name in ONE_WORKER and item.get_closest_marker("xdist_group") is None:
            item.add_marker(pytest.mark.xdist_group(item.path.stem))  # (the PostgreSQL ones stay in theirs)
        if "gpu" in item.keywords:
            if gpu is None:
                gpu = _have_gpu()
            if not gpu:
                item.add_marker(pytest.mark.skip(reason="no CUDA GPU visible to CuPy"))
        if "nvcc" in item.keywords and not nvcc:
            item.add_marker(pytest.mark.skip(reason="nvcc not found"))
        if item.path.name.startswith(KERNEL_BUILD) and os.environ.get("AUTOTUNE_SKIP_KERNEL_BUILD") == "1":
            item.add_marker(
                pytest.mark.skip(reason="kernel builds: run by scripts/gpu_tier.sh (AUTOTUNE_SKIP_KERNEL_BUILD=1)")
            )
