"""Results loading: one problem kind's measurements, library times and provenance from a results database (a path to
an SQLite file or an SQLAlchemy URL) or a measurements CSV with the columns of Store.measurements()
(autotune.workflows.measurements_csv; point_key optional). `autotune analyze`, `emit`, `report`, `compare` and
active tuning read their sources here."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from autotune.errors import UserError
from autotune.workflows.measurements_csv import read_measurements_csv

if TYPE_CHECKING:  # imported where used: `autotune --help` does not load pandas (tests/test_startup.py)
    import pandas as pd

    from autotune.analysis.winners import Layout
    from autotune.dispatch.table import Provenance
    from autotune.store.store import Store


# what a table records of its GPU
DEVICE_INFO = ("name", "uuid", "cc", "sm_count", "sm_clock_mhz", "mem_clock_mhz", "copy_bandwidth")


@dataclass(frozen=True)
class Loaded:
    """One problem kind's measurements on one GPU, what they need to become a table."""

    frame: pd.DataFrame  # Store.measurements() rows of this kind
    layout: Layout  # the kind's sizes and the kind object (its bytes, flops, baseline, generic kernel)
    baseline: pd.DataFrame | None  # the kind's verified library (baseline) times: point columns and median_ms
    provenance: Provenance  # device, sweeps, software, the sweeps' scalars
    bandwidth: float | None  # measured copy bandwidth, bytes/s

    @property
    def scalars(self) -> dict:
        return dict(self.provenance.scalars)

    def summary(self) -> pd.DataFrame:
        """What `autotune report` writes as summary.csv: per test point the best verified instance, its time,
        roofline fraction and the library comparison."""
        from autotune.analysis.winners import perf_matrix
        from autotune.dispatch.report import summary_frame

        return summary_frame(perf_matrix(self.frame, self.layout), self.baseline, self.bandwidth, self.scalars)


def source_url(source: str) -> str:
    from autotune.store.engine import database_url

    return database_url(source)


def kind_object(name: str, frame: pd.DataFrame, sizes: tuple[str, ...]):
    """The problem kind of a database's measurements: from a recorded space of that kind (store/spaces.py points
    the space loader at the recorded versions), else the built-in kind of that name, else None."""
    from autotune.space.spec import load_space

    for space_name in dict.fromkeys(frame["space"].dropna().astype(str)) if "space" in frame.columns else ():
        try:
            kind = load_space(space_name).kind
        except Exception:  # noqa: BLE001 - a space not on this machine: try the next one
            continue
        if kind.name == name:
            return kind
    from autotune.problems.registry import BUILT_IN

    builtin = BUILT_IN.get(name)
    return builtin if builtin is not None and tuple(builtin.size_names) == tuple(sizes) else None


def kind_layout(name: str, frame: pd.DataFrame, sizes: tuple[str, ...]) -> Layout:
    from autotune.analysis.winners import Layout

    kind = kind_object(name, frame, sizes)
    if kind is not None:
        return Layout.of(kind)
    return Layout(name, tuple(sizes), tuple(sizes), (), ())


def kinds_in(source: str) -> dict[str, tuple[str, ...]]:
    """The problem kinds measured in a database (or CSV) and their size names."""
    from autotune.analysis.winners import Layout

    if source.endswith(".csv"):
        frame = read_measurements_csv(source, nrows=50)
        layout = Layout.infer(frame)
        return {layout.kind or "": layout.sizes}
    from autotune.store.store import Store

    with Store.open(source_url(source), create=False, readonly=True) as store:
        return store.kind_sizes()


def one_kind(source: str, kind: str | None) -> str | None:
    """The kind a command works on: `kind`, else the only kind of the database (UserError when there are several)."""
    kinds = kinds_in(source)
    if kind is not None:
        if kind not in kinds:
            raise UserError(
                f"--kind {kind}: no such problem kind in {source}",
                hint=f"kinds measured there: {', '.join(kinds) or 'none'}",
            )
        return kind
    if len(kinds) > 1:
        raise UserError(f"{source} holds several problem kinds ({', '.join(kinds)}): pick one with --kind")
    return next(iter(kinds), None)


def first_card_rows(frames: list[pd.DataFrame], keys: list[str]) -> pd.DataFrame:
    """The frames (one per card, first recorded card first) as one, each (keys...) once: the first card's row."""
    import pandas as pd

    frame = pd.concat(frames, ignore_index=True)
    return frame.drop_duplicates(subset=[k for k in keys if k in frame.columns], keep="first").reset_index(drop=True)


def _measured_hint(measured: list[tuple[str, str, str]], kind: str) -> str:
    """What to do where --device/--space select nothing: the devices and spaces that have `kind`'s measurements."""
    devices = sorted({f"{name} ({uuid})" for name, uuid, _ in measured})
    spaces = sorted({space for _, _, space in measured})
    return (
        f"give --device the name or uuid of a GPU that measured {kind}: {', '.join(devices)}; --space one of "
        f"its spaces (or none): {', '.join(spaces[:20])}{', ...' if len(spaces) > 20 else ''}"
    )


def _one_device(
    store: Store, frame: pd.DataFrame, source: str, device: str | None, space: str | None, kind: str
) -> str:
    """The one GPU model of the selected measurements; UserError when they hold none (naming what the database
    measured) or several."""
    devices = sorted(frame["device"].unique()) if len(frame) else []
    if len(devices) > 1:
        raise UserError(f"{source} holds measurements of several GPUs ({', '.join(devices)}): pick one with --device")
    if not devices:
        raise UserError(
            f"no measurements in {source} for device={device!r} space={space!r} kind={kind!r}",
            hint=_measured_hint(store.measured(kind), kind),
        )
    return str(devices[0])


