"""Compile kernel instances with NVRTC (CuPy's bindings), many instances per call, cached on disk.

One NVRTC program is the kernel file's text; each instance is one name expression
(`autotune::gemm_naive<double, double, 0, 0, 16, 8>`). The cache on disk is content-addressed, per instance
(`autotune.sweep.compile.cache`: its layout, keys and `CompileCache`). CuPy's own kernel cache is not used: it
does not hash included headers and cannot be shared by compile processes that hold no CUDA context.

`compile_batch` runs in a process pool (spawn) and never touches the GPU: the architecture is given. In the
sweep's pool (`autotune.sweep.compile.compile_pool`) NVRTC runs in the compile process itself and the parent kills a call
past its time limit; called anywhere else (another pool, a script), a request with a time limit compiles in a forked
child of the calling process (`with_time_limit`: ~70 ms more per compile).
A request with `compiler="nvcc"` goes through the toolkit's nvcc instead (`autotune.sweep.compile.nvcc`): the same
cache, keyed also by the compiler and nvcc's version, the same cubin loaded the same way.
"""

from __future__ import annotations

import functools
import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from autotune import untrusted
from autotune.errors import UserError
from autotune.sweep.compile import twins as tw
from autotune.sweep.compile.cache import (
    CompileCache,
    CompiledKernel,
    cache_key,
    local_headers,
    option_include_dirs,
    source_digest,
)
from autotune.sweep.compile.spawning import ignore_sigint

DEFAULT_OPTIONS: tuple[str, ...] = ("-std=c++17",)
COMPILE_CACHE_ENV = "AUTOTUNE_COMPILE_CACHE"  # a compile cache folder other than the default (a benchmark's fresh one)
# the CUDA driver's compute cache: NVRTC's cubin step (ptxas) and the driver's JIT of PTX keep their output there, so
# a program compiled before on the machine compiles again in a tenth of the time (2.70 s, then 0.21 s, on an H100
# host with CUDA 13: results/bench/PROVENANCE.md)
COMPUTE_CACHE_ENV = "CUDA_CACHE_PATH"
COMPILE_TIMEOUT_ENV = "AUTOTUNE_COMPILE_TIMEOUT"  # seconds one compiler call may take (0 or "off": no limit)
DEFAULT_COMPILE_TIMEOUT_S = 600.0
SUPERVISED_ENV = "AUTOTUNE_COMPILE_SUPERVISED"  # "1" in a `compile_pool` worker: its parent enforces the time limit
TIMEOUT_ERROR = "error: compile timeout"  # the first line of a timed-out instance's log (recorded, never cached)
SCREEN_ENV = "AUTOTUNE_COMPILE_SCREEN"  # a screening build's options (off: it changed the best on 3 of 4 kernels, and
# ranked the convolution's 1,080 configurations against the full build, Spearman -0.25: scripts/two_stage_compile.py)
SCREEN_DEFAULT = ("--Ofast-compile=max",)  # NVRTC and nvcc >= 12.8: trade the code's speed for compile time
RESOURCE_ERROR = "too much shared data"  # ptxas: "Entry function '...' uses too much shared data (0x..., 0xc000 max)"
PRECHECK_NOTE = "error: resource limit found by a fast build (--Ofast-compile=max), the full build skipped"


def resource_failure(log: str) -> bool:
    """Whether a compile log says the kernel needs more static shared memory than a block may have (a limit that
    does not depend on the optimization level: a fast build finds it as the full build would)."""
    return RESOURCE_ERROR in log


