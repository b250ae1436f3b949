"""`kernel: arch_specific: true`: a space asks for the architecture-specific target (`-arch=sm_90a`, the only one with
wgmma). The option strings NVRTC and nvcc get, the space key's checks, the compile requests the sweep builds (the
flag travels with the wgmma family's instances only), real nvcc compiles (sm_90a builds the wgmma kernel, sm_90 is
refused by ptxas, a GPU below sm_90 fails each instance with a clear log) and the cache keys: apart for sm_90a,
byte for byte those of before for every other space. No GPU needed."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from autotune import paths
from autotune.errors import SpaceError
from autotune.problems.gemm import gemm_point
from autotune.space.instance import Instance
from autotune.space.spec import load_space
from autotune.sweep.backends.base import Job
from autotune.sweep.backends.local import GpuBackend, LocalOptions, task_of
from autotune.sweep.compile.cache import cache_key, local_headers, source_digest
from autotune.sweep.compile.nvcc import find_nvcc, nvcc_identity
from autotune.sweep.compile.nvrtc import DEFAULT_OPTIONS, CompileRequest, arch_option, compile_batch, specific_target

WGMMA = "autotune::hgemm_wgmma_tc<0, 0, 64, 64, 32, 3, 1, 0, 0>"
SRC = paths.KERNELS_DIR / "hgemm_wgmma_tc.cuh"


def test_nvrtc_option_strings() -> None:
    assert arch_option(90, (80, 86, 89, 90), True) == ("-arch=sm_90a", "cubin")
    assert arch_option(90, (), True) == ("-arch=sm_90a", "cubin")  # NVRTC that cannot list its architectures
    assert arch_option(90, (80, 86, 89, 90)) == ("-arch=sm_90", "cubin")  # unchanged without the flag
    assert arch_option(100, (80, 90)) == ("-arch=compute_90", "ptx")
    with pytest.raises(ValueError, match="runs only on the architecture"):  # no PTX fallback for sm_XXa code
        arch_option(100, (80, 90), True)
    with pytest.raises(ValueError, match="no architecture-specific target"):
        arch_option(80, (80, 90), True)
    assert specific_target(90) == "sm_90a" and specific_target(100) == "sm_100a"


def test_the_space_key_is_a_checked_boolean(tmp_path: Path) -> None:
    wgmma = ("hgemm_wgmma_tc", "hgemm_wgmma_flat_tc")  # the sm_90a families
    assert all(load_space(name).kernel.arch_specific is True for name in wgmma)
    others = [load_space(p.stem).kernel for p in paths.SPACES_DIR.glob("*.yaml") if p.stem not in wgmma]
    assert len(others) > 10 and not any(k.arch_specific for k in others if k is not None)
    text = (paths.SPACES_DIR / "hgemm_ring_tc.yaml").read_text()
    bad = tmp_path / "bad.yaml"
    bad.write_text(text.replace("  convention: strided\n", "  convention: strided\n  arch_specific: yes please\n"))
    with pytest.raises(SpaceError) as err:
        load_space(str(bad))
    assert "arch_specific" in str(err.value) and err.value.line is not None


def _request(space_name: str, params: dict) -> CompileRequest:
    space = load_space(space_name)
    job = Job(space, Instance.of(space.name, params), (gemm_point("fp16", "NN", 64, 64, 64, 1000),), {}, 5)
    # never started: its request builder only (as dask's compile workers)
    backend = GpuBackend(LocalOptions(compile_workers=1))
    (req,) = backend._requests([task_of(job)], 90)
    return req


def test_the_sweeps_requests_carry_the_target() -> None:
    wg = dict(BM=64, BN=64, KS=32, STAGES=3, SPAD=1, SWZ=0, CDIRECT=0, PERSIST=1)
    req = _request("hgemm_wgmma_tc", wg)
    assert req.arch_specific and req.name_expressions == (WGMMA,)
    ring = dict(BM=64, BN=64, KS=32, WM=2, WN=2, NWARPS=4, STAGES=3, VEC=16, CDIRECT=0)
    plain = _request("hgemm_ring_tc", ring)
    assert not plain.arch_specific and plain.options == DEFAULT_OPTIONS


def _key(req: CompileRequest, target: str) -> str:
    """The cache key computed as before this option existed, with the given -arch value."""
    tool = find_nvcc()
    assert tool is not None
    text = req.source.read_text()
    search = (req.source.parent, *req.include_dirs)
    digest = source_digest(text, local_headers(text, search))
    inc = str(Path(tool).resolve().parent.parent / "include")
    return cache_key(
        digest, (*req.options, f"-arch={target}"), req.arch, (0, 0), inc, req.name_expressions[0], nvcc_identity(tool)
    )


@pytest.mark.nvcc
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not found")
def test_nvcc_builds_wgmma_for_sm90a_only(tmp_path: Path) -> None:
    specific = CompileRequest(SRC, (WGMMA,), 90, (paths.KERNELS_DIR,), compiler="nvcc", arch_specific=True)
    plain = CompileRequest(SRC, (WGMMA,), 90, (paths.KERNELS_DIR,), compiler="nvcc")
    (ok,) = compile_batch(specific, tmp_path)
    assert ok.ok and ok.binary_kind == "cubin" and ok.lowered_name.startswith("_ZN8autotune14hgemm_wgmma_tc"), ok.log
    (refused,) = compile_batch(plain, tmp_path)  # what every space got before: ptxas refuses wgmma for sm_90
    assert not refused.ok and "not supported on .target 'sm_90'" in refused.log
    assert ok.key == _key(specific, "sm_90a") and refused.key == _key(plain, "sm_90")  # the old key, unchanged
    assert ok.key != refused.key
    (again,) = compile_batch(specific, tmp_path)
    assert again.cached and again.ok


@pytest.mark.nvcc
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not found")
def test_a_gpu_below_sm90_fails_each_instance_with_a_clear_log(tmp_path: Path) -> None:
    names = (WGMMA, WGMMA.replace("64, 64, 32", "64, 32, 32"))
    req = CompileRequest(SRC, names, 80, (paths.KERNELS_DIR,), compiler="nvcc", arch_specific=True)
    out = compile_batch(req, tmp_path)
    assert [ck.ok for ck in out] == [False, False]
    assert all("sm_80 has no architecture-specific target" in ck.log for ck in out)
    assert out[0].key != out[1].key  # recorded per instance (and cached: it is deterministic)
    assert all(ck.cached for ck in compile_batch(req, tmp_path))


class NvrtcStandIn:
    """NVRTC's stand-in (no NVRTC on a CPU machine; the GPU tier compiles for real): records the options of each
    build and answers a cubin naming them."""

    def __init__(self) -> None:
        self.options: list[tuple[str, ...]] = []

    def __call__(self, text: str, filename: str, names: tuple, options: tuple, kind: str) -> tuple:
        self.options.append(tuple(options))
        return b"cubin:" + repr(options).encode(), {n: f"_lowered_{n}" for n in names}, ""


def test_nvrtc_gets_sm90a_and_keys_it_apart(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from autotune.sweep.compile import nvrtc, twins

    standin = NvrtcStandIn()
    monkeypatch.setattr(nvrtc, "nvrtc_compile", standin)
    monkeypatch.setattr(nvrtc, "nvrtc_version", lambda: (13, 0))
    monkeypatch.setattr(nvrtc, "nvrtc_archs", lambda: (80, 90))
    monkeypatch.setattr(nvrtc, "cuda_include_dir", lambda: "")
    monkeypatch.setenv(twins.TWINS_ENV, "0")
    plain = CompileRequest(SRC, (WGMMA,), 90, (paths.KERNELS_DIR,))
    specific = CompileRequest(SRC, (WGMMA,), 90, (paths.KERNELS_DIR,), arch_specific=True)
    (a,) = compile_batch(plain, tmp_path)
    (b,) = compile_batch(specific, tmp_path)
    assert [o[-1] for o in standin.options] == ["-arch=sm_90", "-arch=sm_90a"]
    assert standin.options[0][:-1] == standin.options[1][:-1]  # nothing else differs
    text = SRC.read_text()
    digest = source_digest(text, local_headers(text, (SRC.parent, paths.KERNELS_DIR)))
    before = cache_key(digest, (*DEFAULT_OPTIONS, "-arch=sm_90"), 90, (13, 0), "", WGMMA)  # the formula of before
    assert a.ok and b.ok and a.key == before and b.key != before
    # a GPU this NVRTC does not know, and one below sm_90: each instance fails with the reason, nothing is built
    for arch, why in ((100, "this NVRTC knows no sm_100"), (80, "sm_80 has no architecture-specific target")):
        (c,) = compile_batch(CompileRequest(SRC, (WGMMA,), arch, (paths.KERNELS_DIR,), arch_specific=True), tmp_path)
        assert not c.ok and why in c.log
    assert len(standin.options) == 2
