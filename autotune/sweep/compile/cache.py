"""The compile cache on disk, content-addressed, shared by NVRTC and nvcc (`autotune.sweep.compile.nvrtc`):

- `index/<k[:2]>/<k>.json`, one per (instance, compile environment), with
  k = sha256(source text + every local header it includes, options, architecture, NVRTC version,
  CUDA header folder, name expression). It holds the lowered (mangled) name, the compiler log,
  the share of the NVRTC wall time spent on this instance, and the blob it lives in (or the error).
- `blobs/<sha256>.cubin` (or `.ptx`), one per NVRTC call: every instance compiled together shares it.

Keys are per instance, so a resumed sweep recompiles nothing whatever the batching was, and compile
errors are cached too (they are deterministic). Files are written to a temporary name and renamed,
so a killed sweep leaves no half-written entry.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

_INCLUDE = re.compile(r'^\s*#\s*include\s*[<"]([^>"]+)[>"]', re.MULTILINE)


@dataclass(frozen=True)
class CompiledKernel:
    """One instance's compile outcome (from NVRTC now, or from the cache)."""

    name_expression: str
    ok: bool
    key: str
    lowered_name: str | None
    blob: Path | None  # the binary holding this instance (several instances share one)
    binary_kind: str | None  # "cubin" or "ptx"
    log: str
    compile_s: float  # NVRTC wall time of its call divided by the instances compiled together
    cached: bool = False


def local_headers(text: str, search_dirs: tuple[Path, ...]) -> dict[str, str]:
    """Every header the text includes, recursively, that lives in one of `search_dirs` (name -> text).

    Headers found nowhere there (CUDA's own, like <cuda_fp16.h>) are left out: the NVRTC version and the
    CUDA header folder stand for them in the cache key.
    """
    found: dict[str, str] = {}
    todo = list(_INCLUDE.findall(text))
    while todo:
        name = todo.pop()
        if name in found:
            continue
        for d in search_dirs:
            path = d / name
            if path.is_file():
                found[name] = path.read_text()
                todo.extend(_INCLUDE.findall(found[name]))
                break
    return found


def source_digest(text: str, headers: dict[str, str]) -> str:
    """sha256 over the program text and its local headers (sorted by name)."""
    h = hashlib.sha256(text.encode())
    for name in sorted(headers):
        h.update(b"\0" + name.encode() + b"\0" + headers[name].encode())
    return h.hexdigest()


def cache_key(
    digest: str,
    options: tuple[str, ...],
    arch: int,
    nvrtc_version: tuple[int, int],
    cuda_include: str,
    name_expression: str,
    compiler: str = "nvrtc",
) -> str:
    """The cache key of one instance; include paths are left out (they only say where files are). `compiler`:
    "nvrtc", or nvcc's identity (`nvcc.nvcc_identity`: its release and path)."""
    opts = [o for o in options if not o.startswith(("--include-path=", "-I"))]
    parts: list = [digest, opts, arch, list(nvrtc_version), cuda_include, name_expression]
    blob = json.dumps(parts if compiler == "nvrtc" else [*parts, compiler])  # NVRTC's keys stay as they were
    return hashlib.sha256(blob.encode()).hexdigest()


def option_include_dirs(options: tuple[str, ...]) -> tuple[Path, ...]:
    """The folders of `-I<dir>` and `--include-path=<dir>` options, so their headers count in the source digest."""
    out = []
    for o in options:
        for prefix in ("--include-path=", "-I"):
            if o.startswith(prefix) and len(o) > len(prefix):
                out.append(Path(o[len(prefix) :]))
                break
    return tuple(out)


class CompileCache:
    """The on-disk cache described in the module docstring."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    def _index(self, key: str) -> Path:
        return self.root / "index" / key[:2] / f"{key}.json"

    def lookup(self, key: str) -> CompiledKernel | None:
        try:
            entry = json.loads(self._index(key).read_text())
        except (OSError, ValueError):
            return None
        blob = Path(entry["blob"]) if entry.get("blob") else None
        if blob is not None:
            blob = self.root / "blobs" / blob.name
            if not blob.is_file():
                return None
        return CompiledKernel(
            entry["name_expression"],
            entry["ok"],
            key,
            entry["lowered_name"],
            blob,
            entry["binary_kind"],
            entry["log"],
            entry["compile_s"],
            cached=True,
        )

    def put_blob(self, data: bytes, kind: str) -> Path:
        path = self.root / "blobs" / f"{hashlib.sha256(data).hexdigest()}.{kind}"
        if not path.is_file():
            _atomic_write(path, data)
        return path

    def store(self, kernel: CompiledKernel) -> None:
        entry = asdict(kernel)
        entry["blob"] = kernel.blob.name if kernel.blob else None
        entry.pop("cached")
        _atomic_write(self._index(kernel.key), json.dumps(entry).encode())


def _atomic_write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.replace(tmp, path)