@dataclass(frozen=True)
class CompileRequest:
    """Instances of one kernel file to compile together for one GPU architecture."""

    source: Path  # kernel file, compiled as the NVRTC program text
    name_expressions: tuple[str, ...]
    arch: int  # compute capability as an integer, 90 for sm_90
    include_dirs: tuple[Path, ...] = ()  # besides the source's own folder
    options: tuple[str, ...] = DEFAULT_OPTIONS  # the -D options of `defines` included
    defines: tuple[tuple[str, str], ...] = ()  # the `#define NAME value` pairs these instances share
    compiler: str = "nvrtc"  # or "nvcc" (a space's `kernel: compiler:`)
    unroll: tuple[tuple[str, str], ...] = ()  # Kernel Tuner's loop_unroll_factor_* values (`space.kt_semantics`)
    timeout_s: float | None = None  # a compiler call running longer is killed: each instance's is a compile timeout
    precheck: bool = False  # NVRTC: a fast build first; an instance it finds over a resource limit skips the full one
    arch_specific: bool = False  # the space's `kernel: arch_specific: true`: sm_XXa (wgmma, setmaxnreg), not sm_XX


class CompileFailed(Exception):
    def __init__(self, log: str) -> None:
        super().__init__(log.strip().splitlines()[-1] if log.strip() else "NVRTC compilation failed")
        self.log = log


class CompileTimeout(CompileFailed):
    """The compiler call ran past its time limit and was killed (not deterministic: never cached)."""


def cold_cache_env(folder: Path) -> dict[str, str]:
    """Environment for a process whose compiles must all be cold (a benchmark): a fresh autotune compile cache, CuPy
    kernel cache and CUDA compute cache under `folder` (each made on first use)."""
    return {
        COMPILE_CACHE_ENV: str(folder / "autotune"),
        "CUPY_CACHE_DIR": str(folder / "cupy"),
        COMPUTE_CACHE_ENV: str(folder / "cuda"),
    }


MAX_COMPILE_TIMEOUT_S = 10**6  # a longer limit is a typo (and past what a thread's wait takes); "off" is no limit
OFF = ("0", "off", "none", "no", "false")  # the words that mean "no limit", and only they


def compile_timeout_s(value: str | None = None) -> float | None:
    """The compile time limit: `value`, else $AUTOTUNE_COMPILE_TIMEOUT, else 600 s; 0, "off" or "none": none. A
    negative, NaN or non-numeric value is a UserError naming the variable (read by autotune.untrusted): it meant no
    limit before."""
    text = value if value is not None else os.environ.get(COMPILE_TIMEOUT_ENV, "")
    if not text.strip():
        return DEFAULT_COMPILE_TIMEOUT_S
    return untrusted.number_or_off(
        text, name=COMPILE_TIMEOUT_ENV, off=OFF, lo=0.001, hi=MAX_COMPILE_TIMEOUT_S, example="600"
    )


def screen_options(value: str | None = None) -> tuple[str, ...]:
    """The options a screening build adds (`value`, else $AUTOTUNE_COMPILE_SCREEN): none when unset or "0", the
    fastest fast-compile level for "1", else the options given (split at spaces). A screening build's times rank
    instances only if its best is the full build's best: scripts/bench_kt_switch.py --compile-modes measures that,
    and it stays off by default until it does."""
    text = (value if value is not None else os.environ.get(SCREEN_ENV, "")).strip()
    if text in ("", "0"):
        return ()
    return SCREEN_DEFAULT if text == "1" else tuple(text.split())


def _in_child(conn: Any, fn: Callable[[], Any]) -> None:
    try:
        result: tuple = ("ok", fn())
    except CompileFailed as exc:
        result = ("failed", exc.log)
    except BaseException as exc:  # noqa: BLE001 - reported to the compile process as a failure
        result = ("failed", f"error: {type(exc).__name__}: {exc}")
    try:
        conn.send(result)
    finally:
        os._exit(0)


def supervised() -> bool:
    """Whether this process is a `compile_pool` worker, whose parent kills a call past its time limit."""
    return os.environ.get(SUPERVISED_ENV) == "1"


