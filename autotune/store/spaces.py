"""The space versions a results database recorded, as files the space loader reads.

A sweep stores each space's YAML and (schema 2) its kernel source and local headers. Analyzing the database
(`autotune analyze/report/emit`) must describe the kernels that were measured, not whatever the work tree holds
now: `use_stored_spaces(url)` writes every recorded version whose work-tree file is missing or differs into a
temporary folder and points the space loader at it (`autotune.space.spec.STORED`), warning about each one that
differs. Work-tree files identical to the recorded version (but for comments) are used as they are.

The work-tree file of a recorded space is looked up in the checkout in use, never at the absolute path the
database recorded (another clone, another machine): a built-in space in the running package's `spaces/`; a
user's space at the recorded path re-rooted under the database's folder or one of its parents (nearest first:
`/a/clone1/examples/t/space.yaml` recorded, a database in `/a/clone2/results/` finds
`/a/clone2/examples/t/space.yaml`), then likewise under the current directory. The recorded path itself comes
last, when the checkout in use holds no copy (as when the database sits in the tree it was swept in). Found
nowhere, the recorded text is used; its `file.py:name` references (a Python kind, a reference, a baseline) then
resolve beside the recorded path, the only place left.
"""

from __future__ import annotations

import tempfile
import warnings
from pathlib import Path

import yaml
from sqlalchemy import select

from autotune import paths
from autotune.problems import allowed_paths
from autotune.space import spec
from autotune.store.schema import SpaceVersion
from autotune.store.store import Store


def _work_tree_file(name: str, yaml_path: str, url: str) -> Path | None:
    """Where the checkout in use holds the recorded space `name` (see the module docstring), or None."""
    recorded = Path(yaml_path)
    builtin = paths.SPACES_DIR / f"{name}.yaml"
    if recorded.name == builtin.name and builtin.is_file():
        return builtin
    for root in _roots(url):
        for candidate in _rerooted(recorded, root):
            if candidate != recorded and candidate.is_file():
                return candidate
    if not recorded.is_absolute() and paths.IN_CHECKOUT:  # committed results record paths relative to the repository
        in_checkout = paths.PACKAGE.parent / recorded
        if in_checkout.is_file():
            return in_checkout
    return recorded if recorded.is_absolute() and recorded.is_file() else None  # no copy in the checkout in use


def _roots(url: str) -> list[Path]:
    """The folders a recorded path is re-rooted under: the database's folder and its parents, then the current
    directory and its parents (nearest first; never the filesystem root)."""
    out: list[Path] = []
    for start in (_database_folder(url), Path.cwd()):
        if start is None:
            continue
        for folder in (start, *start.parents):
            if folder.parent != folder and folder not in out:
                out.append(folder)
    return out


def _rerooted(recorded: Path, root: Path) -> list[Path]:
    """`root` / the recorded path's trailing parts (a folder and the file at least), longest first."""
    parts = recorded.parts[1:] if recorded.is_absolute() else recorded.parts
    return [root.joinpath(*parts[start:]) for start in range(len(parts) - 1)]


def _database_folder(url: str) -> Path | None:
    """The folder of an SQLite database (of the .gz a decompressed copy was read from); None for a server."""
    from sqlalchemy.engine import make_url

    try:
        u = make_url(url) if "://" in url else None
    except Exception:  # noqa: BLE001 - not a URL: a bare path
        u = None
    if u is None:
        path = Path(url).resolve()
    elif not u.drivername.startswith("sqlite") or not u.database or u.database == ":memory:":
        return None
    else:
        path = Path(u.database).resolve()
    try:
        from autotune.store.engine import gz_origin
    except ImportError:  # pragma: no cover - moved with the engine code
        from autotune.store.engine import gz_origin  # type: ignore[no-redef]
    path = gz_origin(path) or path
    return path.parent


def use_stored_spaces(url: str) -> dict[str, Path]:
    """Point the space loader at the versions recorded in the database at `url`; returns {name: file} of those
    taken from the database (the others resolve as usual)."""
    with Store.open(url, create=False, readonly=True) as store, store.session() as s:
        rows = s.execute(select(SpaceVersion).order_by(SpaceVersion.id)).scalars().all()
    latest = {r.name: r for r in rows}  # the newest version of each space
    spec.STORED.clear()
    taken: dict[str, Path] = {}
    folder = Path(tempfile.mkdtemp(prefix="autotune-spaces-"))
    for name, r in latest.items():
        work = _work_tree_file(name, r.yaml_path, url)
        if work is not None and _same_yaml(work.read_text(), r.yaml_text) and _same_source(work, r):
            spec.STORED[name] = work.resolve()  # by name, also when it lives outside spaces/
            continue
        if work is not None:
            warnings.warn(
                f"space {name}: {work} differs from the version measured in this database; using the recorded version",
                stacklevel=2,
            )
        target = folder / name
        target.mkdir()
        doc = yaml.safe_load(r.yaml_text)
        kernel = doc.get("kernel") if isinstance(doc, dict) else None
        beside = work.parent if work is not None else Path(r.yaml_path).parent  # the user's files beside it
        if isinstance(kernel, dict) and kernel.get("source"):
            kernel["source"] = _source(target, r, beside, str(kernel["source"]))
        if isinstance(doc, dict) and "problem" in doc:
            doc["problem"] = _python_files(doc["problem"], beside)
        (target / "space.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
        allowed_paths.recorded_beside(target, beside)  # its Python files and source stay where the user had them
        spec.STORED[name] = taken[name] = target / "space.yaml"
    return taken


def _python_files(problem: object, folder: Path) -> object:
    """`file.py:name` references of a problem (a Python kind, a reference, a baseline) made absolute, so the recorded
    space still finds the user's files beside the original space file."""

    def absolute(text: object) -> object:
        if isinstance(text, str) and ":" in text and text.split(":")[0].endswith(".py"):
            target, name = text.rsplit(":", 1)
            return f"{(folder / target).resolve()}:{name}" if not Path(target).is_absolute() else text
        return text

    if isinstance(problem, dict):
        return {k: absolute(v) if k in ("reference", "baseline") else v for k, v in problem.items()}
    return absolute(problem)


def _same_yaml(a: str, b: str) -> bool:
    """The same space: equal text, or equal documents (a comment edited since the sweep changes nothing)."""
    if a == b:
        return True
    try:
        return yaml.safe_load(a) == yaml.safe_load(b)
    except yaml.YAMLError:
        return False


def _same_source(work: Path, r: SpaceVersion) -> bool:
    if not r.source_text:
        return True  # schema-1 databases did not keep the source; its hash is compared by the sweep
    try:
        source = spec.load_space(work).kernel
    except Exception:  # noqa: BLE001 - an unloadable work-tree file is not the recorded version
        return False
    return source is not None and source.source_path.is_file() and source.source_path.read_text() == r.source_text


def _source(target: Path, r: SpaceVersion, folder: Path, given: str) -> str:
    """Where the recorded space's kernel source is now: the recorded text (with its headers) when the database
    kept it, else the file beside the space's folder in the checkout (or the running package's kernels_src/)."""
    if r.source_text:
        (target / Path(given).name).write_text(r.source_text)
        for include, text in (r.headers or {}).items():
            (target / include).parent.mkdir(parents=True, exist_ok=True)
            (target / include).write_text(text)
        return Path(given).name
    for candidate in (folder / given, paths.KERNELS_DIR / given):
        if candidate.is_file():
            return str(candidate.resolve())
    return given
