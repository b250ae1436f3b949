"""A refinement timer (`refine.Timer`) from any measuring backend: the GPU backend times an answer at a problem as a
sweep would (compiled, verified, `reps` timed repetitions, the median), the replay backend answers from a recorded
database (tests on a CPU). A kernel answer is the table kernel's instance as the tuning database recorded it;
LIBRARY is the kind's baseline (its library); a failed or unrecorded measurement is None."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Optional

from autotune.dispatch.runtime import LIBRARY
from autotune.dispatch.refine import Timer


def backend_timer(
    backend: Any,
    table: dict,
    kind: Any,
    instances_db: str,
    reps: int = 10,
    scalars: dict | None = None,
    space_files: tuple[Path, ...] = (),
) -> Timer:
    """timer(answer, precision, shape, sizes) -> median ms or None, measured by `backend` (a sweep Backend:
    `run(jobs)` and `baseline(kind, point, scalars, reps)`). `instances_db`: a results database that recorded the
    table's kernels (the tuning database: each instance's space and parameters); `space_files`: the files of spaces
    that are not built in (a user kernel's space.yaml)."""
    from autotune.sweep.backends.base import Job
    from autotune.vocab import Status

    own = kind.scalars() if scalars is None else scalars
    kernels = table["kernels"]
    backend.start()  # a GPU backend starts its worker and compile pool
    backend.device_info()
    found = recorded_instances(instances_db, [str(k["instance_id"]) for k in kernels], space_files)

    def timer(answer: int, precision: str, shape: str, sizes: dict) -> Optional[float]:
        point = kind.point(precision, shape, sizes)
        if answer == LIBRARY:
            m = backend.baseline(kind, point, own, reps)
        elif answer < 0:  # the generic kernel is not timed
            return None
        else:
            space, instance = found[str(kernels[answer]["instance_id"])]
            m = next(iter(backend.run([Job(space, instance, (point,), own, reps)])))
        return float(m.median_ms) if m.status == Status.OK and m.median_ms is not None else None

    return timer


def recorded_instances(url: str, ids: list[str], space_files: tuple[Path, ...] = ()) -> dict[str, tuple[Any, Any]]:
    """{instance id: (space, Instance)} from the database's recorded instances (space by name: one of
    `space_files` or a built-in one; parameters as recorded; the id is checked). Raises UserError for an id it
    lacks."""
    from autotune.errors import UserError
    from autotune.space.instance import Instance
    from autotune.space.spec import load_space
    from autotune.store.engine import database_url
    from autotune.store.query import run_query

    url = database_url(url)
    want = sorted(set(ids))
    quoted = ", ".join("'" + i.replace("'", "") + "'" for i in want)
    rows = run_query(url, f"SELECT id, space, params FROM instances WHERE id IN ({quoted})")
    out: dict[str, tuple[Any, Any]] = {}
    spaces: dict[str, Any] = {space.name: space for space in (load_space(str(f)) for f in space_files)}
    for r in rows.to_dict("records"):
        params = json.loads(r["params"]) if isinstance(r["params"], str) else dict(r["params"])
        name = str(r["space"])
        if name not in spaces:  # a built-in space, loaded once
            spaces[name] = load_space(name)
        space = spaces[name]
        order = [n for n in space.param_names if n in params] + [n for n in params if n not in space.param_names]
        instance = Instance.of(space.name, {n: params[n] for n in order})
        if instance.id == r["id"]:
            out[str(r["id"])] = (space, instance)
    missing = [i for i in want if i not in out]
    if missing:
        raise UserError(
            f"{len(missing)} table kernels are not recorded in {url} (e.g. {missing[0]})",
            hint="give the tuning database the table was made from",
        )
    return out
