"""Sweep configs (configs/*.yaml) -> SweepConfig: which spaces, which test points, how to measure.

Every mistake is a ConfigError naming the file, the line and what to do. The format is documented in
docs/sweep-configs.md; configs/default.yaml is the example the tutorial (docs/tutorial.md) runs.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field
from pathlib import Path

from yaml.nodes import MappingNode, Node

from autotune.errors import ConfigError
from autotune.sweep.config_points import SpaceKinds, read_points
from autotune.sweep.config_reader import Reader
from autotune.sweep.strategies.options import SAMPLER_KEYS, STUDY_STORES, SearchOptions
from autotune.vocab import MAX_SEED, TestPoint
from autotune.paths import SPACES_DIR
from autotune.yamlfile import compose, read_text

TOP_KEYS = tuple(
    "name description spaces points scalars alpha beta database repetitions budget bk tol strategy max_instances seed"
    " share resume stop_after_failures".split()
)
SCALAR_SHORTHANDS = ("alpha", "beta")  # top-level keys that set a scalar of that name (GEMM configs write them)
STRATEGY_KEYS = ("name", "budget", "patience", "roofline_tol", "transfer", "studies", *SAMPLER_KEYS)
SPACE_KEYS = ("space", "device", "soft", "soft_off", "where", "max_instances", "instances", "measure", "share")
MEASURE_RULES = ("serves", "valid")
DURATION = re.compile(r"^\s*(?:(\d+(?:\.\d+)?)h)?\s*(?:(\d+(?:\.\d+)?)m)?\s*(?:(\d+(?:\.\d+)?)s)?\s*$")


ALL_INSTANCES = 0  # a space entry's `max_instances: all`


@dataclass(frozen=True)
class SpaceRef:
    """One space to sweep: a name under spaces/ or a YAML path, with its device profile and soft switches."""

    ref: str  # as written in the config
    path: Path  # the space file it resolves to
    device: str | None = None  # device profile for the constraints (None = the GPU the sweep runs on)
    soft: bool = True  # apply the soft constraints
    soft_off: tuple[str, ...] = ()  # soft constraints switched off by name
    where: str | None = None  # keep only the instances for which this expression holds
    max_instances: int | None = None  # this space's own limit (ALL_INSTANCES: none); None: the config's
    line: int | None = None  # where the entry is written in the config (for errors found when planning)
    instances: tuple[str, ...] | None = None  # measure only these instance ids (among those the entry keeps)
    measure: str = "serves"  # an instance is measured where its space's `serves` holds, or where `valid` holds
    share: int | None = None  # this space's sharing budget (None: the config's)


@dataclass(frozen=True)
class SweepConfig:
    """A whole sweep, immutable and hashable."""

    name: str
    path: Path | None
    text: str = field(repr=False)  # the YAML text, stored with the sweep
    spaces: tuple[SpaceRef, ...]
    points: tuple[TestPoint, ...]
    # the run's scalars: the defaults of the spaces' kinds (ProblemKind.scalar_defaults; GEMM: alpha 1, beta 0)
    # overridden by the config's `scalars: {name: value}` (or a GEMM config's top-level `alpha:`/`beta:`)
    scalars: dict[str, float] = field(default_factory=dict, hash=False)
    database: str = ""  # SQLAlchemy URL
    repetitions: int = 20
    budget_s: float | None = None  # stop starting new work after this many seconds
    bk: int = 10
    tol: float = 0.05
    description: str = ""
    strategy: str = (
        "brute"  # search strategy (autotune.sweep.strategies): brute, random, tpe, hybrid, gp, cmaes, auto, ...
    )
    search: SearchOptions = SearchOptions()  # the `strategy:` mapping's per-point options (budget, patience, ...)
    max_instances: int | None = None  # measure at most this many instances per space
    seed: int = 0  # seed of the random strategy
    resume: str = "gpu"  # a resumed sweep skips pairs measured on this GPU ("gpu") or on any of the same model
    share: int = 0  # after the main phase, each BK-best instance is also measured at up to this many more
    #                 points it is valid for, nearest to the points it serves first (0: no sharing)
    stop_after_failures: int = 8  # a space whose first this many instances fail alike stops (failstop.py; 0: never)


def load_config(path: str | Path) -> SweepConfig:
    """Read and check a sweep config file. Raises ConfigError."""
    p = Path(path)
    if not p.is_file():
        known = ", ".join(sorted(c.stem for c in p.parent.glob("*.yaml"))) if p.parent.is_dir() else ""
        raise ConfigError(
            f"no config file {p}",
            file=p,
            hint=f"give the path of a YAML sweep config{f' (in {p.parent}: {known})' if known else ''}",
        )
    hint = "give the sweep's YAML config (configs/NAME.yaml) here; a results database goes in --db or --replay"
    return parse_config(read_text(p, ConfigError, hint=hint), file=p.resolve())


def parse_config(text: str, file: str | Path = "<config>") -> SweepConfig:
    """Check a sweep config given as YAML text; relative space paths resolve against the file's folder."""
    r = Reader(Path(file))
    root = compose(text, file, ConfigError)
    if root is None:  # an empty file (or only comments)
        raise ConfigError("the config is empty", file=file, hint="start from configs/default.yaml")
    if not isinstance(root, MappingNode):
        raise r.error(root, "a sweep config is a mapping (key: value lines)", "start from configs/default.yaml")
    top = r.mapping(root, TOP_KEYS, "sweep config")
    for key in ("spaces", "points"):
        if key not in top:
            raise r.error(root, f"missing `{key}:`", "see configs/default.yaml for a complete example")
    path = Path(file) if file != "<config>" else None
    name = r.string(top["name"]) if "name" in top else (path.stem if path else "sweep")
    if not re.fullmatch(r"[A-Za-z0-9_.-]+", name):
        raise r.error(
            top.get("name", root),
            f"config name {name!r} cannot be a file name",
            "use letters, digits, '_', '-' and '.'",
        )
    groups = r.sequence(top["points"], "points")  # (an empty list: no point to measure)
    spaces = tuple(_space(r, n) for n in r.sequence(top["spaces"], "spaces"))
    kinds = SpaceKinds(tuple(ref.path for ref in spaces))
    points = tuple(dict.fromkeys(p for g in groups for p in read_points(r, g, kinds)))
    budget = top.get("budget")
    strategy, search = _strategy(r, top["strategy"]) if "strategy" in top else ("brute", SearchOptions())
    return SweepConfig(
        name=name,
        path=path,
        text=text,
        spaces=spaces,
        points=points,
        scalars=_scalars(r, top, kinds),
        database=_database(r, top["database"])
        if "database" in top
        else f"sqlite:///{Path.cwd() / 'results' / name}.sqlite",
        repetitions=r.integer(top["repetitions"], 1) if "repetitions" in top else 20,
        budget_s=_duration(r, budget) if budget is not None and r.value(budget) is not None else None,
        bk=r.integer(top["bk"], 1) if "bk" in top else 10,
        tol=_tol(r, top["tol"]) if "tol" in top else 0.05,
        description=r.string(top["description"]) if "description" in top else "",
        strategy=strategy,
        search=search,
        max_instances=r.integer(top["max_instances"], 1) if "max_instances" in top else None,
        seed=r.integer(top["seed"], 0, MAX_SEED) if "seed" in top else 0,
        share=r.integer(top["share"], 0) if "share" in top else 0,
        resume=_resume(r, top["resume"]) if "resume" in top else "gpu",
        stop_after_failures=r.integer(top["stop_after_failures"], 0) if "stop_after_failures" in top else 8,
    )