def with_time_limit(fn: Callable[[], Any], timeout_s: float | None, what: str) -> Any:
    """fn() in a forked child of this (compile) process, killed after `timeout_s`: a hung or slow compiler call
    costs at most that, and the other instances go on. The child stays in this process's group (so a budget's
    end, which kills the group, takes it too). Raises CompileTimeout, or CompileFailed as fn() would.
    In a `compile_pool` worker (`supervised`) fn() runs here: the pool's parent enforces the limit."""
    if timeout_s is None or supervised():
        return fn()
    import multiprocessing as mp

    ctx = mp.get_context("fork")
    parent, child = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_in_child, args=(child, fn), daemon=True)
    proc.start()
    child.close()
    try:
        if not parent.poll(timeout_s):
            proc.kill()
            raise CompileTimeout(
                f"{TIMEOUT_ERROR}: {what} ran past {timeout_s:g} s and was killed "
                f"(the limit: ${COMPILE_TIMEOUT_ENV}, or LocalOptions(compile_timeout_s=...))"
            )
        try:
            kind, payload = parent.recv()
        except EOFError:
            proc.join(5)
            raise CompileFailed(f"error: {what} died (exit code {proc.exitcode})") from None
    finally:
        parent.close()
        proc.join(5)
    if kind == "failed":
        raise CompileFailed(payload)
    return payload


# ---------------------------------------------------------------------------------------------- pure
def arch_option(arch: int, supported: tuple[int, ...], specific: bool = False) -> tuple[str, str]:
    """NVRTC's architecture option and the binary it yields: a cubin when NVRTC knows this GPU,
    else PTX for the newest architecture it knows (the driver JIT-compiles it on load). `specific`: the
    architecture-specific target (`-arch=sm_90a`, `specific_target`), a cubin only: its PTX runs on that exact
    architecture, so there is no fallback to an older one (ValueError)."""
    if specific:
        if supported and arch not in supported:
            raise ValueError(
                f"{specific_target(arch)} cannot be built: this NVRTC knows no sm_{arch} (it knows {supported}), and "
                "architecture-specific code runs only on the architecture it was built for"
            )
        return f"-arch={specific_target(arch)}", "cubin"
    if not supported or arch in supported:
        return f"-arch=sm_{arch}", "cubin"
    older = [a for a in supported if a <= arch]
    if not older:
        raise ValueError(f"NVRTC supports no architecture <= sm_{arch} (it knows {supported})")
    return f"-arch=compute_{max(older)}", "ptx"


FIRST_SPECIFIC_ARCH = 90  # sm_90a is the first architecture-specific target (wgmma, setmaxnreg); none below


def specific_target(arch: int) -> str:
    """The architecture-specific target of compute capability `arch` (`sm_90a` for 90): the only target whose
    code may use that architecture's own instructions (a space's `kernel: arch_specific: true`). ValueError below
    sm_90, which has none."""
    if arch < FIRST_SPECIFIC_ARCH:
        raise ValueError(
            f"sm_{arch} has no architecture-specific target (sm_{FIRST_SPECIFIC_ARCH}a is the first): a space with "
            "`kernel: arch_specific: true` does not run on this GPU"
        )
    return f"sm_{arch}a"


def _refusing(message: str) -> Callable[[tuple[str, ...]], tuple[bytes, dict[str, str], str]]:
    """A toolchain's `run` that fails every instance with `message` (recorded, and cached, as a compile error)."""

    def run(group: tuple[str, ...]) -> tuple[bytes, dict[str, str], str]:
        raise CompileFailed(f"error: {message}")

    return run


NICE_ENV = "AUTOTUNE_COMPILE_NICE"  # the compile processes' niceness increment (default 5; 0: none)


def compile_nice() -> int:
    """$AUTOTUNE_COMPILE_NICE: a whole number from 0 to 19 (default 5), read by autotune.untrusted."""
    return int(untrusted.env_number(NICE_ENV, 5, integer=True, lo=0, hi=19) or 0)


