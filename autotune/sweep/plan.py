"""The sweep's plan: which instances of each space are measured at which test points (hard and soft constraints, the
config's `where:`, `serves:`, a space's own points), before anything runs (`autotune.sweep.runner`)."""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

from autotune.devices import DeviceLimits, get_device
from autotune.problems.recorded import RecordedKind
from autotune.errors import SpaceError, UserError
from autotune.space.generator import Generated, generate, serving, valid_rows, where
from autotune.space.instance import Instance
from autotune.space.spec import Space, load_space
from autotune.sweep.config import ALL_INSTANCES, SpaceRef, SweepConfig
from autotune.vocab import TestPoint


@dataclass
class SpacePlan:
    """One space of the config: its instances and, for each, the test points it serves."""

    space: Space
    work: dict[Instance, tuple[TestPoint, ...]]
    funnel_count: dict[str, int]  # precision -> instances after the constraints
    max_instances: int | None = None  # the space entry's own limit (ALL_INSTANCES: none), else the config's
    share: int = 0  # sharing budget: more points per BK-best instance after the main phase
    # per instance, the config's points where it is valid but not measured in the main phase, in config order
    # (filled only when share > 0); `shared_points` orders them for the instances the sharing phase picks
    extra: dict[Instance, tuple[TestPoint, ...]] = field(default_factory=dict)

    def shared_points(self, inst: Instance) -> tuple[TestPoint, ...]:
        """The instance's extra valid points, nearest (kind.distance) to one of its own points of the same
        precision and variant first (ties: config order); points of other precisions or variants are left out."""
        own = self.work[inst]

        def gap(q: TestPoint) -> float:
            return min(
                (self.space.kind.distance(q, h) for h in own if (h.precision, h.shape) == (q.precision, q.shape)),
                default=math.inf,
            )

        ranked = sorted(((gap(q), i, q) for i, q in enumerate(self.extra.get(inst, ()))), key=lambda t: t[:2])
        return tuple(q for d, _, q in ranked if math.isfinite(d))

    def limit(self, cfg: SweepConfig) -> int | None:
        """At most this many instances of this space are measured (None: every one)."""
        if self.max_instances is None:
            return cfg.max_instances
        return None if self.max_instances == ALL_INSTANCES else self.max_instances

    @property
    def pairs(self) -> int:
        return sum(len(p) for p in self.work.values())

    def _point_lists(self) -> list[tuple[tuple[TestPoint, ...], int]]:
        """The work's distinct point tuples (plan_sweep shares one among the instances with the same points) and
        how many instances hold each: what counting over points needs, without hashing every pair."""
        seen: dict[int, list] = {}
        for pts in self.work.values():
            entry = seen.get(id(pts))
            if entry is None:
                seen[id(pts)] = [pts, 1]
            else:
                entry[1] += 1
        return [(pts, n) for pts, n in seen.values()]

    def points(self) -> list[TestPoint]:
        """The distinct test points the plan measures, sorted."""
        return sorted({p for pts, _ in self._point_lists() for p in pts})

    def point_pairs(self, budget: int | None) -> int:
        """Pairs a per-point search of at most `budget` evaluations per point measures (at most)."""
        per: Counter[TestPoint] = Counter()
        for pts, n in self._point_lists():
            for p in pts:
                per[p] += n
        return sum(n if budget is None else min(n, budget) for n in per.values())

    def expected_pairs(self, max_instances: int | None) -> int:
        """Pairs a sweep of at most `max_instances` instances will measure (on average per instance)."""
        if max_instances is None or max_instances >= len(self.work):
            return self.pairs
        return round(self.pairs * max_instances / len(self.work))


def plan_sweep(cfg: SweepConfig, limits: Callable[[str | None], DeviceLimits] = get_device) -> list[SpacePlan]:
    """Generate every space of the config for each precision its test points use.

    An instance is measured at the points its space's `serves` expression assigns to it (`measure: valid`: at
    every point where its `valid` expression holds). With `instances:` only the named instances are kept; where the
    entry's soft constraints drop some of them (an id names a kernel measured before, e.g. one of a table made from a
    CSV of measurements swept with other soft settings), the entry is planned again without soft constraints: only
    the hard constraints and `where:` can refuse a named instance."""
    plans = []
    for ref in cfg.spaces:
        space = load_space(ref.path)
        if space.kernel is None and not isinstance(space.kind, RecordedKind):  # recorded: replay only (runner)
            raise UserError(
                f"space {space.name} has no kernel binding and cannot be swept",
                file=ref.path,
                hint="add a `kernel:` section (docs/space-files.md)",
            )
        share = cfg.share if ref.share is None else ref.share
        work, valid, counts, found = _entry(cfg, ref, space, limits(ref.device), share, ref.soft)
        if ref.instances is not None and ref.soft and set(ref.instances) - found:
            work, valid, counts, found = _entry(cfg, ref, space, limits(ref.device), share, False)
        if ref.instances is not None and set(ref.instances) - found:
            raise _missing_instances(cfg, ref, space, sorted(set(ref.instances) - found))
        if not work and ref.instances is not None:
            continue  # named instances valid at none of these points (e.g. `autotune validate`): nothing to do
        if not work:
            raise _no_points(cfg, space, ref, counts)
        extra = {i: tuple(q for q in pts if q not in set(work[i])) for i, pts in valid.items() if i in work}
        plans.append(
            SpacePlan(
                space,
                {i: p if isinstance(p, tuple) else tuple(p) for i, p in work.items()},
                counts,
                ref.max_instances,
                share,
                {i: pts for i, pts in extra.items() if pts},
            )
        )
    if not plans:
        raise UserError(
            "none of the named instances is valid at any of the config's test points",
            file=cfg.path,
            hint="check the points' sizes against the spaces' `problems.where` and `valid`",
        )
    return plans


