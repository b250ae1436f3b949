"""Active tuning: measure where the table loses most, add those problems as tuned points,
rebuild, repeat.

Round r (0, 1, ...):
1. build the table from the tuning database (the structure given, e.g. the selection model);
2. draw a FRESH held-out set (seed `seed + r`; never a tuned point, never a problem of an earlier round) and
   validate the table there (`autotune validate`: the table's kernels, the `pool_bk` fastest instances of every
   tuned point and the library, each measured where valid); its figures are the round's report, measured on
   problems the table was never built from;
3. stop when the figures meet the targets (dispatch/figures.py) or the rounds or the time budget are spent;
4. else the `add` problems of that set with the largest measured loss become tuned points: the tuning config's
   spaces and instances are swept there (`measure: valid`, into the tuning database), and the next round
   rebuilds. A problem added in round r is never part of a later round's held-out set, so every reported figure
   is on problems nobody tuned.

Each round writes ROUND/dispatch.json, ROUND/validation/ (validation.csv, validation.sqlite, ...) and
ROUND/add_sweep.yaml under `out_dir`; `active.json` holds every round's figures. With `replay` the measuring comes
from a recorded database (the replay backend; CPU tests).
"""

from __future__ import annotations

import dataclasses
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Sequence

import pandas as pd
import yaml

from autotune import yamlfile
from autotune.dispatch.figures import Figures, validated_figures
from autotune.errors import UserError

if TYPE_CHECKING:
    from autotune.sweep.runner import Reporter


@dataclass
class Round:
    number: int
    tuned_points: int
    kernels: int
    figures: Figures
    added: list[dict[str, Any]] = field(default_factory=list)  # the problems made tuned points after this round
    seconds: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return {
            "round": self.number,
            "tuned_points": self.tuned_points,
            "kernels": self.kernels,
            "figures": self.figures.as_dict(),
            "added": self.added,
            "seconds": round(self.seconds, 1),
        }


@dataclass(frozen=True)
class ActiveOptions:
    tuning_db: str  # path or URL of the tuning database (written: the added points are measured into it)
    config: Path  # the tuning sweep config (its spaces and instances are measured at the added points)
    out_dir: Path
    workload: Path | None = None  # bounds of the held-out draws (else the table's tuned ranges)
    rounds: int = 3
    add: int = 20  # problems added per round
    heldout: int = 200  # fresh held-out problems per round
    seed: int = 1000
    budget_s: float | None = None
    structure: str = "model"  # --structure of `autotune report` (auto: chosen by leave-one-out each round)
    bk: int = 10
    tol: float = 0.1
    pool_bk: int = 3
    repetitions: int = 20
    include_dir: Path | None = None
    replay: str | None = None  # take every measurement from this recorded database (no GPU)
    points: Path | None = None  # draw held-out problems from this points file instead of at random (tests)
    seed_from: Path | None = None  # an earlier validation folder: its `add` worst problems are tuned before round 0
    spaces: tuple[Path, ...] = ()  # space files of the table's kernels (else those the tuning database recorded)


def build_round_table(opts: ActiveOptions, path: Path) -> Any:
    """The table of the tuning database as it is now, saved at `path`."""
    from autotune.workflows.results import load_results
    from autotune.workflows.tables import TableOptions, build_table

    table_opts = TableOptions(
        bk=opts.bk, tol=opts.tol, structure=opts.structure, workload=opts.workload, include_dir=opts.include_dir
    )
    built = build_table(load_results(opts.tuning_db, None, None), table_opts)
    built.table.save(path)
    return built.table


def checked_first_table(opts: ActiveOptions) -> Any:
    """The first round's table, built outside OUT, once the tuning config (its space files) loads, where problems
    will be added (a second round, or --seed-from), and the space files of the table's kernels are found: a missing
    one is one UserError before anything is written."""
    import tempfile

    from autotune.sweep.config import load_config

    if opts.seed_from is not None or (opts.rounds > 1 and opts.add > 0):
        load_config(opts.config)
    refuse_packed_tuning_db(opts)
    with tempfile.TemporaryDirectory(prefix="autotune-active-") as tmp:
        path = Path(tmp) / "dispatch.json"
        table = build_round_table(opts, path)
        table_kind_of(opts, path)
    return table


