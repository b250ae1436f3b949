"""The space versions a results database recorded, as files the space loader reads.

A sweep stores each space's YAML and (schema 2) its kernel source and local headers. Analyzing the database
(`autotune analyze/report/emit`) must describe the kernels that were measured, not whatever the work tree holds
now: `use_stored_spaces(url)` writes every recorded version whose work-tree file is missing or differs into this
process's temporary folder (`autotune.store.recorded_files`: names checked, sizes bounded, removed at exit) and
points the space loader at it (`autotune.space.spec.STORED`), warning about each one that differs. Work-tree files
identical to the recorded version (but for comments) are used as they are.

The work-tree file of a recorded space is looked up in the checkout in use, never at the path the database
recorded (another clone, another machine): a built-in space in the running package's `spaces/`; a user's space at
the recorded path re-rooted under the database's folder or one of its parents (nearest first:
`/a/clone1/examples/t/space.yaml` recorded, a database in `/a/clone2/results/` finds
`/a/clone2/examples/t/space.yaml`), then likewise under the current directory (a link leading out of the folder it
was re-rooted under does not count); a path relative to the repository in a checkout; last, the recorded path
itself where it lies under one of those folders (a database in the tree it was swept in). A recorded path with `..`
is not looked up, nor a space name that is not a plain file name among the built-in spaces.

A database is data: nothing it holds decides where a file is written or which code runs. The Python a recorded
version names (a `problem: file.py:Class` or `module:Class` kind, `reference:`/`check:`/`baseline:` and `init:`
functions) is taken only from a folder the user allowed (`--allow-path`, AUTOTUNE_ALLOW_PATHS) or from the folder of
the work tree's copy of that space where that copy names the same reference (a module too only then). A function
found nowhere else is replaced by one that refuses to run (`allowed_paths.not_run`; analysis never calls them) with
one warning; a Python kind found nowhere else, or a recorded version that breaks a rule of `recorded_files`, leaves
the space out with one warning line saying why (and how to allow it): the analysis goes on with its measurements,
the table using its kernels only at their tuned points.
"""

from __future__ import annotations

import json
import re
import warnings
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

import yaml
from sqlalchemy import Text, cast, func, select

from autotune import paths, yamlfile
from autotune.problems import allowed_paths
from autotune.space import spec
from autotune.store import recorded_files as files
from autotune.store.engine import gz_origin, sqlite_path
from autotune.store.recorded_files import Refused
from autotune.store.schema import SpaceVersion
from autotune.store.store import Store

MAX_SPACES = 1000  # recorded spaces written for one database
_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.+-]{0,127}")  # a space name that may name a built-in space's file
_FUNCTIONS = ("reference", "check", "baseline")  # a declared kind's Python functions


def work_tree_file(name: str, yaml_path: object, url: str) -> Path | None:
    """Where the checkout in use holds the recorded space `name` (see the module docstring), or None."""
    recorded = _recorded_path(yaml_path)
    if recorded is None:
        return None
    builtin = paths.SPACES_DIR / f"{name}.yaml"
    if _NAME.fullmatch(name) and recorded.name == builtin.name and builtin.is_file():
        return builtin
    itself = False  # the recorded path is itself in the tree of a root: the last choice
    for root in _roots(url):
        for candidate in _rerooted(recorded, root):
            if candidate == recorded:
                itself = True
            elif candidate.is_file() and candidate.resolve().is_relative_to(root.resolve()):
                return candidate
    if not recorded.is_absolute() and paths.IN_CHECKOUT:  # committed results record paths relative to the repository
        in_checkout = paths.PACKAGE.parent / recorded
        if in_checkout.is_file() and in_checkout.resolve().is_relative_to(paths.PACKAGE.parent.resolve()):
            return in_checkout
    return recorded if itself and recorded.is_file() else None  # else the database names a place outside them