def warm_compile_process() -> None:
    """Pool initializer: ignore Ctrl-C (`ignore_sigint`), lead a process group of its own (so that a sweep whose
    budget ran out kills it with the nvcc, cicc and ptxas it waits on: `GpuBackend.cancel_compiles`), run at a
    lower priority (a compile process yields its core to the user's script while it prepares its data, and to the
    sweep's own process and GPU worker, which keep the GPU busy: $AUTOTUNE_COMPILE_NICE, default 5) and load
    NVRTC's bindings now, while the GPU worker starts, rather than on the first compile the sweep waits for."""
    ignore_sigint()
    os.setpgrp()
    try:
        os.nice(compile_nice())
    except (OSError, UserError):  # not permitted (a bad value was refused by the pool that started this process)
        pass
    try:
        nvrtc_version()
        if os.environ.get(WARM_ENV, "1" if supervised() else "0").strip() == "1":
            warm_nvrtc()
    except Exception:  # noqa: BLE001 - a missing NVRTC is reported by the first compile, with its message
        pass


# one trivial NVRTC compile when a compile process starts: on by default in `compile_pool` workers, 0: never
WARM_ENV = "AUTOTUNE_COMPILE_WARM"


def warm_nvrtc() -> None:
    """One trivial NVRTC compile in this process while the sweep starts: a process's first NVRTC compile loads its
    built-ins (on an H100 host the first in-process compile took 65-110 ms, the next 17-24 ms:
    scripts/bench_compile_fork.py), off the first real compile's path. Forked compiles did not inherit the gain."""
    nvrtc_compile(
        'extern "C" __global__ void autotune_warm(float *x) { x[threadIdx.x] = 0.f; }',
        "warm.cu",
        (),
        DEFAULT_OPTIONS,
        "ptx",
    )


def batches(items: list, size: int) -> list[list]:
    size = max(1, size)
    return [items[i : i + size] for i in range(0, len(items), size)]


# ------------------------------------------------------------------------------------------- NVRTC
def _nvrtc():
    import cupy  # noqa: F401 - sets up the CUDA library search (wheels) before the bindings load

    try:
        from cupy_backends.cuda.libs import nvrtc
    except ImportError:  # pragma: no cover - older CuPy layouts
        from cupy.cuda import nvrtc
    return nvrtc


@functools.cache
def nvrtc_version() -> tuple[int, int]:
    return tuple(_nvrtc().getVersion())  # type: ignore[return-value]


@functools.cache
def nvrtc_archs() -> tuple[int, ...]:
    """The architectures this NVRTC compiles cubins for (empty where it cannot tell)."""
    return tuple(getattr(_nvrtc(), "getSupportedArchs", lambda: ())())


@functools.cache
def cuda_include_dir() -> str:
    """The CUDA header folder NVRTC needs for <cuda_fp16.h>, or "" when none is found."""
    candidates = [os.environ.get("CUDA_PATH", ""), os.environ.get("CUDA_HOME", "")]
    try:
        import cupy

        candidates.append(cupy.cuda.get_cuda_path() or "")
    except Exception:  # noqa: BLE001 - any failure just skips this candidate
        pass
    dirs = [str(Path(c) / "include") for c in candidates if c]
    try:  # CUDA headers shipped as wheels (nvidia-cuda-runtime), as CuPy itself finds them
        from cupy import _environment

        dirs += list(_environment._get_include_dir_from_conda_or_wheel(*nvrtc_version()))
    except Exception:  # noqa: BLE001
        pass
    dirs.append("/usr/local/cuda/include")
    for d in dirs:
        if (Path(d) / "cuda_fp16.h").is_file():
            return str(Path(d).resolve())
    return ""


def _toolkit_includes(cuda_inc: str) -> list[str]:
    """The CUDA header folder, and its `cccl/` folder where CUDA 13 keeps CUB, Thrust and libcu++."""
    if not cuda_inc:
        return []
    cccl = Path(cuda_inc) / "cccl"
    return [cuda_inc] + ([str(cccl)] if cccl.is_dir() else [])