def refuse_packed_tuning_db(opts: ActiveOptions) -> None:
    """A compressed tuning database (.sqlite.xz, .sqlite.gz) is read through a decompressed copy that is never
    written: a run that adds problems to it (a second round with --add > 0, or --seed-from) is one UserError."""
    from autotune.store.engine import gz_path

    packed = gz_path(str(opts.tuning_db))
    if packed is None or opts.add == 0 or (opts.seed_from is None and opts.rounds == 1):
        return
    plain = packed.with_suffix("")
    raise UserError(
        f"{packed}: the tuning database must be a plain .sqlite file, not a compressed one: active adds the "
        "measurements of each round's worst problems to it",
        hint=f"autotune db unpack {packed} --out {plain} and pass {plain} (or give --rounds 1 without --seed-from, "
        "or --add 0, to only measure the table)",
    )


def table_kind_of(opts: ActiveOptions, table_path: Path) -> Any:
    """The kind of the table at `table_path`: built in, or declared by a space file the tuning database recorded
    (as `autotune validate --db` finds it)."""
    from autotune.dispatch import validate as v

    table = v.read_table(table_path)
    return v.table_kind(table, list(table_spaces(opts, table_path)))


def table_spaces(opts: ActiveOptions, table_path: Path) -> tuple[Path, ...]:
    """The space files the tuning database recorded for the table's kernels (a declared kind needs them)."""
    from autotune.dispatch import validate as v
    from autotune.store.engine import database_url
    from autotune.workflows.validation import table_space_files

    return tuple(table_space_files(v.read_table(table_path), database_url(opts.tuning_db), opts.spaces))


def draw_points(opts: ActiveOptions, table_path: Path, round_no: int, exclude: set[tuple]) -> Path:
    """A points file of this round's fresh held-out problems (none tuned, none of an earlier round)."""
    from autotune.dispatch import validate as v
    from autotune.dispatch.validate_points import derived_rule

    table = v.read_table(table_path)
    kind = table_kind_of(opts, table_path)
    rule = derived_rule(table, kind, None)
    tuned = v.tuned_keys(table, kind)
    if opts.points is not None:
        pool = v.read_points(opts.points, kind, rule)
        import random

        rng = random.Random(opts.seed + round_no)
        fresh = [
            p
            for p in pool
            if _key(p) not in exclude
            and (p.precision, p.shape, *(dict(p.sizes)[n] for n in kind.table_sizes())) not in tuned
        ]
        rng.shuffle(fresh)
        chosen = fresh[: opts.heldout]
    else:
        from autotune.workflows.validation import table_workload

        workload = table_workload(opts.workload, kind, [])
        chosen, seed = [], opts.seed + 7919 * round_no
        while len(chosen) < opts.heldout:
            drawn = v.random_points(table, kind, opts.heldout, seed, rule, workload)
            chosen += [p for p in drawn if _key(p) not in exclude and p not in chosen]
            seed += 1
        chosen = chosen[: opts.heldout]
    if not chosen:
        raise UserError("no fresh held-out problems left to draw", hint="give a larger --points pool or fewer rounds")
    out = opts.out_dir / f"round{round_no}" / "heldout.csv"
    out.parent.mkdir(parents=True, exist_ok=True)
    names = list(kind.size_names)
    shaped = any(p.shape for p in chosen)  # a kind without shapes takes no shape column
    pd.DataFrame(
        [{"precision": p.precision, "shape": p.shape, **dict(p.sizes)} for p in chosen],
        columns=["precision", *(["shape"] if shaped else []), *names],
    ).to_csv(out, index=False)
    return out


def _key(p: Any) -> tuple:
    return (p.precision, p.shape, *(v for _, v in p.sizes))


def validate_round(
    opts: ActiveOptions,
    table_path: Path,
    points: Path,
    folder: Path,
    reporter: Reporter | None = None,
    say: Callable[[str], None] = print,
) -> None:
    """The validation of the round's table at its held-out problems (measured, or replayed)."""
    from autotune.workflows.sweeps import Launch
    from autotune.workflows.validation import ValidationOptions, validate_table

    done = validate_table(
        ValidationOptions(
            table_path,
            folder,
            db=opts.tuning_db,
            points=points,
            spaces=opts.spaces,
            pool_bk=opts.pool_bk,
            database=f"sqlite:///{(folder / 'validation.sqlite').resolve()}",
            launch=Launch(replay=opts.replay),
            repetitions=opts.repetitions,
            tol=opts.tol,
        ),
        reporter,
        say,
    )
    if done.figures is None:
        raise KeyboardInterrupt  # a stop (Ctrl-C, SIGTERM), not a mistake: `interrupted`, exit code 130


def worst_problems(folder: Path, count: int) -> list[dict[str, Any]]:
    """The `count` held-out problems of validation.csv with the largest measured loss (ties: file order)."""
    frame = pd.read_csv(folder / "validation.csv", keep_default_na=False, na_values=[""])
    frame = frame[pd.to_numeric(frame["loss_vs_best"], errors="coerce").notna()]
    top = frame.sort_values("loss_vs_best", ascending=False, kind="stable").head(count)
    return top.to_dict("records")


