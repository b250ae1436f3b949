"""Validation of a GEMM dispatch table at problems it was not tuned on (`autotune validate`).

At each held-out problem the table's answer (`DispatchTable.lookup`), every candidate instance valid there (the
table's kernels and the fastest verified instances of the tuning database) and the baseline (cuBLAS) are measured
by an ordinary sweep (the config `validation_config` writes, run like `autotune sweep`); `validation_frame` then
reads the validation database and sets the table's answer against the best candidate and the baseline.

Steps, each a function:
- held-out problems: `read_points` (a CSV or YAML file) or `random_points` (uniform integer sizes within a
  workload's bounds, or within the table's tuned points' range per (precision, shape), tuned points excluded);
  the batch of each problem follows a `BatchRule` (`batch_rule`: given, or inferred from the tuned points);
- candidates: `candidates` (the table's kernels, plus the `pool_bk` fastest verified instances at every tuned
  point of the tuning database), grouped by space with the space file to sweep (`space_ref`);
- `validation_config`: the sweep config (space entries `instances: [...]`, `measure: valid`);
- `validation_frame` -> validation.csv (CSV_COLUMNS), `summarize` -> the summary, `plot` -> validation.png.
"""
from __future__ import annotations

import csv
import io
import math
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import numpy as np
import pandas as pd
import yaml

from autotune.dispatch.table import DispatchTable
from autotune.errors import UserError
from autotune.problems.gemm import PRECISIONS, SHAPES, gemm_point
from autotune.vocab import ELEM_BYTES, TestPoint

CSV_COLUMNS = ("kind", "precision", "shape", "m", "n", "k", "batch", "table_choice", "table_ms", "best_choice",
               "best_ms", "best_roofline_frac", "baseline_ms", "loss_vs_best", "speedup_vs_baseline")
LIBRARY, GENERIC = "library", "generic"
SLOW_VS_BASELINE = 0.97  # an answer below 0.97x the baseline's speed counts as slower than the baseline
DEFAULT_BATCH_BYTES = "500MB"
POINT_FIELDS = ("precision", "shape", "m", "n", "k")
MAX_DRAWS = 1000  # redraws per wanted problem before --random gives up (a range with too few free problems)


# ----------------------------------------------------------------------------------------------- batch rule
@dataclass(frozen=True)
class BatchRule:
    """How many problems a held-out point batches: the smallest batch whose A + B + C take >= `bytes`, or a fixed
    `count` (exactly one of them is set). `text` is how it reads in a sweep config."""

    bytes: int | None = None
    count: int | None = None
    source: str = "given"  # given | inferred | default

    @property
    def text(self) -> str:
        return f"{{bytes: {self.bytes}}}" if self.bytes is not None else str(self.count)

    def describe(self) -> str:
        what = f"A+B+C >= {self.bytes:,} bytes" if self.bytes is not None else f"{self.count:,} problems"
        return f"{what} ({self.source})"

    def batch(self, precision: str, m: int, n: int, k: int) -> int:
        """The batch of one problem, by the sweep config's own rule (sweep/config.py `batch_for_bytes`)."""
        from autotune.sweep.config import batch_for_bytes
        return batch_for_bytes(self.bytes, precision, m, n, k) if self.bytes is not None else int(self.count or 1)


def parse_batch_bytes(text: str) -> BatchRule:
    """`--batch-bytes 500MB` (any size a sweep config's `batch: {bytes: ...}` takes). Raises UserError."""
    from autotune.sweep import config
    node = yaml.compose(yaml.safe_dump(text))
    return BatchRule(bytes=config.parse_bytes(config.Reader(Path("--batch-bytes")), node))


def _problem_bytes(p: Mapping[str, Any]) -> int:
    return ELEM_BYTES[p["precision"]] * (p["m"] * p["k"] + p["k"] * p["n"] + p["m"] * p["n"])