def places_looked(yaml_path: str, url: str) -> str:
    """Where `work_tree_file` looked for `yaml_path`, in words, for an error saying that it is gone."""
    recorded = _recorded_path(yaml_path)
    if recorded is None:
        return "not looked up: a recorded path with `..`"
    folders = [f for f in dict.fromkeys((_database_folder(url), Path.cwd())) if f is not None]
    out = ", and ".join(f"re-rooted under {f} and its parents" for f in folders)
    if not recorded.is_absolute() and paths.IN_CHECKOUT:
        out += f", and {paths.PACKAGE.parent / recorded}"
    return out


def _recorded_path(yaml_path: object) -> Path | None:
    """The recorded space file's path, when it is one worth looking up (text, no NUL, no `..`, not absurdly long)."""
    if not isinstance(yaml_path, str) or not yaml_path or "\0" in yaml_path or len(yaml_path) > 4096:
        return None
    path = Path(yaml_path)
    return path if ".." not in path.parts and len(path.parts) <= files.MAX_PARTS + 1 else None


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
    try:
        name = sqlite_path(url) if "://" in url else url
    except Exception:  # noqa: BLE001 - not a URL: a bare path
        name = url
    if name is None:
        return None
    path = Path(name).resolve()
    return (gz_origin(path) or path).parent


@dataclass(frozen=True)
class Recorded:
    """One recorded space version as the database holds it (every field unchecked: text of bounded length, or
    whatever the column held)."""

    name: object
    yaml_path: object
    yaml_text: object
    source_text: object
    headers: object  # the JSON text of {include name: text}, parsed by `_headers`


def _rows(url: str) -> list[Recorded]:
    """The `spaces` rows, oldest first, each text cut one character past its bound (so that a longer one is
    refused without reading it whole)."""

    def cut(column: Any, limit: int) -> Any:
        return func.substr(column, 1, limit + 1)

    t = SpaceVersion
    query = select(
        t.name,
        t.yaml_path,
        cut(t.yaml_text, files.MAX_YAML_BYTES),
        cut(t.source_text, files.MAX_FILE_BYTES),
        cut(cast(t.headers, Text), files.MAX_BYTES),
    ).order_by(t.id)
    with Store.open(url, create=False, readonly=True) as store, store.session() as s:
        return [Recorded(*row) for row in s.execute(query).all()]


def use_stored_spaces(url: str) -> dict[str, Path]:
    """Point the space loader at the versions recorded in the database at `url`; returns {name: file} of those
    taken from the database (the others resolve as usual; a refused one does not load, saying why)."""
    latest = {r.name: r for r in _rows(url) if isinstance(r.name, str)}  # the newest version of each space
    spec.STORED.clear()
    taken: dict[str, Path] = {}
    budget = files.Budget()
    for count, (name, r) in enumerate(latest.items()):
        assert isinstance(name, str)
        try:
            if count >= MAX_SPACES:
                raise Refused(f"the database records more than {MAX_SPACES} spaces")
            stored, written = _stored(name, r, url, budget)
        except Refused as exc:
            warnings.warn(
                f"space {name!r} as the database recorded it: {exc}; left out (the table uses its kernels only at "
                "their tuned points)",
                stacklevel=2,
            )
            spec.STORED[name] = spec.refuse(f"space {name!r} as the database recorded it: {exc}")
            continue
        spec.STORED[name] = stored
        if written:
            taken[name] = stored
    return taken


