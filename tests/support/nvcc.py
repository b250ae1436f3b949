"""Compile-only checks of the kernel families with nvcc for sm_90 (no GPU needed)."""

from __future__ import annotations

import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from autotune.paths import KERNELS_DIR

SHAPES = ("NN", "NT", "TN", "TT")
# A compile-only check needs what the front end (a static_assert) and ptxas (shared memory over the limit) refuse, not
# optimised device code: unoptimised NVVM and ptxas take about a third of the CPU time (14.1 -> 5.2 s of user time
# for the tiny family's fp64 unit) and refuse the same instances.
CHECK_FLAGS = ("-Xcicc", "-O0", "-Xptxas", "-O0")


def compile_object(
    cu: Path, timeout: float = 170, target: str = "sm_90", flags: tuple[str, ...] = CHECK_FLAGS
) -> subprocess.CompletedProcess:
    """`nvcc -std=c++17 -arch=sm_90 CHECK_FLAGS -I kernels_src -c cu -o cu.o`; target "sm_90a": the
    architecture-specific target alone (`-gencode arch=compute_90a,code=sm_90a`: `-arch=sm_90a` with `-c` also embeds
    compute_90 PTX, which ptxas checks against sm_90 and refuses wgmma in)."""
    arch = [f"-gencode=arch=compute_{target[3:]},code={target}"] if target.endswith("a") else [f"-arch={target}"]
    cmd = ["nvcc", "-std=c++17", *arch, *flags, f"-I{KERNELS_DIR}", "-c", str(cu)]
    cmd += ["-o", str(cu.with_suffix(".o"))]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)


def assert_all_compile(units: list[Path]) -> None:
    """Compile the translation units two at a time (CI has 2 cores) and check each produced an object."""
    with ThreadPoolExecutor(max_workers=2) as pool:
        results = list(pool.map(compile_object, units))
    for cu, r in zip(units, results, strict=True):
        assert r.returncode == 0, f"nvcc failed on {cu.name}:\n{r.stderr[-4000:]}"
        assert cu.with_suffix(".o").stat().st_size > 0


def wgmma_log(cu: Path, header: str, names: list[str], timeout: float = 400) -> str:
    """Compile the wgmma instances `names` (name expressions) of `header` in one unit for sm_90a with ptxas -v, check
    that each compiled to an entry without a stack frame or spills and that ptxas serialised no wgmma (C7519, C7510),
    and return the log (for the caller's own checks, e.g. registers)."""
    refs = "\n".join(f"    reinterpret_cast<const void*>(&{n})," for n in names)
    cu.write_text(f'#include "{header}"\n\nconst void* wgmma_instances[] = {{\n{refs}\n}};\n')
    r = compile_object(cu, timeout=timeout, target="sm_90a", flags=("-Xptxas", "-v"))
    log = r.stderr + r.stdout
    assert r.returncode == 0, log[-4000:]
    assert log.count("Compiling entry function") == len(names), log[-4000:]
    spills = [ln.strip() for ln in log.splitlines() if "spill stores" in ln]
    assert len(spills) == len(names) and all(s.startswith("0 bytes stack frame, 0 bytes spill stores") for s in spills)
    assert "C7519" not in log and "C7510" not in log, log[-4000:]  # wgmmas not serialised by ptxas
    return log


def one_shape_each(space, instances: list[dict], precision: str, start: int = 0) -> list[tuple[dict, str]]:
    """(instance, shape) pairs that compile every instance once, not in all four shapes: instance i in shape
    (start + i) % 4, so that the shapes take turns (a family of four instances or more sees every shape; another
    `start` per precision gives an instance other shapes in other precisions), and the instance that needs the most
    shared memory (the space's smem_bytes: the resource a kernel's static_assert or ptxas refuses first) in every
    shape. What the shape changes in a kernel is its indexing (and which operand tiles are transposed), the same
    code for every instance; the GPU tier (tests/gpu) compiles and runs every instance in every shape."""
    from autotune.devices import get_device

    dev = get_device("H100")
    smem = [int(space.values(p, precision, dev)["smem_bytes"]) for p in instances]
    largest = smem.index(max(smem))
    pairs = []
    for i, p in enumerate(instances):
        shapes = SHAPES if i == largest else (SHAPES[(start + i) % len(SHAPES)],)
        pairs += [(p, s) for s in shapes]
    return pairs