def nvrtc_compile(
    text: str, filename: str, name_expressions: tuple[str, ...], options: tuple[str, ...], binary_kind: str
) -> tuple[bytes, dict[str, str], str]:
    """One NVRTC call: (binary, {name expression: lowered name}, log). Raises CompileFailed."""
    nvrtc = _nvrtc()
    prog = nvrtc.createProgram(text, filename, (), ())
    try:
        for name in name_expressions:
            nvrtc.addNameExpression(prog, name)
        try:
            nvrtc.compileProgram(prog, list(options))
        except nvrtc.NVRTCError as exc:
            raise CompileFailed(nvrtc.getProgramLog(prog) or str(exc)) from None
        log = nvrtc.getProgramLog(prog)
        binary = nvrtc.getCUBIN(prog) if binary_kind == "cubin" else nvrtc.getPTX(prog)
        mapping = {name: nvrtc.getLoweredName(prog, name) for name in name_expressions}
        return binary, mapping, log
    finally:
        nvrtc.destroyProgram(prog)


def compile_batch(request: CompileRequest, cache_dir: Path) -> list[CompiledKernel]:
    """Compile (or fetch from the cache) every name expression of the request; one result each, in order.

    Misses are compiled in one NVRTC call; if that call fails, each miss is compiled alone so that an
    error is pinned on the instance that caused it and the others still compile. Unless `AUTOTUNE_COMPILE_TWINS=0`
    (`autotune.sweep.compile.twins`), a configuration whose program another process is compiling right now waits here for
    that compile to end, then compiles (NVRTC serves it); `compile_batch_deferring` answers `twins.Later` instead.
    """
    out = _compile_batch(request, cache_dir, defer=False, twin=None, wait_s=None)
    assert not isinstance(out, tw.Later)  # (only a deferring call answers later)
    return out


def compile_batch_deferring(request: CompileRequest, cache_dir: Path) -> list[CompiledKernel] | tw.Later:
    """`compile_batch` for a `compile_pool` call: a twin whose program compiles elsewhere answers `twins.Later`
    (the pool asks again after a while; its process takes other work meanwhile)."""
    return _compile_batch(request, cache_dir, defer=True, twin=None, wait_s=None)


def _compile_batch_again(
    request: CompileRequest, cache_dir: Path, twin: str, wait_s: float
) -> list[CompiledKernel] | tw.Later:
    return _compile_batch(request, cache_dir, defer=True, twin=twin, wait_s=wait_s)


@dataclass(frozen=True)
class _Toolchain:
    """How one request's instances are compiled: `run(names)` -> (binary, lowered names, log), and what the cache key
    holds of the compiler."""

    run: Callable[[tuple[str, ...]], tuple[bytes, dict[str, str], str]]
    kind: str  # "cubin" or "ptx"
    arch_opt: str
    identity: str  # "nvrtc", or nvcc's path and version
    version: tuple[int, int]
    cuda_inc: str
    options: tuple[str, ...]  # NVRTC's options, the architecture last (nvcc: the request's options)


def _nvcc_toolchain(request: CompileRequest, text: str, search: tuple[Path, ...]) -> _Toolchain:
    """nvcc (the space's `compiler: nvcc`), compiling the request's file (or the edited text, with the includes of
    the file's folder) to a cubin."""
    from autotune.sweep.compile import nvcc

    tool = nvcc.find_nvcc()
    if tool is None:
        raise CompileFailed(
            "error: nvcc not found (the space asks for `compiler: nvcc`): install the CUDA toolkit or set CUDA_PATH"
        )
    nvcc_options = (*request.options, *[f"-I{d}" for d in search])
    target = f"sm_{request.arch}"
    try:
        target = specific_target(request.arch) if request.arch_specific else target
    except ValueError as exc:
        refusal: str | None = str(exc)
    else:
        refusal = None

    def run(group: tuple[str, ...]) -> tuple[bytes, dict[str, str], str]:
        try:
            if not request.unroll:
                return nvcc.nvcc_compile(
                    tool, request.source, group, nvcc_options, request.arch, timeout_s=request.timeout_s, target=target
                )
            with tempfile.TemporaryDirectory(prefix="autotune-kt-") as tmp:  # the edited text, includes as before
                edited = Path(tmp) / request.source.name
                edited.write_text(text)
                return nvcc.nvcc_compile(
                    tool, edited, group, nvcc_options, request.arch, timeout_s=request.timeout_s, target=target
                )
        except nvcc.NvccTimeout as exc:
            raise CompileTimeout(f"{TIMEOUT_ERROR}: {exc.log}") from None
        except nvcc.NvccFailed as exc:
            raise CompileFailed(exc.log) from None

    cuda_inc = str(Path(tool).resolve().parent.parent / "include")
    return _Toolchain(
        run if refusal is None else _refusing(refusal),
        "cubin",
        f"-arch={target}",
        nvcc.nvcc_identity(tool),
        (0, 0),
        cuda_inc,
        request.options,
    )