def add_points(
    opts: ActiveOptions, problems: Sequence[dict[str, Any]], folder: Path, kind: Any, reporter: Reporter | None = None
) -> Path:
    """Sweep the tuning config's spaces and instances at `problems` into the tuning database."""
    from autotune.workflows.sweeps import Launch, launch_sweep
    from autotune.store.engine import database_url
    from autotune.sweep.config import load_config

    doc = yamlfile.safe_load(opts.config.read_text())
    groups = []
    for r in problems:
        group: dict[str, Any] = {"kind": kind.name, "precisions": [str(r["precision"])]}
        if isinstance(r.get("shape"), str) and r["shape"]:
            group["shapes"] = [str(r["shape"])]
        group["sizes"] = {n: [int(r[n])] for n in kind.size_names}
        groups.append(group)
    doc["spaces"] = _entries_for(opts, doc.get("spaces") or [], problems, kind)
    if not doc["spaces"]:
        raise UserError(f"no space of {opts.config} has an instance for the added problems' precisions and sizes")
    doc.update(
        {
            "name": f"{doc.get('name', 'tuning')}_active_{folder.name}",
            "points": groups,
            "database": database_url(opts.tuning_db, write=True),
        }
    )
    path = folder / "add_sweep.yaml"
    path.write_text(
        "# written by `autotune active`: the tuning config's spaces at the problems added this round\n"
        + yaml.safe_dump(doc, sort_keys=False, default_flow_style=None, width=120)
    )
    summary = launch_sweep(load_config(path), Launch(replay=opts.replay), reporter).summary
    if summary.status == "interrupted":
        raise KeyboardInterrupt  # a stop (Ctrl-C, SIGTERM), not a mistake: `interrupted`, exit code 130
    return path


def _entries_for(opts: ActiveOptions, entries: list, problems: Sequence[dict[str, Any]], kind: Any) -> list:
    """The config's space entries that can measure something at `problems`: a space that accepts none of them is
    dropped (a sweep refuses named instances it cannot generate), and named instances keep only those measured in
    the tuning database at the problems' precisions (an instance id belongs to one precision)."""
    from autotune.space.spec import load_space
    from autotune.store.engine import database_url
    from autotune.store.store import Store

    with Store.open(database_url(opts.tuning_db), create=False, readonly=True) as store:
        frame = store.measurements()
    precisions = {str(r["precision"]) for r in problems}
    known = set(frame.loc[frame["precision"].astype(str).isin(precisions), "instance_id"].astype(str))
    points = [
        kind.point(
            str(r["precision"]),
            r["shape"] if isinstance(r.get("shape"), str) else "",
            {n: int(r[n]) for n in kind.size_names},
        )
        for r in problems
    ]
    out = []
    for entry in entries:
        entry = _resolved(entry, opts.config.parent)
        ref = entry.get("space") if isinstance(entry, dict) else entry
        if not isinstance(ref, (str, Path)):  # no space named (Path() would raise): the sweep reports it
            out.append(entry)
            continue
        try:
            space = load_space(ref)
        except Exception:  # noqa: BLE001 - the sweep reports a missing space with its own message
            out.append(entry)
            continue
        if not any(space.accepts(p) for p in points):
            continue
        if isinstance(entry, dict) and entry.get("instances") is not None:
            ids = [i for i in entry["instances"] if str(i) in known]
            if not ids:
                continue
            entry = {**entry, "instances": ids}
        out.append(entry)
    return out


def seed_earlier(
    opts: ActiveOptions, say: Callable[[str], None] = print, reporter: Reporter | None = None
) -> list[dict[str, Any]]:
    """Round "-1" from an earlier validation (`opts.seed_from`, a folder with validation.csv, measured before on
    problems now spent): its `add` problems with the largest measured loss are swept into the tuning database
    (OUT/seed/add_sweep.yaml), so round 0 starts from them without measuring a validation again. The held-out
    draws of the rounds that follow use their own seeds: report only figures of fresh seeds."""

    folder = Path(opts.seed_from or ".")
    if not (folder / "validation.csv").is_file():
        raise UserError(
            f"--seed-from {folder}: no validation.csv there", hint="name the folder `autotune validate --out` wrote"
        )
    out = opts.out_dir / "seed"
    out.mkdir(parents=True, exist_ok=True)
    table_path = out / "dispatch.json"  # only for the kind and its sizes: the cheapest structure will do
    build_round_table(dataclasses.replace(opts, structure="nearest"), table_path)
    kind = table_kind_of(opts, table_path)
    missing = [n for n in kind.size_names if n not in pd.read_csv(folder / "validation.csv", nrows=0).columns]
    if missing:
        raise UserError(f"--seed-from {folder}/validation.csv has no column {', '.join(missing)} of {kind.name}")
    added = _added(worst_problems(folder, opts.add), kind)
    if added:
        add_points(opts, added, out, kind, reporter)
    (out / "added.json").write_text(json.dumps(added, indent=1) + "\n")
    say(_added_line(f"seeded from {folder}", added))
    return added