def _entry(
    cfg: SweepConfig, ref: SpaceRef, space: Space, device: DeviceLimits, share: int, soft: bool
) -> tuple[dict, dict, dict[str, int], set[str]]:
    """One space entry's work (instance -> the points it is measured at), its valid points where sharing needs them,
    the instances kept per precision and the named ids found (generated with or without the soft constraints)."""
    work: dict[Instance, list[TestPoint] | tuple[TestPoint, ...]] = {}
    valid: dict[Instance, list[TestPoint] | tuple[TestPoint, ...]] = {}
    counts = {}
    found: set[str] = set()
    for precision in dict.fromkeys(p.precision for p in cfg.points):
        points = [p for p in cfg.points if p.precision == precision and space.accepts(p)]
        if not points:
            continue
        g = generate(space, device, precision, soft=soft, soft_off=ref.soft_off)
        kept = _kept(g, ref.where, cfg, ref.line)
        instances = g.instances()
        if ref.instances is not None:
            wanted = set(ref.instances)
            chosen = np.array([i.id in wanted for i in instances], dtype=bool)
            found |= {i.id for i, c in zip(instances, chosen, strict=True) if c}
            kept &= chosen
        counts[precision] = int(kept.sum())
        oks, measures = [], []
        for p in points:
            ok = valid_rows(g, p) & kept if share > 0 or ref.measure == "valid" else None
            measures.append(ok if ok is not None and ref.measure == "valid" else serving(g, p) & kept)
            if share > 0:
                oks.append(ok)
        _add_rows(work, instances, points, measures)
        if share > 0:
            _add_rows(valid, instances, points, oks)
    return work, valid, counts, found


def _missing_instances(cfg: SweepConfig, ref: SpaceRef, space: Space, missing: list[str]) -> UserError:
    """Some of the instances a space entry names are not in the space."""
    return UserError(
        f"space {space.name}: {len(missing)} of the named instances are not in the space "
        f"(after its hard constraints and `where:`), e.g. {missing[0]}",
        file=cfg.path,
        line=ref.line,
        hint="check the ids with `autotune space list` (the space file may have changed since they were recorded); "
        "`soft: false` in the entry reaches instances the soft constraints drop",
    )


def _no_points(cfg: SweepConfig, space: Space, ref: SpaceRef, counts: dict[str, int]) -> UserError:
    """Nothing to measure for the entry: the space accepts none of the config's test points, or the entry keeps no
    instance (`counts`: instances kept per precision of an accepted point), or none it keeps serves those points."""
    if counts and not any(counts.values()):
        return UserError(
            f"space {space.name}: the entry keeps no instance (its where:, instances: or the constraints leave none)",
            file=cfg.path,
            line=ref.line,
            hint="loosen the entry's `where:` (`autotune space list` shows the instances; `soft: false` reaches "
            "instances the soft constraints drop)",
        )
    if counts:
        return UserError(
            f"space {space.name}: none of its {sum(counts.values())} instances is valid at the config's test points",
            file=cfg.path,
            line=ref.line,
            hint="check the points' sizes against the space's `valid` and `serves` (or add points it serves)",
        )
    accepted = space.kernel.problems if space.kernel is not None else space.kind  # recorded: the kind's
    shapes = f" and shapes {', '.join(accepted.shapes)}" if accepted.shapes else ""
    return UserError(
        f"space {space.name} accepts none of the config's test points",
        file=cfg.path,
        hint=f"it accepts precisions {', '.join(accepted.precisions)}{shapes}",
    )