def _nvrtc_toolchain(request: CompileRequest, text: str, search: tuple[Path, ...]) -> _Toolchain:
    """NVRTC, in this process, within the request's time limit."""
    version, cuda_inc = nvrtc_version(), cuda_include_dir()
    try:
        arch_opt, kind = arch_option(request.arch, nvrtc_archs(), request.arch_specific)
    except ValueError as exc:  # an architecture-specific target this GPU or this NVRTC lacks: each instance fails
        if not request.arch_specific:
            raise
        refusal = _refusing(str(exc))
        return _Toolchain(refusal, "cubin", f"-arch=sm_{request.arch}a", "nvrtc", version, cuda_inc, request.options)
    options = (
        *request.options,
        *[f"--include-path={d}" for d in search],
        *[f"--include-path={d}" for d in _toolkit_includes(cuda_inc)],
        arch_opt,
    )

    def run(group: tuple[str, ...]) -> tuple[bytes, dict[str, str], str]:
        return with_time_limit(
            lambda: nvrtc_compile(text, request.source.name, group, options, kind),
            request.timeout_s,
            f"NVRTC compiling {len(group)} instance(s) of {request.source.name}",
        )

    return _Toolchain(run, kind, arch_opt, "nvrtc", version, cuda_inc, options)


def _compile_batch(
    request: CompileRequest, cache_dir: Path, defer: bool, twin: str | None, wait_s: float | None
) -> list[CompiledKernel] | tw.Later:
    cache = CompileCache(cache_dir)
    text = request.source.read_text()
    if request.unroll:  # `semantics: kerneltuner`: the text the compiler sees (the cache key follows it)
        from autotune.space.kt_semantics import unrolled_source

        text = unrolled_source(text, request.unroll)
    search = (request.source.parent, *request.include_dirs)
    digest = source_digest(text, local_headers(text, (*search, *option_include_dirs(request.options))))
    chain = (_nvcc_toolchain if request.compiler == "nvcc" else _nvrtc_toolchain)(request, text, search)
    run, kind, options = chain.run, chain.kind, chain.options
    keys = {
        n: cache_key(
            digest, request.options + (chain.arch_opt,), request.arch, chain.version, chain.cuda_inc, n, chain.identity
        )
        for n in request.name_expressions
    }
    done = {n: hit for n in keys if (hit := cache.lookup(keys[n])) is not None}
    misses = tuple(n for n in request.name_expressions if n not in done)
    claimed: str | None = None
    if (
        misses and request.compiler != "nvcc"
    ):  # a twin compiling elsewhere is waited for (`autotune.sweep.compile.twins`)
        # (the options: its macros and include folders; the architecture goes in as a number)
        # (an architecture-specific target keeps its -arch=sm_XXa: the number alone does not tell it apart)
        program_options = options if request.arch_specific else options[:-1]
        program = tw.Program(text, digest, misses, program_options, request.arch, bool(request.unroll))
        step = tw.take_turn(
            cache.root / "twins",
            program,
            twin=twin,
            again=(_compile_batch_again, (request, cache.root)) if defer else None,
            wait_s=wait_s,
        )
        if isinstance(step, tw.Later):
            return step
        claimed = step
    try:
        t0 = time.perf_counter()
        # NVRTC: learn a resource limit cheaply first (not where the build is already the fast one)
        if (
            request.precheck
            and request.compiler != "nvcc"
            and misses
            and not set(SCREEN_DEFAULT) <= set(request.options)
        ):
            misses = _precheck(request, text, misses, options, kind, keys, cache, done)
        _compile_misses(run, misses, keys, kind, cache, done)
        if claimed is not None:
            tw.POLICY.compiled(digest, time.perf_counter() - t0)
            tw.TwinLocks(cache.root / "twins").finish(claimed)  # its twins compile now, side by side
    finally:
        if claimed is not None:  # (an exception: released, not done; a twin waiting takes the compile over)
            tw.TwinLocks(cache.root / "twins").release(claimed)
    return [done[n] for n in request.name_expressions]