def _space(r: Reader, node: Node) -> SpaceRef:
    m = r.mapping(node, SPACE_KEYS, "space entry") if isinstance(node, MappingNode) else {"space": node}
    if "space" not in m:
        raise r.error(node, "a space entry needs `space:`", "write `- space: NAME_OR_PATH`")
    device = r.string(m["device"]) if "device" in m else None
    soft = (
        r.typed(m["soft"], lambda v: isinstance(v, bool), "true or false", "write soft: false") if "soft" in m else True
    )
    soft_off = tuple(r.string(n) for n in r.sequence(m["soft_off"], "soft_off")) if "soft_off" in m else ()
    where = r.string(m["where"]) if "where" in m else None
    limit = None
    if "max_instances" in m:
        limit = ALL_INSTANCES if r.value(m["max_instances"]) == "all" else r.integer(m["max_instances"], 1)
    instances = None
    if "instances" in m:
        instances = tuple(r.string(n) for n in r.sequence(m["instances"], "instances"))
        ids = zip(m["instances"].value, instances, strict=True)
        bad = next((n for n, i in ids if not re.fullmatch(r"[0-9a-f]{16}", i)), None)
        if bad is not None or not instances:
            raise r.error(
                bad or m["instances"],
                "instances: a list of instance ids (16 hex digits)",
                "copy them from `autotune space list` or the database's instances table",
            )
    measure = r.string(m["measure"]) if "measure" in m else "serves"
    if measure not in MEASURE_RULES:
        raise r.error(
            m["measure"],
            f"measure: {measure!r} is not a rule",
            "write measure: serves (where the kernel's `serves` holds) or measure: valid",
        )
    share = r.integer(m["share"], 0) if "share" in m else None
    if where is not None:
        from autotune.expr import ExprError, parse

        try:
            parse(where)
        except ExprError as exc:
            raise r.error(m["where"], f"where: {exc.message}", exc.hint or 'write e.g. where: "NSG >= 2"') from None
    ref_node = m["space"]
    ref = r.string(ref_node)
    if device is not None:
        from autotune.devices import PROFILES

        if device.lower() not in {k.lower() for k in PROFILES}:
            raise r.error(m["device"], f"unknown device profile {device!r}", f"use one of {', '.join(PROFILES)}")
    return SpaceRef(
        ref=ref,
        path=space_path(r, ref_node, ref),
        device=device,
        soft=bool(soft),
        soft_off=soft_off,
        where=where,
        max_instances=limit,
        line=node.start_mark.line + 1,
        instances=instances,
        measure=measure,
        share=share,
    )


