"""`kernel: compiler: nvcc`: real nvcc compiles of a CUB kernel that NVRTC rejects, to sm_90
cubins, with the lowered names read from the cubin (templates, C++ and extern "C" names), the compile cache
keyed by the compiler, and errors pinned on the instance that caused them. No GPU needed.

An nvcc compile of the CUB kernel costs ~3 CPU-seconds (its headers); the tests of what does not depend on the
source (an error pinned on its instance, the compile pool running nvcc) compile TINY, the same kernels without CUB
(~0.3 s each)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from autotune.sweep.compile.nvrtc import CompileRequest, cache_key, compile_batch, option_include_dirs
from autotune.sweep.compile.nvcc import elf_symbols, ref_targets, wrapper_text

CUB_SPACE = Path(__file__).parent / "data" / "cub_space"
FLOAT = "autotune_test::block_sum<float, 128>"
DOUBLE = "autotune_test::block_sum<double, 64>"


# The kernels of tests/data/cub_space/cub_block_sum.cu (same names and arguments) without CUB: a loop sums the block
TINY = """\
#ifndef ITEMS
#define ITEMS 1
#endif
namespace autotune_test {
template <typename T, int BLOCK>
__global__ void block_sum(const T* in, T* out, int n)
{
    T v = T(0);
    for (int i = 0; i < ITEMS * BLOCK; i++) {
        const int idx = blockIdx.x * ITEMS * BLOCK + i;
        v += idx < n ? in[idx] : T(0);
    }
    if (threadIdx.x == 0) {
        out[blockIdx.x] = v;
    }
}
template <typename T, int BLOCK>
__global__ void block_sum_atomic(const T* in, T* out, int n)
{
    const int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx < n) {
        atomicAdd(out, in[idx]);
    }
}
}  // namespace autotune_test
extern "C" __global__ void plain_fill(float* out, int n)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        out[i] = 1.0f;
    }
}
"""


def tiny_source(folder: Path) -> Path:
    path = folder / "tiny_block_sum.cu"
    path.write_text(TINY)
    return path


def request(
    names: tuple[str, ...],
    defines: tuple[tuple[str, str], ...] = (),
    extra: tuple[str, ...] = (),
    source: Path = CUB_SPACE / "cub_block_sum.cu",
):
    return CompileRequest(
        source,
        names,
        90,
        options=("-std=c++17", *extra, *[f"-D{k}={v}" for k, v in defines]),
        defines=defines,
        compiler="nvcc",
    )


@pytest.mark.nvcc
def test_a_cub_kernel_compiles_and_every_name_maps_to_its_own_symbol(tmp_path: Path) -> None:
    out = compile_batch(request((DOUBLE, "plain_fill", FLOAT)), tmp_path)
    assert [ck.ok for ck in out] == [True, True, True], out[0].log
    by = {ck.name_expression: ck for ck in out}
    assert by["plain_fill"].lowered_name == "plain_fill"
    assert by[FLOAT].lowered_name.startswith("_ZN13autotune_test9block_sumIfLi128EEEv")
    assert by[DOUBLE].lowered_name.startswith("_ZN13autotune_test9block_sumIdLi64EEEv")
    assert len({ck.blob for ck in out}) == 1 and out[0].binary_kind == "cubin"
    data = out[0].blob.read_bytes()
    assert {ck.lowered_name for ck in out} <= elf_symbols(data)
    assert set(ref_targets(data).values()) == {ck.lowered_name for ck in out}
    again = compile_batch(request((FLOAT,)), tmp_path)  # a cache hit, whatever the batching was
    assert again[0].cached and again[0].lowered_name == by[FLOAT].lowered_name


@pytest.mark.nvcc
def test_an_error_is_pinned_on_its_instance_and_cached(tmp_path: Path) -> None:
    """(On TINY: the batch's failure, each name compiled alone, and the cached error do not depend on CUB.)"""
    src = tiny_source(tmp_path)
    missing = "autotune_test::no_such_kernel<float, 32>"
    out = compile_batch(request((FLOAT, missing), (("ITEMS", "2"),), source=src), tmp_path)
    assert out[0].ok and not out[1].ok
    assert str(out[0].lowered_name).startswith("_ZN13autotune_test9block_sumIfLi128EEEv")
    assert "error" in out[1].log and "no_such_kernel" in out[1].log
    again = compile_batch(request((missing,), (("ITEMS", "2"),), source=src), tmp_path)
    assert again[0].cached and not again[0].ok


def test_cache_keys_tell_the_compilers_and_their_versions_apart() -> None:
    base = dict(
        digest="d" * 64,
        options=("-std=c++17", "-arch=sm_90"),
        arch=90,
        nvrtc_version=(13, 0),
        cuda_include="/usr/local/cuda/include",
        name_expression="k<1>",
    )
    nvrtc = cache_key(**base)
    assert cache_key(**base, compiler="nvrtc") == nvrtc  # NVRTC's keys (existing caches) are unchanged
    a = cache_key(**base, compiler="nvcc release 13.0, V13.0.88 /usr/local/cuda-13.0/bin/nvcc")
    b = cache_key(**base, compiler="nvcc release 12.8, V12.8.93 /usr/local/cuda-12.8/bin/nvcc")
    assert len({nvrtc, a, b}) == 3
    opts = dict(base, options=("-std=c++17", "--use_fast_math", "-arch=sm_90"))
    assert cache_key(**opts, compiler="x") != cache_key(**base, compiler="x")


def test_include_options_count_in_the_source_digest() -> None:
    assert option_include_dirs(("-O3", "-I/a/b", "--include-path=/c", "-I")) == (Path("/a/b"), Path("/c"))


def test_the_wrapper_takes_each_kernels_address() -> None:
    text = wrapper_text(CUB_SPACE / "cub_block_sum.cu", (FLOAT, "plain_fill"))
    assert f'#include "{(CUB_SPACE / "cub_block_sum.cu").resolve()}"' in text
    assert f"__autotune_ref_0 = &{FLOAT};" in text and "__autotune_ref_1 = &plain_fill;" in text


def test_ref_targets_rejects_what_is_not_a_cubin() -> None:
    with pytest.raises(ValueError):
        ref_targets(b"not an elf file")


@pytest.mark.nvcc
def test_nvcc_is_found() -> None:
    from autotune.sweep.compile.nvcc import find_nvcc, nvcc_identity

    tool = find_nvcc()
    assert tool is not None and shutil.which("nvcc") is not None
    assert nvcc_identity(tool).startswith("nvcc release ")


# ---- the space's `kernel: compiler:` and `compiler_options:` --------------------------------------------------

SPACE = """\
name: cub_sum
problem:
  name: block_sum
  sizes: [n]
  arguments:
    - {name: inp, buffer: float32, shape: [n]}
    - {name: out, buffer: float32, shape: ["ceil(n / 128)"], output: true}
    - {name: n, scalar: int32, value: n}
  reference: ref.py:block_sum
  bytes: "n * elem_bytes"
kernel:
  source: cub_block_sum.cu
  name: plain_fill
  block: [128]
  grid: ["ceil(n / 128)"]
EXTRA
parameters:
  ITEMS: [1, 2]
"""


def space_file(tmp_path: Path, extra: str) -> Path:
    shutil.copy(CUB_SPACE / "cub_block_sum.cu", tmp_path / "cub_block_sum.cu")
    (tmp_path / "ref.py").write_text("def block_sum(arrays, sizes):\n    return arrays['out']\n")
    path = tmp_path / "space.yaml"
    path.write_text(SPACE.replace("EXTRA", extra))
    return path


def test_compiler_and_its_options_are_read(tmp_path: Path) -> None:
    from autotune.space.spec import load_space

    plain = load_space(space_file(tmp_path, ""))
    assert plain.kernel.compiler == "nvrtc" and plain.kernel.compiler_options == ()
    space = load_space(
        space_file(tmp_path, '  compiler: nvcc\n  compiler_options: ["-O3", "--use_fast_math", "-maxrregcount=64"]')
    )
    assert space.kernel.compiler == "nvcc"
    assert space.kernel.compiler_options == ("-O3", "--use_fast_math", "-maxrregcount=64")


@pytest.mark.parametrize(
    "extra, message",
    [
        ("  compiler: gcc", "'gcc' is not a compiler"),
        ('  compiler_options: ["-o", "x.cubin"]', "'-o' cannot be used"),
        ('  compiler_options: ["--ptx"]', "'--ptx' cannot be used"),
        ('  compiler_options: ["-c"]', "'-c' cannot be used"),
        ('  compiler_options: ["-arch=sm_80"]', "'-arch=sm_80' cannot be used"),
        ('  compiler_options: ["-rdc=true"]', "'-rdc=true' cannot be used"),
        ("  compiler_options: -O3", "must be a list of flags"),
    ],
)
def test_flags_that_would_break_loading_are_refused_with_the_line(tmp_path: Path, extra: str, message: str) -> None:
    from autotune.errors import SpaceError
    from autotune.space.spec import load_space

    with pytest.raises(SpaceError) as err:
        load_space(space_file(tmp_path, extra))
    assert message in err.value.message and err.value.line == 16, (err.value.message, err.value.line)


def test_the_backend_passes_the_spaces_compiler_and_options_on(tmp_path: Path) -> None:
    from autotune.space.generator import generate
    from autotune.devices import get_device
    from autotune.space.spec import load_space
    from autotune.sweep.backends.base import Job
    from autotune.sweep.backends.local import GpuBackend, LocalOptions, task_of

    space = load_space(space_file(tmp_path, '  compiler: nvcc\n  compiler_options: ["--use_fast_math"]'))
    insts = generate(space, get_device("H100"), "fp32").instances()
    point = space.kind.point("fp32", "", {"n": 1000})
    tasks = [task_of(Job(space, i, (point,))) for i in insts]
    reqs = GpuBackend(LocalOptions(cache_dir=tmp_path))._requests(tasks, 90)
    assert len(reqs) == 2 and {r.compiler for r in reqs} == {"nvcc"}
    assert all(r.options[:2] == ("-std=c++17", "--use_fast_math") and r.options[2].startswith("-DITEMS=") for r in reqs)


@pytest.mark.nvcc
def test_the_gpu_tiers_cub_space_compiles_every_instance_with_nvcc(tmp_path: Path) -> None:
    """tests/gpu/test_nvcc_sweep.py sweeps this space on a GPU; here each of its requests compiles (sm_90)."""
    from autotune.devices import get_device
    from autotune.space.generator import generate
    from autotune.space.spec import load_space
    from autotune.sweep.backends.base import Job
    from autotune.sweep.backends.local import GpuBackend, LocalOptions, task_of

    space = load_space(Path(__file__).parent / "data" / "cub_space" / "space.yaml")
    insts = generate(space, get_device("H100"), "fp32").instances()
    point = space.kind.point("fp32", "", {"n": 100003})
    tasks = [task_of(Job(space, i, (point,))) for i in insts]
    reqs = GpuBackend(LocalOptions(cache_dir=tmp_path))._requests(tasks, 90)
    assert len(insts) == 6 and len(reqs) == 2  # one request per ITEMS value, three BLOCK values in each
    for req in reqs:
        out = compile_batch(req, tmp_path)
        assert all(ck.ok for ck in out), out[0].log
        assert all("block_sum_atomic" in ck.lowered_name for ck in out)
        assert len({ck.lowered_name for ck in out}) == 3


@pytest.mark.nvcc
def test_a_sweep_compiles_with_nvcc_in_the_real_compile_pool(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The real GpuBackend (spawned compile processes running nvcc) against the fake GPU worker: every pair reaches
    the GPU side with a cubin and the kernel's lowered name. (The space of tests/data/cub_space on TINY, its kernels
    without CUB: the test_the_gpu_tiers_cub_space_... above compiles the CUB ones.)"""
    import functools
    import textwrap

    from autotune.store.store import Store
    from autotune.sweep.backends import local
    from autotune.sweep.config import parse_config
    from autotune.sweep.runner import run_sweep
    from tests.support.fake_gpu_worker import fake_gpu_main

    space = tmp_path / "space" / "space.yaml"
    space.parent.mkdir()
    shutil.copy(CUB_SPACE / "reference.py", space.parent / "reference.py")
    tiny_source(space.parent)
    yaml = (CUB_SPACE / "space.yaml").read_text()
    assert "source: cub_block_sum.cu" in yaml
    space.write_text(yaml.replace("source: cub_block_sum.cu", "source: tiny_block_sum.cu"))
    seen = tmp_path / "seen.txt"
    monkeypatch.setattr(local, "gpu_main", functools.partial(fake_gpu_main, faults={}, trace=str(tmp_path / "t.txt")))
    real_start = local.GpuBackend._start  # where each compiled pair is sent to the GPU worker

    def start(self, task, v, ck):  # type: ignore[no-untyped-def]
        with seen.open("a") as f:
            f.write(f"{ck.ok} {ck.binary_kind} {ck.lowered_name} {ck.blob}\n")
        return real_start(self, task, v, ck)

    monkeypatch.setattr(local.GpuBackend, "_start", start)
    cfg = parse_config(
        textwrap.dedent(f"""\
        name: cub
        spaces: [{{space: {space}, max_instances: 2}}]
        points: [{{sizes: {{n: [1000, 5000]}}}}]
        strategy: random
        repetitions: 3
        database: sqlite:///{tmp_path / "db.sqlite"}
        """),
        file=tmp_path / "cub.yaml",
    )

    class Quiet:
        def start(self, total: int, done: int) -> None: ...
        def measured(self, m, best) -> None: ...  # noqa: ANN001
        def note(self, text: str) -> None: ...

    with local.GpuBackend(local.LocalOptions(compile_workers=2, cache_dir=tmp_path / "cache")) as backend:
        with Store.open(cfg.database) as store:
            summary = run_sweep(cfg, store, backend, Quiet())
    assert summary.counts == {"ok": 4}, summary.counts
    lines = [line.split() for line in seen.read_text().splitlines()]
    assert len(lines) == 4 and all(
        ok == "True" and kind == "cubin" and "block_sum_atomic" in name and Path(blob).is_file()
        for ok, kind, name, blob in lines
    )
