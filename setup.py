"""Packaging beyond pyproject.toml: the built-in spaces and kernels (top-level `spaces/` and `kernels_src/` in a
checkout) ship inside the wheel as `autotune/_builtin/spaces` and `autotune/_builtin/kernels_src`, so an
installed autotune finds them (autotune/paths.py)."""

from setuptools import find_packages, setup

setup(
    packages=find_packages(include=["autotune", "autotune.*"])
    + ["autotune._builtin.spaces", "autotune._builtin.kernels_src"],
    package_dir={"autotune._builtin.spaces": "spaces", "autotune._builtin.kernels_src": "kernels_src"},
    package_data={
        "autotune._builtin.spaces": ["*.yaml"],
        "autotune._builtin.kernels_src": ["*.cuh", "*.cu", "*.h"],
        # the Alembic environment and revisions of the results database (read by path, not imported)
        "autotune": ["store/alembic/*.py", "store/alembic/*.mako", "store/alembic/versions/*.py"],
    },
)