def _precheck(
    request: CompileRequest,
    text: str,
    misses: tuple[str, ...],
    options: tuple[str, ...],
    kind: str,
    keys: dict[str, str],
    cache: CompileCache,
    done: dict[str, CompiledKernel],
) -> tuple[str, ...]:
    """A fast build of each miss (`--Ofast-compile=max`): one over a resource limit is recorded failed without its
    full build. Returns the misses left for the full build."""
    fast = (*options[:-1], *SCREEN_DEFAULT, options[-1])
    for n in misses:
        t0 = time.perf_counter()
        try:
            with_time_limit(
                functools.partial(nvrtc_compile, text, request.source.name, (n,), fast, kind),
                request.timeout_s,
                f"NVRTC's fast build of {request.source.name}",
            )
        except CompileFailed as exc:
            if not isinstance(exc, CompileTimeout) and resource_failure(exc.log):
                log = f"{PRECHECK_NOTE}\n{exc.log}"
                done[n] = CompiledKernel(n, False, keys[n], None, None, None, log, time.perf_counter() - t0)
                cache.store(done[n])  # deterministic, as the full build's failure would be
    return tuple(n for n in misses if n not in done)


def _compile_misses(
    run: Callable[[tuple[str, ...]], tuple[bytes, dict[str, str], str]],
    misses: tuple[str, ...],
    keys: dict[str, str],
    kind: str,
    cache: CompileCache,
    done: dict[str, CompiledKernel],
) -> None:
    """Compile the misses in one call; when it fails, each alone (an error pinned on its instance)."""
    groups = [misses] if misses else []
    while groups:
        group = groups.pop()
        t0 = time.perf_counter()
        try:
            binary, mapping, log = run(group)
        except CompileFailed as exc:
            if len(group) > 1 and not isinstance(exc, CompileTimeout):
                groups.extend((n,) for n in group)
                continue
            share = (time.perf_counter() - t0) / len(group)
            for n in group:
                done[n] = CompiledKernel(n, False, keys[n], None, None, None, exc.log, share)
                if not isinstance(exc, CompileTimeout):  # a timeout may not recur (a loaded machine): not cached
                    cache.store(done[n])
            continue
        share = (time.perf_counter() - t0) / len(group)
        blob = cache.put_blob(binary, kind)
        for n in group:
            done[n] = CompiledKernel(n, True, keys[n], mapping[n], blob, kind, log, share)
            cache.store(done[n])


def compile_all(
    requests: list[CompileRequest], cache_dir: Path, workers: int | None = None
) -> dict[str, CompiledKernel]:
    """Every request's instances through `compile_batch` in a process pool (spawn), {name expression: result};
    for harnesses that compile a set of instances up front (the sweep streams through `GpuBackend`)."""
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor

    out: dict[str, CompiledKernel] = {}
    workers = max(1, min(len(requests), workers or (os.cpu_count() or 2) - 1))
    compile_nice()  # a bad $AUTOTUNE_COMPILE_NICE is one error here
    with ProcessPoolExecutor(workers, mp_context=mp.get_context("spawn"), initializer=warm_compile_process) as pool:
        for results in pool.map(compile_batch, requests, [Path(cache_dir)] * len(requests)):
            out.update({ck.name_expression: ck for ck in results})
    return out