def _add_rows(
    out: dict[Instance, list[TestPoint] | tuple[TestPoint, ...]],
    instances: list[Instance],
    points: list[TestPoint],
    masks: list[Any],
) -> None:
    """For each point in order, append it to the instances of the rows its mask holds, adding new instances in that
    order (a point's rows, then the next point's new rows): what a loop over points and rows does, with one dict
    operation per instance instead of one per (instance, point) pair. Rows with the same set of points share one
    tuple of them (until another precision's points are appended to an instance's)."""
    if not masks:
        return
    table = np.stack([np.asarray(m, dtype=bool) for m in masks])  # points x rows
    rows = np.flatnonzero(table.any(axis=0))
    if not rows.size:
        return
    first = table[:, rows].argmax(axis=0)  # the first point of each row: the order rows join the dict in
    rows = rows[np.lexsort((rows, first))]
    patterns, which = np.unique(table[:, rows].T, axis=0, return_inverse=True)
    shared = [tuple(points[j] for j in np.flatnonzero(pattern)) for pattern in patterns]
    kinds: list[int] = np.asarray(which).reshape(-1).tolist()
    if not out:  # (the first precision: every instance is new)
        out.update(zip([instances[row] for row in rows.tolist()], [shared[k] for k in kinds], strict=True))
        return
    for row, k in zip(rows.tolist(), kinds, strict=True):
        inst = instances[row]
        have = out.get(inst)
        if have is None:
            out[inst] = shared[k]
        else:
            out[inst] = [*have, *shared[k]]


def _kept(g: Generated, text: str | None, cfg: SweepConfig, line: int | None) -> np.ndarray:
    """The rows a space entry's `where:` keeps (all rows without one); errors point at the config."""
    if text is None:
        return np.ones(g.count, dtype=bool)
    try:
        return where(g, text, label="where")
    except SpaceError as exc:
        raise UserError(f"{g.space.name}: {exc.message}", file=cfg.path, line=line, expr=text, hint=exc.hint) from None


def refuse_recorded_without_replay(plans: Sequence[SpacePlan], held: set[tuple[str, TestPoint]] | None) -> None:
    """Only a replay (its own backend, or Dask's workers replaying), which names its pairs, answers a space without
    a kernel (an imported Kernel Tuner cache): UserError otherwise."""
    recorded = [plan.space for plan in plans if plan.space.kernel is None]
    if recorded and held is None:
        raise UserError(
            f"space {recorded[0].name} holds recorded measurements only (an imported Kernel Tuner cache): it has "
            "no kernel to measure",
            file=recorded[0].path,
            hint="replay it: autotune sweep CONFIG --replay DB (the database the cache was imported into); to "
            "measure it, add a `kernel:` binding and a `problem:` section with the kernel's arguments (docs/kinds.md)",
        )


def refuse_nothing_recorded(
    plans: Sequence[SpacePlan], held: set[tuple[str, TestPoint]] | None, recording: str | None
) -> None:
    """`autotune sweep --replay DB` whose recording (`held`, the backend's `recorded_pairs`) holds none of the pairs
    the plans hold: one UserError naming `recording`, what it holds and what the config asks, before the sweep
    begins (it would measure nothing and record an empty sweep `done`). Nothing is checked where `recording` or
    `held` is None (validate and active replay held-out problems a recording may lack: they run empty)."""
    if recording is None or held is None:
        return
    if any((inst.id, p) in held for plan in plans for inst, pts in plan.work.items() for p in pts):
        return
    asked = {p for plan in plans for p in plan.points()}
    if not asked:
        return
    has = {p for _, p in held}

    def kinds(points: set[TestPoint]) -> str:
        names = sorted({p.kind for p in points})
        return f"kind{'s' if len(names) > 1 else ''} {', '.join(names)} at {len(points):,} test points"

    holds = f"{len(held):,} pairs of {kinds(has)}" if held else "no measurement"
    shared = len(asked & has)
    others = f", {shared:,} of them the config's (other instances than its spaces')" if shared else ""
    raise UserError(
        f"the recording holds none of the {sum(plan.pairs for plan in plans):,} (instance, test point) pairs the "
        f"config plans: it holds {holds}{others}; the config asks {kinds(asked)}",
        file=recording,
        hint="replay the database of a sweep of this config's spaces at its test points, or drop --replay to "
        "measure on a GPU",
    )


def share_plans(
    plans: Sequence[SpacePlan], ranked: dict[TestPoint, list[str]], bk: int, done: set[tuple[str, TestPoint]]
) -> list[SpacePlan]:
    """The sharing phase's work: each instance among the `bk` fastest verified at a point it was measured on in
    the main phase is measured at up to `plan.share` more points where it is valid, nearest first; pairs already
    in the database count toward the budget (an instance's points do not change when a sweep resumes)."""
    out = []
    for plan in plans:
        if plan.share <= 0:
            continue
        work = {}
        for inst in plan.extra:
            if not any(inst.id in ranked.get(p, [])[:bk] for p in plan.work[inst]):
                continue
            todo = tuple(q for q in plan.shared_points(inst)[: plan.share] if (inst.id, q) not in done)
            if todo:
                work[inst] = todo
        if work:
            out.append(SpacePlan(plan.space, work, plan.funnel_count, ALL_INSTANCES))
    return out
