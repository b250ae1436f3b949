"""Compile kernel instances with the CUDA toolkit's nvcc (a space's `kernel: compiler: nvcc`), for C++ that NVRTC
rejects (`#include <cub/cub.cuh>`: "A function explicitly marked as a __host__ function is not allowed in JIT mode").

One nvcc call compiles a small wrapper file to a cubin (`nvcc -cubin -arch=sm_XX`):

    #include "/abs/path/kernel.cu"
    __device__ __attribute__((used)) auto __autotune_ref_0 = &ns::kernel<float, 128>;   // one per name expression

Taking a kernel's address instantiates it (like NVRTC's name expressions), and each reference is a device
variable whose initial value the cubin records as a relocation against the kernel's symbol: reading the cubin's
ELF symbol and relocation tables (`ref_targets`, pure Python) gives each name expression's lowered (mangled)
name, for templates, C++ names and extern "C" names alike, with no demangler and no intermediate files kept.
The cubin is then cached and loaded exactly like NVRTC's (`autotune.sweep.compile.nvrtc`).
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import struct
import subprocess
import tempfile
from pathlib import Path

REF = "__autotune_ref_"


class NvccFailed(Exception):
    def __init__(self, log: str) -> None:
        super().__init__(log.strip().splitlines()[-1] if log.strip() else "nvcc failed")
        self.log = log


class NvccTimeout(NvccFailed):
    """nvcc ran past its time limit and was killed."""


def find_nvcc() -> str | None:
    """nvcc of $CUDA_PATH or $CUDA_HOME, else the one on PATH, else /usr/local/cuda's; None when there is none."""
    for env in ("CUDA_PATH", "CUDA_HOME"):
        if os.environ.get(env) and (Path(os.environ[env]) / "bin" / "nvcc").is_file():
            return str(Path(os.environ[env]) / "bin" / "nvcc")
    found = shutil.which("nvcc")
    if found:
        return found
    return "/usr/local/cuda/bin/nvcc" if Path("/usr/local/cuda/bin/nvcc").is_file() else None


@functools.lru_cache(maxsize=4)
def nvcc_identity(nvcc: str) -> str:
    """What the cache key holds for this nvcc: its release line (`release 13.0, V13.0.88`) and resolved path."""
    out = subprocess.run([nvcc, "--version"], capture_output=True, text=True, timeout=60)
    m = re.search(r"release [^\n]*", out.stdout)
    return f"nvcc {m.group(0) if m else out.stdout.strip()[-80:]} {Path(nvcc).resolve()}"


def wrapper_text(source: Path, name_expressions: tuple[str, ...]) -> str:
    lines = [f'#include "{source.resolve()}"']
    lines += [f"__device__ __attribute__((used)) auto {REF}{i} = &{name};" for i, name in enumerate(name_expressions)]
    return "\n".join(lines) + "\n"


def nvcc_compile(
    nvcc: str,
    source: Path,
    name_expressions: tuple[str, ...],
    options: tuple[str, ...],
    arch: int,
    timeout_s: float | None = None,
    target: str | None = None,
) -> tuple[bytes, dict[str, str], str]:
    """One nvcc call: (cubin, {name expression: lowered name}, log). Raises NvccFailed with nvcc's output, or
    NvccTimeout when it ran past `timeout_s` (nvcc is killed; a cicc or ptxas it started ends on its own).
    `target`: the -arch value (default sm_<arch>; `sm_90a` for an architecture-specific space).

    nvcc and its children (cicc, ptxas) stay in the compile process's group, which `GpuBackend.cancel_compiles`
    kills whole when a budget ends."""
    with tempfile.TemporaryDirectory(prefix="autotune-nvcc-") as tmp:
        wrapper, out = Path(tmp) / "autotune_instances.cu", Path(tmp) / "out.cubin"
        wrapper.write_text(wrapper_text(source, name_expressions))
        cmd = [nvcc, "-cubin", f"-arch={target or f'sm_{arch}'}", *options, "-o", str(out), str(wrapper)]
        try:
            proc = subprocess.run(
                cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, check=False, timeout=timeout_s
            )
        except subprocess.TimeoutExpired:
            raise NvccTimeout(f"nvcc ran past {timeout_s:g} s and was killed") from None
        log = proc.stdout
        if proc.returncode != 0 or not out.is_file():
            raise NvccFailed(log or f"error: nvcc exited with code {proc.returncode}")
        binary = out.read_bytes()
    targets = ref_targets(binary)
    mapping = {}
    for i, name in enumerate(name_expressions):
        symbol = targets.get(f"{REF}{i}")
        if symbol is None and name in elf_symbols(binary):  # an extern "C" kernel, were the reference dropped
            symbol = name
        if symbol is None:
            raise NvccFailed(f"{log}\nerror: the kernel {name} is not in nvcc's cubin (no symbol found for it)")
        mapping[name] = symbol
    return binary, mapping, log


# ---------------------------------------------------------------------------------------- ELF (cubin)
def _sections(data: bytes) -> list[tuple[int, int, int, int, int, int]]:
    """(name offset, type, offset, size, link, info) of every section of a 64-bit little-endian ELF file."""
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        raise ValueError("not a 64-bit little-endian ELF file (a cubin)")
    (shoff,) = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", data, 0x3A)
    out = []
    for i in range(shnum):
        name, typ, _flags, _addr, off, size, link, info = struct.unpack_from("<IIQQQQII", data, shoff + i * shentsize)
        out.append((name, typ, off, size, link, info))
    return out


def _symbols(data: bytes, sections: list, symtab: int) -> list[tuple[str, int, int, int]]:
    """(name, type, section index, value) of each entry of the symbol table in section `symtab`."""
    _, _, off, size, link, _ = sections[symtab]
    strtab = sections[link][2]
    out = []
    for pos in range(off, off + size, 24):
        st_name, st_info, _other, shndx, value, _size = struct.unpack_from("<IBBHQQ", data, pos)
        end = data.index(b"\0", strtab + st_name)
        out.append((data[strtab + st_name : end].decode(), st_info & 0xF, shndx, value))
    return out


def elf_symbols(data: bytes) -> set[str]:
    """Every symbol name of the ELF file."""
    sections = _sections(data)
    return {s[0] for i, sec in enumerate(sections) if sec[1] == 2 for s in _symbols(data, sections, i)}


def ref_targets(data: bytes) -> dict[str, str]:
    """{reference variable: the function symbol its initial value points to} for the `__autotune_ref_N` variables
    of a cubin, read from its symbol table and the relocations of the section that holds them."""
    sections = _sections(data)
    symtab = next((i for i, s in enumerate(sections) if s[1] == 2), None)
    if symtab is None:
        return {}
    syms = _symbols(data, sections, symtab)
    refs = {(shndx, value): name for name, _t, shndx, value in syms if name.startswith(REF)}
    out: dict[str, str] = {}
    for _, typ, off, size, link, info in sections:
        if link != symtab or typ not in (4, 9):  # SHT_RELA, SHT_REL
            continue
        step = 24 if typ == 4 else 16
        for pos in range(off, off + size, step):
            r_offset, r_info = struct.unpack_from("<QQ", data, pos)
            ref = refs.get((info, r_offset))
            target = syms[r_info >> 32] if (r_info >> 32) < len(syms) else None
            if ref is not None and target is not None and target[1] == 2:  # STT_FUNC
                out[ref] = target[0]
    return out