def space_path(r: Reader, node: Node, ref: str) -> Path:
    if ref.endswith((".yaml", ".yml")) or "/" in ref:
        for base in (r.file.parent, Path.cwd()):
            if (base / ref).is_file():
                return (base / ref).resolve()
        raise r.error(node, f"no space file {ref}", f"give a path relative to {r.file.parent} or a space name")
    path = SPACES_DIR / f"{ref}.yaml"
    if not path.is_file():
        known = ", ".join(sorted(p.stem for p in SPACES_DIR.glob("*.yaml"))) or "none"
        close = difflib.get_close_matches(ref, known.split(", "), n=1)
        raise r.error(
            node,
            f"unknown space {ref!r}",
            f"did you mean {close[0]!r}?" if close else f"known spaces (in {SPACES_DIR}): {known}",
        )
    return path


def _duration(r: Reader, node: Node) -> float:
    v = r.value(node)
    if isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0:
        return float(v)
    match = DURATION.fullmatch(str(v))
    if not match or not any(match.groups()):
        raise r.error(node, f"cannot read a time budget from {v!r}", "write seconds (3600) or e.g. 90s, 30m, 8h, 1h30m")
    h, mi, s = (float(g) if g else 0.0 for g in match.groups())
    return h * 3600 + mi * 60 + s


def _resume(r: Reader, node: Node) -> str:
    value = r.string(node)
    if value not in ("gpu", "model"):
        raise r.error(
            node,
            f"resume: {value!r} is not a rule",
            "write resume: gpu (skip pairs measured on this GPU) or resume: model (on any GPU of the same model)",
        )
    return value


