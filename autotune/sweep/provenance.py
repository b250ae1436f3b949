"""What a sweep records about its own making: the project's commit (`git_commit`) and each space's version as
stored (`space_record`: its YAML, the kernel source and the local headers it includes, its kind)."""

from __future__ import annotations

import subprocess

from autotune import paths
from autotune.space.spec import Space
from autotune.store.schema import SpaceRecord


def git_commit() -> str | None:
    """The project's commit; AUTOTUNE_GIT_COMMIT names it where the tree was copied without .git."""
    import os

    if os.environ.get("AUTOTUNE_GIT_COMMIT"):
        return os.environ["AUTOTUNE_GIT_COMMIT"]
    try:
        out = subprocess.run(
            ["git", "-C", str(paths.ROOT), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5
        )
        return out.stdout.strip() or None if out.returncode == 0 else None
    except (OSError, subprocess.SubprocessError):
        return None


def space_record(space: Space) -> SpaceRecord:
    """The space's version as stored: its YAML, the kernel source and the local headers it includes, its kind."""
    from autotune.sweep.compile.nvrtc import local_headers

    source_path, text, headers = "", "", {}
    if space.kernel is not None:  # (None: recorded measurements only, an imported cache replayed: no source)
        source = space.kernel.source_path
        source_path, text = space.kernel.source, source.read_text()
        headers = local_headers(text, (source.parent, paths.KERNELS_DIR))
    return SpaceRecord(
        name=space.name,
        yaml_path=str(space.path),
        yaml_text=space.path.read_text(),
        source_path=source_path,
        source_text=text,
        kind=space.kind.name,
        headers=headers,
        problem=space.kind.describe(),
    )