def _stored(name: str, r: Recorded, url: str, budget: files.Budget) -> tuple[Path, bool]:
    """The file the loader reads for the recorded space `name` and whether it was written: the work tree's copy
    when it is the version measured, else the recorded version written out (Refused when it cannot be)."""
    text = files.checked_text(r.yaml_text, "its space file", files.MAX_YAML_BYTES).decode("utf-8", "surrogateescape")
    doc = _document(text)
    work = work_tree_file(name, r.yaml_path, url)
    if work is not None and _same_yaml(work, doc) and _same_source(work, r):
        return work.resolve(), False  # by name, also when it lives outside spaces/
    if work is not None:
        warnings.warn(
            f"space {name}: {work} differs from the version measured in this database; using the recorded version",
            stacklevel=3,
        )
    recorded = _recorded_path(r.yaml_path)
    beside = work.parent if work is not None else recorded.parent if recorded is not None else None
    trusted = (work.parent,) if work is not None else ()
    written: dict[PurePosixPath, bytes] = {}
    kernel = doc.get("kernel")
    if isinstance(kernel, dict) and kernel.get("source"):
        kernel["source"] = _source(written, r, trusted, str(kernel["source"]))
    if "problem" in doc:
        doc["problem"] = _python(name, doc["problem"], beside, trusted, _names(work))
    try:
        dumped = yaml.safe_dump(doc, sort_keys=False)
    except (yaml.YAMLError, RecursionError):
        raise Refused("its space file cannot be written back as YAML") from None
    own = files.checked_name("space.yaml", "its space file")
    if own in written:
        raise Refused("a recorded header named 'space.yaml' like its space file")
    written[own] = dumped.encode()
    target = files.write_space(written, budget)
    allowed_paths.recorded(target, trusted)
    return target / "space.yaml", True


def _document(text: str) -> dict:
    """The recorded space file as a mapping, or Refused (not YAML, not a mapping, nested too deep)."""
    try:
        doc = yamlfile.safe_load(text)
    except yamlfile.TooDeep:
        raise Refused("its space file is nested too deep") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise Refused(f"its space file is not valid YAML{where}") from None
    if not isinstance(doc, dict):
        raise Refused(f"its space file is not a mapping (a {type(doc).__name__})")
    return doc


def _names(work: Path | None) -> set[str]:
    """Every text of the work tree's copy of the space: a module the recorded version names is imported only when
    the user's own file names it too."""
    if work is None:
        return set()
    try:
        doc = yamlfile.safe_load(work.read_text())
    except (yaml.YAMLError, OSError, UnicodeDecodeError):  # too deep is a YAMLError (yamlfile)
        return set()
    out: set[str] = set()
    todo = [doc]
    while todo:
        item = todo.pop()
        if isinstance(item, str):
            out.add(item)
        elif isinstance(item, dict):
            todo += list(item.values())
        elif isinstance(item, list):
            todo += item
    return out


def _python(name: str, problem: Any, beside: Path | None, trusted: tuple[Path, ...], known: set[str]) -> Any:
    """The recorded `problem:` with its Python references resolved where they may run (see the module docstring):
    functions found nowhere allowed are replaced by `allowed_paths.NOT_RUN` (one warning); a kind found nowhere
    allowed is Refused."""
    if isinstance(problem, str):
        if ":" not in problem:
            return problem  # a built-in or installed kind, by name
        resolved = _reference(problem, beside, trusted, known)
        if resolved is None:
            where = (
                f"allow its folder if you trust it: autotune --allow-path {beside.resolve()} COMMAND ..."
                if (beside is not None and problem.split(":")[0].endswith(".py"))
                else "analyze it where the space file that names it is"
            )
            raise Refused(
                f"its problem kind {problem!r} is Python that only the database names (not in the work tree's copy "
                f"of the space nor in a folder you allowed): not run; {where}"
            )
        return resolved
    if not isinstance(problem, dict):
        return problem
    replaced: list[str] = []

    def function(text: Any) -> Any:
        if not isinstance(text, str) or ":" not in text:
            return text
        resolved = _reference(text, beside, trusted, known)
        if resolved is None:
            replaced.append(text)
            return allowed_paths.NOT_RUN
        return resolved

    out = {k: function(v) if k in _FUNCTIONS else v for k, v in problem.items()}
    for key in ("arguments", "constants"):
        if isinstance(out.get(key), list):
            out[key] = [_with_init(item, function) for item in out[key]]
    if replaced:
        shown = ", ".join(repr(t) for t in replaced[:3]) + (
            f" and {len(replaced) - 3} more" if len(replaced) > 3 else ""
        )
        warnings.warn(
            f"space {name!r} as the database recorded it names Python outside the work tree's copy of the space and "
            f"the folders you allowed ({shown}): analyzed without running it (allow its folder with --allow-path "
            "DIR if you trust it)",
            stacklevel=4,
        )
    return out