def _strategy(r: Reader, node: Node) -> tuple[str, SearchOptions]:
    """`strategy: NAME` or `strategy: {name: NAME, budget: N, patience: K, roofline_tol: F, transfer: K,
    studies: database|memory, batch: N, startup: N}` (autotune.sweep.strategies.options). NAME: a registered
    strategy (built-in or an installed entry point) or module:Class (loaded when used)."""
    from autotune.sweep.strategies import known_strategy, strategy_names

    m = r.mapping(node, STRATEGY_KEYS, "strategy") if isinstance(node, MappingNode) else {"name": node}
    if "name" not in m:
        raise r.error(node, "a strategy mapping needs `name:`", "write e.g. strategy: {name: tpe, budget: 100}")
    name = r.string(m["name"])
    if not known_strategy(name):
        raise r.error(
            m["name"],
            f"unknown strategy {name!r}",
            f"choose one of {', '.join(strategy_names())}, or give module:Class",
        )
    tol = None
    if "roofline_tol" in m:
        tol = r.number(m["roofline_tol"])
        if not 0 <= tol < 1:
            raise r.error(
                m["roofline_tol"],
                f"roofline_tol {tol} is outside [0, 1)",
                "0.05 stops a point once its best time is within 5% of the roofline time",
            )
    studies = r.string(m["studies"]) if "studies" in m else "database"
    if studies not in STUDY_STORES:
        raise r.error(
            m["studies"], f"studies: {studies!r} is not a place", "write studies: database or studies: memory"
        )
    return name, SearchOptions(
        budget=r.integer(m["budget"], 1) if "budget" in m else None,
        patience=r.integer(m["patience"], 1) if "patience" in m else None,
        roofline_tol=tol,
        transfer=r.integer(m["transfer"], 0) if "transfer" in m else 0,
        studies=studies,
        sampler=tuple((k, r.integer(m[k], 1 if k == "batch" else 0)) for k in SAMPLER_KEYS if k in m),
    )


def _scalars(r: Reader, top: dict[str, Node], kinds: SpaceKinds) -> dict[str, float]:
    """The run's scalars: the defaults of every kind of the config's spaces, overridden by `scalars:` and by the
    top-level shorthands (`alpha:`, `beta:`) for kinds that have a scalar of that name. A name no kind of the
    config declares is an error at its line."""
    defaults: dict[str, float] = {}
    owners: dict[str, list[str]] = {}
    for kind in kinds.all().values():
        for name, value in kind.scalar_defaults.items():
            defaults.setdefault(name, float(value))
            owners.setdefault(name, []).append(kind.name)
    known = (
        "; ".join(f"{n} ({', '.join(k)})" for n, k in owners.items())
        or f"none: {', '.join(kinds.all()) or 'its kinds'} declare no scalars"
    )
    out = dict(defaults)
    given: set[str] = set()
    if "scalars" in top:
        node = top["scalars"]
        if isinstance(node, MappingNode):
            for key_node, _ in node.value:
                key = str(r.value(key_node))
                if key not in defaults:
                    close = difflib.get_close_matches(key, list(defaults), n=1)
                    raise r.error(
                        key_node,
                        f"unknown scalar `{key}`: no kind of this config has it",
                        (f"did you mean `{close[0]}`? " if close else "") + f"the kinds' scalars: {known}",
                    )
        for name, value_node in r.mapping(node, tuple(defaults), "scalars").items():
            out[name] = r.number(value_node)
            given.add(name)
    for name in SCALAR_SHORTHANDS:
        if name not in top:
            continue
        if name not in defaults:
            raise r.error(
                top[name],
                f"`{name}:` sets a scalar no kind of this config has",
                f"remove it (the kinds' scalars: {known})",
            )
        if name in given:
            raise r.error(top[name], f"`{name}` is given twice (top level and under `scalars:`)", "keep one of them")
        out[name] = r.number(top[name])
    return out


def _tol(r: Reader, node: Node) -> float:
    tol = r.number(node)
    if not 0 <= tol < 1:
        raise r.error(node, f"tol {tol} is outside [0, 1)", "tol is the accepted loss against the best: 0.05 = 5%")
    return tol


def _database(r: Reader, node: Node) -> str:
    """A SQLAlchemy URL, or a bare file path (relative to the current directory) for SQLite."""
    db = r.string(node)
    if "://" in db:
        from sqlalchemy.engine import make_url
        from sqlalchemy.exc import ArgumentError

        try:
            make_url(db)
        except (ArgumentError, ValueError) as exc:
            raise r.error(
                node, f"not a database URL: {exc}", "write sqlite:///path.sqlite or postgresql+psycopg://user@host/db"
            ) from exc
        return db
    return f"sqlite:///{Path(db).expanduser().resolve()}"
