"""The (space, point) pairs that scripts/bench_search.py replays, from explicit sources (issue 33).

Two kinds of source:
  - a recorded results database (`*.sqlite[.gz]`, e.g. results/complete_h100): one pair per (device, space, test
    point) measured there; the pair's universe is **exactly the instances recorded at that point** (as Instance
    objects rebuilt from their stored parameters), each with its recorded status and median. So a sweep restricted
    by its config's `where:` (complete_h100 keeps 1,639 of gemm_batched_simt's instances) is complete within that
    filter, and the strategies search exactly what was measured. Use only databases swept without early stop
    (`--no-early-stop`): an early-stopped instance's partial median is not its true time.
  - a directory or file of Kernel Tuner caches (`*.json`, `*.json.xz` or `*.json.gz`, e.g. results/bench/hub): each cache is
    imported (`autotune import kerneltuner`, `interop.kt_store.import_cache`) into a temporary database; the
    universe is every configuration in the cache, Kernel Tuner's failed configurations (InvalidConfig,
    CompilationFailedConfig, RuntimeFailedConfig) being failures.
`replay` runs a strategy on a pair as the runner's per-point search drives it (scripts/bench_search.py and
scripts/bench_search_transfer.py both use it).
`discover_complete` keeps the older rule (a pair is complete when every instance the *current* space file
generates for the point was measured at it) for databases swept without a `where:`.
Each pair also knows a Kernel Tuner cache of itself (`kt_cache`): the hub file as it is, or for a database pair
the cache `autotune export kerneltuner DB --space NAME --point KEY` writes.
"""

from __future__ import annotations

import gzip
import json
import lzma
import math
import shutil
import tempfile
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np


from autotune.space.instance import Instance
from autotune.store.store import Store
from autotune.vocab import Measurement, Status, TestPoint

ROOT = Path(__file__).resolve().parent.parent

ASK = 256  # what the runner asks a strategy for per round; a model-based strategy returns its batch (4)

DEFAULT_SOURCES = (
    "results/complete_h100/complete_h100.sqlite.xz",
    "results/complete_conv_h200/complete_conv_h200.sqlite.xz",
    "results/bench/hub",
)


@dataclass
class Pair:
    source: str  # the database or cache file it came from (relative to the repository when inside it)
    device: str
    space: str
    point: TestPoint
    instances: list[Instance]  # the pair's universe, in recorded order
    recorded: dict[str, Measurement]  # instance id -> its measurement at the point
    db: str = ""  # the database holding it (for the Kernel Tuner export)
    kt_source: str | None = None  # a Kernel Tuner cache of exactly this pair, when the source was one
    times: np.ndarray = field(init=False)  # per instance: median ms, NaN for a failure

    def __post_init__(self) -> None:
        self.times = np.array(
            [
                m.median_ms if m.status == Status.OK and m.median_ms is not None else np.nan
                for m in (self.recorded[i.id] for i in self.instances)
            ],
            dtype=float,
        )

    @property
    def true_best(self) -> float:
        return float(np.nanmin(self.times))

    @property
    def label(self) -> str:
        return f"{self.space}@{self.device}@{self.point.key}"

    def kt_cache(self, out_dir: Path) -> Path:
        """A Kernel Tuner cache of this pair (the source cache itself, or exported from the database)."""
        if self.kt_source is not None:
            return Path(self.kt_source)
        from autotune.interop.kerneltuner import write_cache
        from autotune.interop.kt_export import export_cache

        path = out_dir / f"{self.space}_{self.point.key.replace(':', '_')}.json"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with Store.open(self.db, readonly=True) as store:
                write_cache(export_cache(store, self.space, self.device, self.point.key), path)
        return path


@dataclass
class Replayed:
    """One replay: the best verified time after each evaluation (inf before the first) and the verified instances
    with their times, in the order measured."""

    trace: np.ndarray
    measured: list[tuple[float, Instance]]

    def ranked(self) -> list[Instance]:
        """The verified instances, fastest first."""
        return [i for _, i in sorted(self.measured, key=lambda x: x[0])]