def _with_init(item: Any, function: Any) -> Any:
    """An argument or constant whose `init: {function: ...}` goes through `function`."""
    if isinstance(item, dict) and isinstance(item.get("init"), dict) and "function" in item["init"]:
        return {**item, "init": {**item["init"], "function": function(item["init"]["function"])}}
    return item


def _reference(text: str, beside: Path | None, trusted: tuple[Path, ...], known: set[str]) -> str | None:
    """`file.py:name` as an absolute path where it may run (a folder the user allowed, or the work tree's copy's
    folder when that copy names the same reference), `module:name` as it is where the work tree's copy names it too;
    None where neither."""
    target, _, fn = text.rpartition(":")
    if not target.endswith(".py"):
        return text if text in known else None
    if "\0" in target:
        return None
    file = Path(target) if Path(target).is_absolute() else beside / target if beside is not None else None
    if file is None or not allowed_paths.code_allowed(file, trusted if text in known else ()):
        return None
    return f"{file.resolve()}:{fn}"


def _same_yaml(work: Path, doc: dict) -> bool:
    """The same space: equal documents (a comment edited since the sweep changes nothing)."""
    try:
        return yamlfile.safe_load(work.read_text()) == doc
    except (yaml.YAMLError, OSError, UnicodeDecodeError):
        return False


def _same_source(work: Path, r: Recorded) -> bool:
    if not r.source_text:
        return True  # schema-1 databases did not keep the source; its hash is compared by the sweep
    try:
        source = spec.load_space(work).kernel
    except Exception:  # noqa: BLE001 - an unloadable work-tree file is not the recorded version
        return False
    return source is not None and source.source_path.is_file() and source.source_path.read_text() == r.source_text


def _headers(text: object) -> dict:
    """The recorded headers {include name: text} from their JSON text, or Refused."""
    if text is None:
        return {}
    if not isinstance(text, str) or len(text) > files.MAX_BYTES:
        raise Refused(f"its recorded headers are not JSON text of at most {files.MAX_BYTES >> 20} MiB")
    try:
        headers = json.loads(text)
    except (ValueError, RecursionError):
        raise Refused("its recorded headers are not valid JSON") from None
    if headers is None:
        return {}
    if not isinstance(headers, dict):
        raise Refused("its recorded headers are not a mapping of names to texts")
    if len(headers) >= files.MAX_FILES:
        raise Refused(f"{len(headers):,} recorded headers (at most {files.MAX_FILES - 2:,})")
    return headers


def _source(written: dict[PurePosixPath, bytes], r: Recorded, trusted: tuple[Path, ...], given: str) -> str:
    """Where the recorded space's kernel source is now: the recorded text (with its headers, added to `written`)
    when the database kept it, else the file beside the work tree's copy (or the running package's kernels_src/)."""
    if r.source_text:
        own = files.checked_name(PurePosixPath(given).name, "its kernel source")
        written[own] = files.checked_text(r.source_text, f"its kernel source {str(own)!r}")
        for include, text in _headers(r.headers).items():
            path = files.checked_name(include, "a recorded header")
            if path in written:
                raise Refused(f"a recorded header named {include!r} like another of its files")
            written[path] = files.checked_text(text, f"the recorded header {include!r}")
        return str(own)
    try:
        named = files.checked_name(given, "its kernel source")  # looked up inside those folders only
    except Refused:
        return given
    for candidate in [*(folder / named for folder in trusted), paths.KERNELS_DIR / named]:
        if candidate.is_file():
            return str(candidate.resolve())
    return given