def _added(problems: list[dict[str, Any]], kind: Any) -> list[dict[str, Any]]:
    """The worst problems of a validation as tuned points to add: precision, shape, the kind's sizes, the loss."""
    return [
        {
            "precision": str(p["precision"]),
            "shape": p["shape"] if isinstance(p.get("shape"), str) else "",
            **{n: int(p[n]) for n in kind.size_names},
            "loss_vs_best": float(p["loss_vs_best"]),
        }
        for p in problems
    ]


def _added_line(who: str, added: list[dict[str, Any]]) -> str:
    if not added:
        return f"{who}: nothing to add"
    worst = max(p["loss_vs_best"] for p in added)
    return f"{who}: added {len(added)} tuned points (largest measured loss {100 * worst:.1f}%)"


def _resolved(entry: Any, base: Path) -> Any:
    """A config's space entry with a space file named relative to the config made absolute (the added points'
    sweep config is written elsewhere)."""
    ref = entry.get("space") if isinstance(entry, dict) else entry
    if not isinstance(ref, str) or not ref.endswith((".yaml", ".yml")) or Path(ref).is_absolute():
        return entry
    path = (base / ref).resolve()
    if not path.is_file():
        return entry
    return {**entry, "space": str(path)} if isinstance(entry, dict) else str(path)


def active_tuning(
    opts: ActiveOptions, say: Callable[[str], None] = print, reporter: Reporter | None = None
) -> list[Round]:
    """The loop of the module docstring; returns every round (also written to OUT/active.json). `reporter` hears
    every sweep's progress (none: silent)."""
    from autotune.dispatch import validate as v
    from autotune.workflows.sweeps import Launch, refuse_without_gpu

    if opts.rounds < 1 or opts.add < 0 or opts.heldout < 1:
        raise UserError("--rounds and --heldout must be at least 1 and --add at least 0")
    if opts.points is None:
        v.problem_count(opts.heldout, "--heldout")  # (before the first round's folder)
    refuse_without_gpu(Launch(replay=opts.replay))
    start = time.monotonic()
    first = checked_first_table(opts)  # (before OUT is made: a missing space file is found here)
    opts.out_dir.mkdir(parents=True, exist_ok=True)
    rounds: list[Round] = []
    seen: set[tuple] = set()
    if opts.seed_from is not None:
        seed_earlier(opts, say, reporter)
    for r in range(opts.rounds):
        t0 = time.monotonic()
        folder = opts.out_dir / f"round{r}"
        folder.mkdir(parents=True, exist_ok=True)
        table_path = folder / "dispatch.json"
        if r == 0 and opts.seed_from is None:  # the table checked before OUT was made (seeding changes it)
            table = first
            table.save(table_path)
        else:
            table = build_round_table(opts, table_path)
        points = draw_points(opts, table_path, r, seen)
        kind = table_kind_of(opts, table_path)
        seen |= {_key(p) for p in v.read_points(points, kind, v.derived_rule(v.read_table(table_path), kind, None))}
        validate_round(opts, table_path, points, folder / "validation", reporter, say)
        figs = validated_figures(table_path, folder / "validation", tol=opts.tol, spaces=table_spaces(opts, table_path))
        rnd = Round(r, len(table.points), len(table.kernels), figs)
        rounds.append(rnd)
        say(figs.line(f"round {r}"))
        over = opts.budget_s is not None and time.monotonic() - start >= opts.budget_s
        if figs.meets_targets or r == opts.rounds - 1 or over or opts.add == 0:
            rnd.seconds = time.monotonic() - t0
            say("targets met" if figs.meets_targets else "budget spent" if over else "rounds spent")
            break
        rnd.added = _added(worst_problems(folder / "validation", opts.add), kind)
        add_points(opts, rnd.added, folder, kind, reporter)
        rnd.seconds = time.monotonic() - t0
        say(_added_line(f"round {r}", rnd.added))
    (opts.out_dir / "active.json").write_text(json.dumps([x.as_dict() for x in rounds], indent=1, default=str) + "\n")
    return rounds