def replay(
    pair: Pair,
    strategy: str,
    budget: int,
    seed: int,
    options: dict[str, Any] | None = None,
    *,
    start: Sequence[Instance] = (),
    until_ms: float | None = None,
) -> Replayed:
    """Replay `strategy` on `pair` (ask ASK, tell each proposal its recorded measurement; failures are failures) for
    `budget` evaluations, or until the best verified time is at most `until_ms`. A model-based strategy gets an
    in-memory study, `options` and `start` (instances enqueued first: transfer); the others take neither."""
    from autotune.sweep.strategies import make_strategy, strategy_class

    if getattr(strategy_class(strategy), "model_based", False):
        opts: dict[str, Any] = {"study": None, **(options or {}), **({"start": list(start)} if start else {})}
    elif options or start:
        raise SystemExit(f"error: the {strategy} strategy takes no options and no start instances")
    else:
        opts = {}
    s = make_strategy(strategy, pair.instances, budget, seed, **opts)
    best, trace, measured = math.inf, [], []
    while asked := s.ask(ASK):
        for inst in asked:
            m = pair.recorded[inst.id]
            s.tell(inst, [m])
            if m.status == Status.OK and m.median_ms is not None:
                best = min(best, m.median_ms)
                measured.append((m.median_ms, inst))
            trace.append(best)
            if until_ms is not None and best <= until_ms:
                return Replayed(np.array(trace), measured)
    return Replayed(np.array(trace), measured)


def _rel(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(ROOT))
    except ValueError:
        return str(path)


def pairs_of_database(
    db: Path, min_size: int = 1, label: str | None = None, kt_source: str | None = None
) -> list[Pair]:
    """Every (device, space, point) measured in `db`; the universe of each is the instances recorded there (the
    latest measurement of an instance measured twice). A cache's pair (`kt_source`) is timed by Kernel Tuner's `time`, kept
    in the log, as Kernel Tuner's simulation mode reads it (not the median of its `times`)."""
    from sqlalchemy import select

    from autotune.store.schema import Device, InstanceRow, MeasurementRow, Point

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # older schema versions are read through a migrated copy
        with Store.open(str(db), readonly=True) as store:
            with store.session() as s:
                rows = s.execute(
                    select(
                        MeasurementRow.instance_id,
                        MeasurementRow.status,
                        MeasurementRow.median_ms,
                        MeasurementRow.log,
                        InstanceRow.space,
                        InstanceRow.params,
                        Point,
                        Device.name,
                    )
                    .join(InstanceRow, InstanceRow.id == MeasurementRow.instance_id)
                    .join(Point, Point.id == MeasurementRow.point_id)
                    .join(Device, Device.id == MeasurementRow.device_id)
                    .order_by(MeasurementRow.id)
                ).all()
                groups: dict[tuple, dict[str, tuple]] = {}
                for iid, status, median, log, space, params, p, device in rows:
                    params = json.loads(params) if isinstance(params, str) else params
                    if kt_source is not None and status == Status.OK.value and log:
                        # a cache's own figure, Kernel Tuner's `time` (the mean of its `times`), which its simulation
                        # mode reads too: the import's median of `times` would compare another statistic
                        median = _kt_time(log, median)
                    groups.setdefault((device, space, p.point()), {})[iid] = (status, median, params)
    out = []
    for (device, space, point), got in groups.items():
        if len(got) < min_size:
            continue
        instances = [Instance.of(space, params) for _, _, params in got.values()]
        recorded = {}
        for inst, (iid, (status, median, _)) in zip(instances, got.items(), strict=True):
            if inst.id != iid:
                raise ValueError(f"{db}: instance {iid} of {space} does not rebuild from its parameters")
            recorded[iid] = Measurement(iid, point, Status(status), median_ms=median)
        if not any(m.status == Status.OK and m.median_ms for m in recorded.values()):
            continue
        out.append(
            Pair(
                label or _rel(db),
                device.removeprefix("kerneltuner:"),
                space,
                point,
                instances,
                recorded,
                db=str(db),
                kt_source=kt_source,
            )
        )
    return out


def _kt_time(log: str, median: float | None) -> float | None:
    """Kernel Tuner's `time` kept in an imported measurement's log, else the median."""
    try:
        t = json.loads(log).get("time")
    except (ValueError, AttributeError):
        return median
    return float(t) if isinstance(t, (int, float)) and not isinstance(t, bool) and t > 0 else median


