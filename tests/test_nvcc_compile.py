"""`kernel: compiler: nvcc` (issue 31, item 3): real nvcc compiles of a CUB kernel that NVRTC rejects, to sm_90
cubins, with the lowered names read from the cubin (templates, C++ and extern "C" names), the compile cache
keyed by the compiler, and errors pinned on the instance that caused them. No GPU needed."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from autotune.sweep.compile import CompileRequest, cache_key, compile_batch, option_include_dirs
from autotune.sweep.nvcc import elf_symbols, ref_targets, wrapper_text

KERNELS = Path(__file__).parent / "data" / "kernels"
FLOAT = "autotune_test::block_sum<float, 128>"
DOUBLE = "autotune_test::block_sum<double, 64>"


def request(names: tuple[str, ...], defines: tuple[tuple[str, str], ...] = (), extra: tuple[str, ...] = ()):
    return CompileRequest(KERNELS / "cub_block_sum.cu", names, 90,
                          options=("-std=c++17", *extra, *[f"-D{k}={v}" for k, v in defines]),
                          defines=defines, compiler="nvcc")


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
    missing = "autotune_test::no_such_kernel<float, 32>"
    out = compile_batch(request((FLOAT, missing), (("ITEMS", "2"),)), tmp_path)
    assert out[0].ok and not out[1].ok
    assert "error" in out[1].log and "no_such_kernel" in out[1].log
    again = compile_batch(request((missing,), (("ITEMS", "2"),)), tmp_path)
    assert again[0].cached and not again[0].ok


def test_cache_keys_tell_the_compilers_and_their_versions_apart() -> None:
    base = dict(digest="d" * 64, options=("-std=c++17", "-arch=sm_90"), arch=90, nvrtc_version=(13, 0),
                cuda_include="/usr/local/cuda/include", name_expression="k<1>")
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
    text = wrapper_text(KERNELS / "cub_block_sum.cu", (FLOAT, "plain_fill"))
    assert f'#include "{(KERNELS / "cub_block_sum.cu").resolve()}"' in text
    assert f"__autotune_ref_0 = &{FLOAT};" in text and "__autotune_ref_1 = &plain_fill;" in text


def test_ref_targets_rejects_what_is_not_a_cubin() -> None:
    with pytest.raises(ValueError):
        ref_targets(b"not an elf file")


@pytest.mark.nvcc
def test_nvcc_is_found() -> None:
    from autotune.sweep.nvcc import find_nvcc, nvcc_identity
    tool = find_nvcc()
    assert tool is not None and shutil.which("nvcc") is not None
    assert nvcc_identity(tool).startswith("nvcc release ")