def load_results(
    source: str, device: str | None, space: str | None, recorded_spaces: bool = True, kind: str | None = None
) -> Loaded:
    """Measurements, library times and provenance of one problem kind (`kind`, default: the only one) from a
    database or a CSV file."""
    from autotune.analysis.winners import Layout
    from autotune.dispatch.table import Provenance

    if source.endswith(".csv"):
        frame = read_measurements_csv(source)
        if device is not None and "device" in frame.columns:
            frame = frame[frame["device"] == device]
        if space is not None and "space" in frame.columns:
            frame = frame[frame["space"] == space]
        name = device or (str(frame["device"].iloc[0]) if "device" in frame.columns and len(frame) else "unknown")
        _require_verified(frame, source)
        return Loaded(frame, Layout.infer(frame), None, Provenance(device=name), None)
    from autotune.dispatch.validate import model_cards
    from autotune.store.query import run_query
    from autotune.store.store import Store

    url = source_url(source)
    if recorded_spaces:  # the kernels as measured, not as the work tree holds them now
        from autotune.store.spaces import use_stored_spaces

        use_stored_spaces(url)  # (dispatch.validity's caches follow: keyed by the file a name resolves to)
    kind = one_kind(source, kind)
    if kind is None:
        raise UserError(f"no measurements in {source}", hint="run `autotune sweep CONFIG` into it first")
    with Store.open(url, create=False, readonly=True) as store:
        sizes = store.kind_sizes().get(kind, ())
        frame = store.measurements(device=device, space=space)
        if "kind" in frame.columns:
            frame = frame[frame["kind"] == kind]
        # the cards of one GPU model count as one GPU (a sweep that went on on another card): where two cards
        # measured the same pair, the first recorded card's measurement counts (as `--replay` answers); `device`
        # alone where it is one card's uuid
        cards = model_cards(store, _one_device(store, frame, source, device, space, kind))
        cards = [device] if device is not None and device in cards else cards
        info = store.device_info(store.device_id(cards[0]))
        point = ["kind", "precision", "shape", *sizes]
        if len(cards) > 1:
            frame = first_card_rows([store.measurements(device=c, space=space) for c in cards], ["instance_id", *point])
            frame = frame[frame["kind"] == kind] if "kind" in frame.columns else frame
        baseline = first_card_rows([store.baselines(device=c) for c in cards], point)
    layout = kind_layout(kind, frame, tuple(sizes))
    frame = frame.drop(columns=[c for c in frame.columns if c in other_sizes(frame, layout)])
    baseline = baseline[(baseline["kind"] == kind) & (baseline["status"] == "ok")] if len(baseline) else None
    _require_verified(frame, source)
    sweeps = sorted(int(s) for s in frame["sweep_id"].unique())
    sw = run_query(url, f"SELECT * FROM sweeps WHERE id IN ({', '.join(map(str, sweeps))})")
    prov = Provenance(
        device=info.name,
        sweep_ids=tuple(str(s) for s in sweeps),
        device_info={k: getattr(info, k) for k in DEVICE_INFO},
        software={**{k: getattr(info, k) for k in ("driver", "cuda_runtime", "nvrtc", "cupy")}, "autotune": _version()},
        scalars=_scalars(sw, layout),
    )
    bandwidth = float(sw["copy_bandwidth"].median()) if len(sw) else info.copy_bandwidth
    return Loaded(frame, layout, baseline, prov, bandwidth)


def other_sizes(frame: pd.DataFrame, layout: Layout) -> list[str]:
    """Size columns of other kinds in a frame of one kind (all empty there): dropped, so that the kind's sizes
    stand between `shape` and `status`."""
    cols = list(frame.columns)
    if "shape" not in cols or "status" not in cols:
        return []
    between = cols[cols.index("shape") + 1 : cols.index("status")]
    return [c for c in between if c not in layout.sizes and c != "sizes" and frame[c].isna().all()]


def _scalars(sweeps: pd.DataFrame, layout: Layout) -> dict[str, float]:
    """The kind's scalars the sweeps ran with (a `scalars` JSON column, or one column per scalar); where sweeps
    differ, a scalar that is nonzero in any of them counts (bytes moved read it)."""
    import json

    kind = layout.kind_object
    names = list(kind.scalar_defaults) if kind is not None else []
    out: dict[str, float] = {}
    for row in sweeps.to_dict("records"):
        given = (
            json.loads(row["scalars"])
            if isinstance(row.get("scalars"), str)
            else {n: row[n] for n in names if n in row and row[n] is not None}
        )
        for n, v in given.items():
            if n in names and (n not in out or float(v) != 0.0):
                out[n] = float(v)
    return out


def _require_verified(frame: pd.DataFrame, source: str) -> None:
    """A UserError (exit 2) when no measurement has a verified time: there is nothing to analyze."""
    if "status" not in frame.columns or (frame["status"] == "ok").any():
        return
    kinds = ", ".join(f"{k}: {v:,}" for k, v in frame["status"].value_counts().sort_index().items()) or "none"
    raise UserError(
        f"nothing verified to analyze in {source}: {len(frame):,} measurements, none with status ok ({kinds})",
        hint="look at the failures first (`autotune query` with docs/queries.md's 'Failures by "
        "kind' recipe), fix the kernels or the config, and sweep again",
    )


def _version() -> str:
    """The version every dispatch.json records: the package's one version (autotune.__version__)."""
    from autotune import __version__

    return __version__