def infer_batch_rule(table: DispatchTable) -> BatchRule | None:
    """The rule the table's tuned points were made with, when they agree on one: bytes X such that every tuned
    point's batch is the smallest whose A + B + C take >= X (the roundest such X: 100MB rather than 99,999,872),
    else one fixed batch shared by every point; None when neither fits."""
    points = [p for p in table.data["points"] if p.get("precision") in ELEM_BYTES]
    if not points:
        return None
    lo, hi = 0, math.inf  # X in (lo, hi]
    for p in points:
        per = _problem_bytes(p)
        lo, hi = max(lo, (int(p["batch"]) - 1) * per), min(hi, int(p["batch"]) * per)
    if lo < hi:
        for digits in range(int(math.log10(hi)) + 1, -1, -1):
            unit = 10 ** digits
            x = (lo // unit + 1) * unit  # the smallest multiple of unit above lo
            if x <= hi:
                return BatchRule(bytes=int(x), source="inferred")
    batches = {int(p["batch"]) for p in points}
    if len(batches) == 1:
        return BatchRule(count=batches.pop(), source="inferred")
    return None


def batch_rule(table: DispatchTable, given: str | None) -> BatchRule:
    """--batch-bytes when given, else the tuned points' rule, else 500MB."""
    if given is not None:
        return parse_batch_bytes(given)
    inferred = infer_batch_rule(table)
    if inferred is not None:
        return inferred
    return BatchRule(bytes=parse_batch_bytes(DEFAULT_BATCH_BYTES).bytes, source="default")


# ------------------------------------------------------------------------------------------ held-out problems
def groups(table: DispatchTable) -> list[tuple[str, str]]:
    """The table's (precision, shape) groups, in precision and shape order."""
    seen = {(p["precision"], p["shape"]) for p in table.data["points"]}
    seen |= {(k["precision"], k["shape"]) for k in table.data["kernels"]}
    return sorted(seen, key=lambda g: (PRECISIONS.index(g[0]) if g[0] in PRECISIONS else 9,
                                      SHAPES.index(g[1]) if g[1] in SHAPES else 9, g))


def tuned_points(table: DispatchTable) -> set[tuple[str, str, int, int, int]]:
    return {(p["precision"], p["shape"], int(p["m"]), int(p["n"]), int(p["k"])) for p in table.data["points"]}


def _point(file: str, line: int, row: Mapping[str, Any], rule: BatchRule) -> TestPoint:
    """One problem of a --points file; any mistake is a UserError at file:line."""
    missing = [f for f in POINT_FIELDS if row.get(f) in (None, "")]
    if missing:
        raise UserError(f"missing {', '.join(missing)}", file=file, line=line,
                        hint="each problem needs precision, shape, m, n, k (batch optional)")
    precision, shape = str(row["precision"]).strip(), str(row["shape"]).strip()
    if precision not in PRECISIONS:
        raise UserError(f"unknown precision {precision!r}", file=file, line=line, hint=f"use one of {', '.join(PRECISIONS)}")
    if shape not in SHAPES:
        raise UserError(f"unknown shape {shape!r}", file=file, line=line, hint=f"use one of {', '.join(SHAPES)}")
    sizes = {}
    for name in ("m", "n", "k", "batch"):
        value = row.get(name)
        if name == "batch" and value in (None, ""):
            continue
        try:
            number = int(str(value).strip())
        except ValueError:
            raise UserError(f"{name} must be an integer, got {value!r}", file=file, line=line,
                            hint="write whole numbers >= 1") from None
        if number < 1:
            raise UserError(f"{name} must be >= 1, got {number}", file=file, line=line, hint="write whole numbers >= 1")
        sizes[name] = number
    if "batch" not in sizes:
        sizes["batch"] = rule.batch(precision, sizes["m"], sizes["n"], sizes["k"])
    try:
        return gemm_point(precision, shape, sizes["m"], sizes["n"], sizes["k"], sizes["batch"])
    except ValueError as exc:
        raise UserError(str(exc), file=file, line=line, hint="fix the sizes") from None


def read_points(path: str | Path, rule: BatchRule) -> list[TestPoint]:
    """Held-out problems from a CSV file (header precision,shape,m,n,k[,batch]) or a YAML list of mappings with
    those keys. Duplicates are kept once, in file order. Errors name the file and line."""
    path = Path(path)
    if not path.is_file():
        raise UserError(f"no points file {path}", hint="give a CSV (precision,shape,m,n,k[,batch]) or a YAML list")
    text = path.read_text()
    out: list[TestPoint] = []
    if path.suffix.lower() in (".yaml", ".yml"):
        try:
            root = yaml.compose(text, Loader=yaml.SafeLoader)
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            raise UserError(f"not valid YAML: {getattr(exc, 'problem', exc)}", file=str(path),
                            line=mark.line + 1 if mark else None, hint="fix the YAML syntax") from None
        if root is None or not isinstance(root, yaml.SequenceNode):
            raise UserError("a YAML points file is a list of problems", file=str(path), line=1,
                            hint="write `- {precision: fp32, shape: NN, m: 24, n: 20, k: 7}` lines")
        constructor = yaml.constructor.SafeConstructor()
        for node in root.value:
            line = node.start_mark.line + 1
            value = constructor.construct_object(node, deep=True)
            if not isinstance(value, dict):
                raise UserError(f"a problem is a mapping, got {value!r}", file=str(path), line=line,
                                hint="write {precision: fp32, shape: NN, m: 24, n: 20, k: 7}")
            unknown = sorted(set(map(str, value)) - set(POINT_FIELDS) - {"batch"})
            if unknown:
                raise UserError(f"unknown key {unknown[0]!r}", file=str(path), line=line,
                                hint="keys: precision, shape, m, n, k, batch")
            out.append(_point(str(path), line, value, rule))
    else:
        lines = text.splitlines()
        reader = csv.reader(io.StringIO(text))
        header = next(reader, None)
        if header is None:
            raise UserError("the points file is empty", file=str(path), line=1,
                            hint="first line: precision,shape,m,n,k[,batch]")
        header = [h.strip() for h in header]
        unknown = [h for h in header if h not in POINT_FIELDS + ("batch",)]
        if unknown or not set(POINT_FIELDS) <= set(header):
            raise UserError(f"header must name precision,shape,m,n,k[,batch], got {','.join(header)}", file=str(path),
                            line=1, hint="first line: precision,shape,m,n,k[,batch]")
        for row in reader:
            line = reader.line_num
            if not row or not "".join(row).strip() or lines[line - 1].lstrip().startswith("#"):
                continue
            if len(row) != len(header):
                raise UserError(f"{len(row)} fields where the header has {len(header)}", file=str(path), line=line,
                                hint=f"write {','.join(header)}")
            out.append(_point(str(path), line, dict(zip(header, row)), rule))
    if not out:
        raise UserError("no problems in the points file", file=str(path), hint="list at least one problem")
    return list(dict.fromkeys(out))


def table_bounds(table: DispatchTable, precision: str, shape: str) -> dict[str, tuple[int, int]]:
    """min..max of m, n, k over the table's tuned points of one group (the fallback without a workload)."""
    pts = [p for p in table.data["points"] if (p["precision"], p["shape"]) == (precision, shape)]
    if not pts:
        return {}
    return {d: (min(int(p[d]) for p in pts), max(int(p[d]) for p in pts)) for d in ("m", "n", "k")}


def random_points(table: DispatchTable, count: int, seed: int, rule: BatchRule, workload: Any = None,
                  rule_given: bool = False) -> list[TestPoint]:
    """`count` problems split evenly over the table's groups (the first groups take the remainder), each size drawn
    uniformly and independently (integers) within the workload's bounds (`workload.bounds(precision, shape)`), or
    without a workload within the tuned points' min..max; tuned points and repeats are drawn again.
    The batch is the workload's (`workload.point`) unless a rule was given, else the rule's."""
    if count < 1:
        raise UserError(f"--random must be at least 1, got {count}")
    gs = groups(table)
    if not gs:
        raise UserError("the table has no (precision, shape) groups to draw problems for")
    rng = random.Random(seed)
    tuned = tuned_points(table)
    out: list[TestPoint] = []
    for i, (precision, shape) in enumerate(gs):
        want = count // len(gs) + (1 if i < count % len(gs) else 0)
        if want == 0:
            continue
        bounds = dict(workload.bounds(precision, shape)) if workload is not None else table_bounds(table, precision, shape)
        if not all(d in bounds for d in ("m", "n", "k")):
            raise UserError(f"no ranges to draw {precision} {shape} problems from",
                            hint="pass --workload FILE (its bounds), or use --points FILE")
        names = sorted(bounds, key=lambda s: ("m", "n", "k", "batch").index(s) if s in ("m", "n", "k", "batch") else 9)
        seen: set[TestPoint] = set()
        draws = 0
        while len(seen) < want:
            draws += 1
            if draws > MAX_DRAWS * want:
                raise UserError(f"cannot draw {want} {precision} {shape} problems that are not tuned points within "
                                + ", ".join(f"{d} {lo}..{hi}" for d, (lo, hi) in bounds.items()),
                                hint="ask for fewer (--random N) or give wider ranges (--workload)")
            sizes = {s: rng.randint(int(bounds[s][0]), int(bounds[s][1])) for s in names}
            if (precision, shape, sizes["m"], sizes["n"], sizes["k"]) in tuned:
                continue
            if workload is not None and not rule_given:
                point = workload.point(precision, shape, sizes)
            else:
                batch = sizes.get("batch") or rule.batch(precision, sizes["m"], sizes["n"], sizes["k"])
                point = gemm_point(precision, shape, sizes["m"], sizes["n"], sizes["k"], batch)
            if point in seen:
                continue
            seen.add(point)
            out.append(point)
    return out


# ------------------------------------------------------------------------------------------------ candidates
@dataclass(frozen=True)
class Candidates:
    """Instances to measure, per space name (ids sorted), with the space file (or name) a config can sweep."""

    by_space: Mapping[str, tuple[str, ...]]
    refs: Mapping[str, str]  # space name -> name under spaces/ or an absolute path
    generic: str | None = None  # the instance id of the table's generic kernel, when it is measured

    @property
    def ids(self) -> set[str]:
        return {i for ids in self.by_space.values() for i in ids}


def _recorded_paths(tuning_url: str | None) -> dict[str, str]:
    if tuning_url is None:
        return {}
    from autotune.store.query import run_query
    rows = run_query(tuning_url, "SELECT name, yaml_path FROM spaces ORDER BY id")
    return {str(r.name): str(r.yaml_path) for r in rows.itertuples()}


def space_ref(name: str, recorded: Mapping[str, str]) -> str:
    """A space by name under spaces/, else the file the tuning database recorded for it. Raises UserError."""
    from autotune import paths
    if name and (paths.SPACES_DIR / f"{name}.yaml").is_file():
        return name
    path = recorded.get(name)
    if path and Path(path).is_file():
        return str(Path(path).resolve())
    raise UserError(f"no space file for space {name!r}: not under {paths.SPACES_DIR}"
                    + (f" and its recorded file {path} is gone" if path else ", and no tuning database records it"),
                    hint="pass --db TUNING_DB (the database the table was made from) or restore the space file")


def pool(tuning_url: str, device: str | None, table_groups: Iterable[tuple[str, str]],
         pool_bk: int) -> pd.DataFrame:
    """The `pool_bk` fastest verified instances (by median, then id) at every tuned point of the tuning database
    for the given groups, on `device` (a name or uuid; None: the only one). Columns instance_id, space."""
    from autotune.store.store import Store
    with Store.open(tuning_url, create=False, readonly=True) as store:
        frame = store.measurements(device=device)
    if "kind" in frame.columns:
        frame = frame[frame["kind"] == "gemm"]
    if len(frame) == 0:
        raise UserError(f"no GEMM measurements in {tuning_url}" + (f" on {device}" if device else ""),
                        hint="--db names the database the table was made from (the table's device must be in it)")
    wanted = set(table_groups)
    ok = frame[(frame["status"] == "ok") & frame["median_ms"].notna()]
    ok = ok[[(p, s) in wanted for p, s in zip(ok["precision"], ok["shape"])]]
    if pool_bk <= 0 or len(ok) == 0:
        return pd.DataFrame(columns=["instance_id", "space"])
    ranked = ok.sort_values(["precision", "shape", "m", "n", "k", "batch", "median_ms", "instance_id"], kind="stable")
    top = ranked.groupby(["precision", "shape", "m", "n", "k", "batch"], sort=False).head(pool_bk)
    return top[["instance_id", "space"]].drop_duplicates().reset_index(drop=True)


def generic_instance(table: DispatchTable) -> tuple[str, str] | None:
    """(space name, instance id) of the table's generic kernel: the instance of its space (gemm_naive) whose name
    expressions are the table's; None when the table names none or no instance matches."""
    from autotune.devices import get_device
    from autotune.space.generator import generate
    from autotune.space.spec import load_space
    generic = table.data.get("generic") or {}
    templates = generic.get("templates") or {}
    if not templates:
        return None
    key, want = min(templates.items())
    precision, shape = key.split(":")
    try:
        space = load_space(generic.get("space") or "gemm_naive")
        found = generate(space, get_device(None), precision, soft=False).instances()
    except UserError:
        return None
    match = sorted(i.id for i in found if space.template_name(i.param_dict, precision, shape) == want)
    return (space.name, match[0]) if match else None


def candidates(table: DispatchTable, tuning_url: str | None, pool_bk: int = 1, generic: bool = False) -> Candidates:
    """The table's kernels plus, with a tuning database, its `pool_bk` fastest instances per tuned point; with
    `generic`, the table's generic kernel (where the table answers with it)."""
    by_space: dict[str, set[str]] = {}
    generic_id = None
    if generic:
        found = generic_instance(table)
        if found is not None:
            by_space.setdefault(found[0], set()).add(found[1])
            generic_id = found[1]
    for k in table.data["kernels"]:
        by_space.setdefault(str(k.get("space") or ""), set()).add(str(k["instance_id"]))
    if tuning_url is not None:
        device = table.provenance.get("device") or None
        from autotune.store.query import run_query
        names = set(run_query(tuning_url, "SELECT name FROM devices")["name"].astype(str))
        if device not in names:
            device = None  # a database of one GPU whose name differs; Store.device_id refuses several
        for r in pool(tuning_url, device, groups(table), pool_bk).itertuples():
            by_space.setdefault(str(r.space), set()).add(str(r.instance_id))
    recorded = _recorded_paths(tuning_url)
    refs = {name: space_ref(name, recorded) for name in by_space}
    return Candidates({name: tuple(sorted(ids)) for name, ids in sorted(by_space.items())}, refs, generic_id)


# -------------------------------------------------------------------------------------------- the sweep config
def validation_config(points: Sequence[TestPoint], cands: Candidates, database: str, repetitions: int = 20,
                      tol: float = 0.05, name: str = "validate") -> str:
    """The sweep config (YAML text) measuring every candidate where it is valid, at every held-out problem."""
    spaces = [{"space": cands.refs[s], "instances": list(ids), "measure": "valid"}
              for s, ids in cands.by_space.items()]
    groups_: list[dict[str, Any]] = []
    for p in points:
        groups_.append({"precisions": [p.precision], "shapes": [p.shape],
                        "sizes": {"triples": [[p.m, p.n, p.k]]}, "batch": p.batch})
    doc = {"name": name, "description": "autotune validate: held-out problems of a dispatch table",
           "spaces": spaces, "points": groups_, "database": database, "repetitions": int(repetitions),
           "strategy": "brute", "tol": float(tol)}
    return "# written by `autotune validate`; `autotune sweep` on this file measures the same pairs\n" + \
        yaml.safe_dump(doc, sort_keys=False, default_flow_style=None, width=120)


# ------------------------------------------------------------------------------------------------ the results
def choice(table: DispatchTable, p: TestPoint) -> str:
    """The table's answer at a problem: an instance id, LIBRARY or GENERIC."""
    rec = table.lookup(p.precision, p.shape, p.m, p.n, p.k, p.batch)
    if rec.get("library"):
        return LIBRARY
    if rec.get("generic"):
        return GENERIC
    return str(rec["instance_id"])


def measured(url: str, device: str | None = None) -> tuple[pd.DataFrame, pd.DataFrame, str]:
    """Verified instance times (instance_id, point columns, median_ms, roofline_frac) and baseline times (point
    columns, median_ms, roofline_frac) of one device of the validation database, and that device's name."""
    from autotune.store.query import run_query
    from autotune.store.store import Store
    with Store.open(url, create=False, readonly=True) as store:
        device_id = store.device_id(device)
        name = store.device_info(device_id).name
    cols = "p.kind, p.precision, p.shape, p.m, p.n, p.k, p.batch"
    inst = run_query(url, f"SELECT m.instance_id, {cols}, m.median_ms, m.roofline_frac FROM measurements m "
                          f"JOIN test_points p ON p.id = m.point_id WHERE m.status = 'ok' AND m.median_ms IS NOT NULL "
                          f"AND m.device_id = {int(device_id)}")
    base = run_query(url, f"SELECT {cols}, c.median_ms, c.roofline_frac FROM cublas c "
                          f"JOIN test_points p ON p.id = c.point_id WHERE c.status = 'ok' AND c.median_ms IS NOT NULL "
                          f"AND c.device_id = {int(device_id)}")
    return inst, base, name


def _frac(x: Any) -> float:
    return float(x) if x is not None and not pd.isna(x) else math.nan


def _key(r: Any) -> tuple:
    return (str(r.precision), str(r.shape), int(r.m), int(r.n), int(r.k), int(r.batch))


def validation_frame(table: DispatchTable, points: Sequence[TestPoint], cands: Candidates, url: str,
                     device: str | None = None) -> pd.DataFrame:
    """One row per held-out problem (CSV_COLUMNS), in the order of `points`."""
    inst, base, _ = measured(url, device)
    ids = cands.ids
    times: dict[tuple, dict[str, tuple[float, float]]] = {}
    for r in inst.itertuples():
        if r.kind == "gemm" and r.instance_id in ids:
            times.setdefault(_key(r), {})[str(r.instance_id)] = (float(r.median_ms), _frac(r.roofline_frac))
    baseline = {_key(r): (float(r.median_ms), _frac(r.roofline_frac)) for r in base.itertuples() if r.kind == "gemm"}
    rows = []
    for p in points:
        key = (p.precision, p.shape, p.m, p.n, p.k, p.batch)
        here = times.get(key, {})
        base_ms, base_rf = baseline.get(key, (math.nan, math.nan))
        choice_ = choice(table, p)
        answer = cands.generic if choice_ == GENERIC else choice_
        table_ms = base_ms if choice_ == LIBRARY else here.get(answer or "", (math.nan,))[0]
        best_choice, best_ms, best_rf = "", math.nan, math.nan
        if here:
            best_choice, (best_ms, best_rf) = min(here.items(), key=lambda kv: (kv[1][0], kv[0]))
        if math.isfinite(base_ms) and not base_ms >= best_ms:  # the library counts as an answer (NaN best: it wins)
            best_choice, best_ms, best_rf = LIBRARY, base_ms, base_rf
        loss = max(0.0, 1.0 - best_ms / table_ms) if math.isfinite(table_ms) and math.isfinite(best_ms) else math.nan
        speedup = base_ms / table_ms if math.isfinite(table_ms) and math.isfinite(base_ms) else math.nan
        rows.append({"kind": p.kind, "precision": p.precision, "shape": p.shape, "m": p.m, "n": p.n, "k": p.k,
                     "batch": p.batch, "table_choice": choice_, "table_ms": table_ms, "best_choice": best_choice,
                     "best_ms": best_ms, "best_roofline_frac": best_rf, "baseline_ms": base_ms, "loss_vs_best": loss,
                     "speedup_vs_baseline": speedup})
    return pd.DataFrame(rows, columns=list(CSV_COLUMNS))


def to_csv(frame: pd.DataFrame, path: str | Path) -> Path:
    """validation.csv: fixed columns, 9 significant digits, empty cells for unknown values (reproducible)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    frame.to_csv(path, index=False, columns=list(CSV_COLUMNS), float_format="%.9g", lineterminator="\n")
    return path


def summarize(frame: pd.DataFrame, tol: float = 0.05) -> list[dict[str, Any]]:
    """Per (precision, shape) group and overall ("all"): problems, measured answers, median and worst loss against
    the best, problems within TOL, problems where the answer is < 0.97x the baseline's speed, answers not
    measured."""
    def one(label: str, f: pd.DataFrame) -> dict[str, Any]:
        loss = pd.to_numeric(f["loss_vs_best"], errors="coerce").dropna()
        speed = pd.to_numeric(f["speedup_vs_baseline"], errors="coerce")
        return {"group": label, "problems": len(f), "measured": len(loss),
                "median_loss": float(loss.median()) if len(loss) else None,
                "worst_loss": float(loss.max()) if len(loss) else None,
                "within_tol": int((loss <= tol + 1e-12).sum()),
                "slower_than_baseline": int((speed < SLOW_VS_BASELINE).sum()),
                "not_measured": int(pd.to_numeric(f["table_ms"], errors="coerce").isna().sum())}
    out = [one(f"{p} {s}", g) for (p, s), g in frame.groupby(["precision", "shape"], sort=False)]
    return out + [one("all", frame)]


def plot(frame: pd.DataFrame, path: str | Path) -> Path:
    """validation.png: loss against the best and speedup over the baseline, against M*N*K (log), per precision."""
    from autotune.dispatch.report import _pyplot
    plt = _pyplot()
    path = Path(path)
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 4.5))
    size = frame["m"].astype(float) * frame["n"].astype(float) * frame["k"].astype(float)
    markers = {"fp64": "o", "fp32": "s", "fp16": "^"}
    for ax, col in ((ax1, "loss_vs_best"), (ax2, "speedup_vs_baseline")):
        for precision, g in frame.groupby("precision", sort=False):
            y = pd.to_numeric(g[col], errors="coerce")
            known = y.notna().to_numpy()
            if known.any():
                ax.scatter(size[g.index][known], y[known], marker=markers.get(str(precision), "x"),
                           label=str(precision), alpha=0.7)
        if ax.collections:
            ax.set_xscale("log")
        else:
            ax.text(0.5, 0.5, "nothing measured", ha="center", va="center", transform=ax.transAxes)
    ax1.set(xlabel="M*N*K", ylabel="loss vs best candidate", title="table answer: loss vs best")
    ax2.axhline(SLOW_VS_BASELINE, color="red", linestyle="--", linewidth=1, label=f"{SLOW_VS_BASELINE}x")
    ax2.set(xlabel="M*N*K", ylabel="baseline ms / table ms", title="table answer vs baseline")
    for ax in (ax1, ax2):
        ax.grid(True, alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend()
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def finite_or_none(x: Any) -> Any:
    return None if isinstance(x, float) and not np.isfinite(x) else x