def pairs_of_caches(paths: list[Path], work: Path, min_size: int = 1) -> list[Pair]:
    """Each Kernel Tuner cache imported into its own temporary database under `work`: one pair per cache."""
    from autotune.interop.kt_store import import_cache

    out = []
    work = work / "imported"
    work.mkdir(parents=True, exist_ok=True)
    for path in paths:
        stem = path.name.removesuffix(".gz").removesuffix(".xz").removesuffix(".json")
        plain = work / f"{stem}.json"
        if path.name.endswith((".gz", ".xz")):
            with (gzip.open if path.name.endswith(".gz") else lzma.open)(path, "rb") as src, plain.open("wb") as dst:
                shutil.copyfileobj(src, dst)
        else:
            shutil.copyfile(path, plain)
        db = work / f"{stem}.sqlite"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with Store.open(str(db)) as store:
                import_cache(plain, store, space_out=work / f"{stem}.space.yaml")
        got = pairs_of_database(db, min_size, label=_rel(path), kt_source=str(path))
        for p in got:  # convolution_milo_A100: space convolution_milo on the A100 (the MI250X cache names no device)
            if "_" in stem:
                p.space, p.device = stem.rsplit("_", 1)
        out.extend(got)
    return out


def load_sources(sources: list[str], work: Path, min_size: int = 1) -> list[Pair]:
    """Pairs of every source: databases (*.sqlite, *.sqlite.xz, *.sqlite.gz) and Kernel Tuner caches (files or directories)."""
    pairs: list[Pair] = []
    for src in sources:
        path = Path(src) if Path(src).is_absolute() else ROOT / src
        if path.is_dir():
            dbs = sorted([*path.glob("*.sqlite"), *path.glob("*.sqlite.xz"), *path.glob("*.sqlite.gz")])
            caches = sorted([*path.glob("*.json"), *path.glob("*.json.xz"), *path.glob("*.json.gz")])
            for db in dbs:
                pairs += pairs_of_database(db, min_size)
            pairs += pairs_of_caches(caches, work, min_size)
        elif path.name.endswith((".sqlite", ".sqlite.xz", ".sqlite.gz")):
            pairs += pairs_of_database(path, min_size)
        elif path.name.endswith((".json", ".json.xz", ".json.gz")):
            pairs += pairs_of_caches([path], work, min_size)
        else:
            raise SystemExit(
                f"error: {src}: not a database (*.sqlite[.gz]), a Kernel Tuner cache (*.json[.gz]) "
                "or a directory of them"
            )
    return pairs


def discover_complete(min_size: int = 1) -> list[Pair]:
    """The older rule: pairs of the committed databases that hold every instance the current space file
    generates for the point (H100 limits, hard and soft constraints)."""
    from autotune.devices import get_device
    from autotune.space.generator import generate, serving
    from autotune.space.spec import load_space

    files = {}
    for path in [*sorted((ROOT / "spaces").glob("*.yaml")), *sorted(ROOT.glob("examples/*/space.yaml"))]:
        try:
            files.setdefault(load_space(path).name, path)
        except Exception:  # noqa: BLE001 - a space file that does not load here is not benchmarked
            continue
    device = get_device("H100")
    out, seen, generated = [], set(), {}
    for gz in sorted(ROOT.glob("results/**/*.sqlite.xz")) + sorted(ROOT.glob("examples/*/results/*.sqlite.xz")):
        if "validation" in gz.parts:
            continue
        for p in pairs_of_database(gz, min_size):
            if p.space not in files or (p.space, p.point) in seen:
                continue
            space = load_space(files[p.space])
            if p.point.kind != space.kind.name:
                continue
            key = (p.space, p.point.precision)
            if key not in generated:
                generated[key] = generate(space, device, p.point.precision)
            g = generated[key]
            insts = g.instances()
            wanted = [insts[r] for r in np.flatnonzero(serving(g, p.point))]
            if len(wanted) < min_size or any(i.id not in p.recorded for i in wanted):
                continue
            seen.add((p.space, p.point))
            out.append(
                Pair(p.source, p.device, p.space, p.point, wanted, {i.id: p.recorded[i.id] for i in wanted}, db=p.db)
            )
    return out


def temp_work() -> Path:
    return Path(tempfile.mkdtemp(prefix="bench_search_"))
