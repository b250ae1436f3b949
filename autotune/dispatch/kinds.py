"""Summaries and dispatch tables for any problem kind (GEMM has its own, richer tables: dispatch.table).

`summary(frame, baseline)`: per test point the fastest verified instance, its time, its fraction of the
bandwidth roofline, the baseline's time (the kind's library or framework call, timed the same way) and the
speedup over it, with one column per size of the kind.

`kind_table(...)`: the smallest set of kernels (greedy: repeatedly the instance within TOL of the best at the
most points not yet served, among each point's BK fastest) that serves every tuned point within TOL; a point
where the baseline is faster than every kernel by more than TOL is answered by the library. `lookup` (in the
generated Python module too) answers a problem with the answer of the tuned point of the same precision and
variant nearest by the sum over sizes of |log2(size / size')|, ties to the earlier point; unknown precisions,
variants, size names, or sizes that are not integers >= 1 raise ValueError.
"""
from __future__ import annotations

import json
import math
from typing import Any

import pandas as pd

FORMAT = "autotune-dispatch-kind"
VERSION = 1
LIBRARY = -2  # a point's answer: call the kind's baseline (library or framework)
TIMED = ("ok", "skipped")


def size_columns(frame: pd.DataFrame, kind: str) -> list[str]:
    """The kind's size columns of a Store.measurements() frame, in the kind's order (GEMM: m, n, k, batch; the sizes
    of the kinds present stand between `shape` and `status`)."""
    if kind == "gemm":
        return ["m", "n", "k", "batch"]
    cols = list(frame.columns)
    rows = frame[frame["kind"] == kind]
    return [c for c in cols[cols.index("shape") + 1:cols.index("status")] if rows[c].notna().all()]


def baseline_frame(times: dict, kind: str, sizes: list[str]) -> pd.DataFrame:
    """Store.baseline_times() (the baseline's time per test point) as rows of one kind."""
    rows = [{"precision": p.precision, "shape": p.shape, **{n: p.dims.get(n) for n in sizes}, "median_ms": ms}
            for p, ms in times.items() if p.kind == kind]
    return pd.DataFrame(rows, columns=["precision", "shape", *sizes, "median_ms"])


def summary(frame: pd.DataFrame, kind: str, baseline: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per test point of `kind`: kind, precision, shape, sizes..., instance, ms, roofline_frac,
    baseline_ms, speedup_vs_baseline. `baseline`: rows (point columns + median_ms) of the baseline table."""
    sizes = size_columns(frame, kind)
    point = ["precision", "shape", *sizes]
    ok = frame[(frame["kind"] == kind) & (frame["status"] == "ok") & frame["median_ms"].notna()]
    best = ok.sort_values(["median_ms", "instance_id"]).drop_duplicates(point)
    out = best[point + ["instance", "instance_id", "median_ms", "roofline_frac"]].rename(columns={"median_ms": "ms"})
    out.insert(0, "kind", kind)
    if baseline is not None and not baseline.empty:
        b = baseline[point + ["median_ms"]].rename(columns={"median_ms": "baseline_ms"})
        out = out.merge(b, on=point, how="left")
    else:
        out["baseline_ms"] = float("nan")
    out["speedup_vs_baseline"] = out["baseline_ms"] / out["ms"]
    return out.sort_values(point).reset_index(drop=True)


def kind_table(frame: pd.DataFrame, kind: str, baseline: pd.DataFrame | None, tol: float, bk: int,
               library: str | None) -> dict[str, Any]:
    """The dispatch table of one kind as a JSON-able dict (see the module docstring)."""
    sizes = size_columns(frame, kind)
    point = ["precision", "shape", *sizes]
    rows = frame[(frame["kind"] == kind) & frame["status"].isin(TIMED) & frame["median_ms"].notna()]
    base = {} if baseline is None else {tuple(r[c] for c in point): float(r["median_ms"])
                                         for _, r in baseline.iterrows() if pd.notna(r["median_ms"])}
    points, accepted = [], []
    for key, g in rows.groupby(point, sort=True):
        g = g.sort_values(["median_ms", "instance_id"])
        best = float(g["median_ms"].iloc[0])
        within = g[(g["status"] == "ok") & (g["median_ms"] <= best / (1 - tol) * (1 + 1e-12))].head(bk)
        points.append({"precision": key[0], "shape": key[1], "sizes": {s: int(v) for s, v in zip(sizes, key[2:])},
                       "best_ms": best, "baseline_ms": base.get(tuple(key))})
        accepted.append({r.instance_id: float(r.median_ms) for r in within.itertuples()})
    chosen: list[str] = []
    todo = {i for i, p in enumerate(points)  # points the library answers need no kernel
            if not (library and p["baseline_ms"] is not None and p["baseline_ms"] < p["best_ms"])}
    while todo:
        counts: dict[str, int] = {}
        for i in todo:
            for iid in accepted[i]:
                counts[iid] = counts.get(iid, 0) + 1
        if not counts:
            break
        pick = min(counts, key=lambda iid: (-counts[iid], iid))
        chosen.append(pick)
        todo -= {i for i in todo if pick in accepted[i]}
    index = {iid: n for n, iid in enumerate(chosen)}
    for p, acc in zip(points, accepted):
        ms, k = min(((acc[iid], index[iid]) for iid in acc if iid in index), default=(None, None))
        if library and p["baseline_ms"] is not None and (k is None or p["baseline_ms"] < ms):
            ms, k = p["baseline_ms"], LIBRARY
        p["kernel"], p["answer_ms"] = (k if k is not None else LIBRARY if library else None), ms
        p["loss"] = None if ms is None else max(0.0, 1 - p["best_ms"] / ms)
    meta = rows.drop_duplicates("instance_id").set_index("instance_id")
    params = _param_columns(rows)
    kernels = []
    for iid in chosen:
        kern = {"instance_id": iid, "space": meta.loc[iid, "space"], "name": meta.loc[iid, "instance"],
                "params": {c.removeprefix("param_"): _plain(meta.loc[iid, c]) for c in params
                           if pd.notna(meta.loc[iid, c])}}
        first = next(p for p, acc in zip(points, accepted) if iid in acc)  # a point it serves: its defines
        kernels.append({**kern, **_binding(kern, first)})
    return {"format": FORMAT, "version": VERSION, "kind": kind, "size_names": sizes, "tol": tol, "bk": bk,
            "library": library, "library_index": LIBRARY, "kernels": kernels, "points": points}


def _binding(kernel: dict[str, Any], point: dict[str, Any]) -> dict[str, Any]:
    """How to build the kernel: its source file, function (or name expression) and `#define`s, from the space
    version the database recorded (autotune.store.spaces); empty when the space file cannot be found."""
    from autotune.space.spec import load_space
    from autotune.vocab import TestPoint

    try:
        space = load_space(kernel["space"])
        assert space.kernel is not None
        p = TestPoint(space.kind.name, point["precision"], point["shape"], tuple(point["sizes"].items()))
        return {"source": space.kernel.source, "function": space.template_name(kernel["params"], p.precision, p.shape),
                "defines": dict(space.defines(kernel["params"], p))}
    except Exception:  # noqa: BLE001 - a table without build instructions is still a table
        return {}


def _param_columns(rows: pd.DataFrame) -> list[str]:
    """Store.measurements() puts one column per instance parameter after `sweep_id`, its last result column."""
    cols = list(rows.columns)
    return cols[cols.index("sweep_id") + 1:]


def _plain(v: Any) -> Any:
    return v.item() if hasattr(v, "item") else v


def lookup(table: dict[str, Any], precision: str, shape: str = "", **sizes: Any) -> dict[str, Any]:
    """The answer for a problem: {"kernel": index, or table["library_index"] for the library, "point": the tuned
    point it comes from}. Raises ValueError for input the table cannot answer."""
    names = table["size_names"]
    if set(sizes) != set(names):
        raise ValueError(f"{table['kind']} takes the sizes {', '.join(names)}; got {', '.join(sizes) or 'none'}")
    for n, v in sizes.items():
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"size {n} must be an integer >= 1, got {v!r}")
    candidates = [p for p in table["points"] if p["precision"] == precision and p["shape"] == shape]
    if not candidates:
        known = sorted({(p["precision"], p["shape"]) for p in table["points"]})
        raise ValueError(f"no tuned point of precision {precision!r} and variant {shape!r}; the table has "
                         + ", ".join(f"{a}/{b or '-'}" for a, b in known))
    best = min(candidates, key=lambda p: sum(abs(math.log2(sizes[n] / p["sizes"][n])) for n in names))
    if best["kernel"] is None:
        raise ValueError("no kernel serves the nearest tuned point and the table has no library answer")
    return {"kernel": best["kernel"], "point": best["sizes"]}


def python_module(table: dict[str, Any]) -> str:
    """A standalone Python module with the table and `lookup(precision, shape="", **sizes)`."""
    import inspect

    src = inspect.getsource(lookup).replace("def lookup(table: dict[str, Any], ", "def _lookup(table, ")
    return ("\"\"\"Dispatch table of the problem kind {kind} (autotune, {fmt} v{ver}). lookup(precision, shape='', "
            "**sizes) -> {{'kernel': index into KERNELS or LIBRARY, 'point': the tuned point}}.\"\"\"\n"
            "import json\nimport math\n\n"
            "TABLE = json.loads(r\"\"\"{table}\"\"\")\nKERNELS = TABLE['kernels']\nLIBRARY = {lib}\n\n\n{src}\n\n"
            "def lookup(precision, shape='', **sizes):\n    return _lookup(TABLE, precision, shape, **sizes)\n"
            ).format(kind=table["kind"], fmt=FORMAT, ver=VERSION, table=json.dumps(table, indent=1, default=str),
                     lib=LIBRARY, src=src.replace("-> dict[str, Any]", "").replace(
                         "shape: str = \"\", **sizes: Any", "shape='', **sizes"))


def write_reports(url: str, out: Any, tol: float, bk: int, device: str | None = None) -> list[str]:
    """For every kind but GEMM in the database: summary.csv, dispatch.json and dispatch.py (in `out`, or in
    out/<kind>/ when there are several kinds). Returns the kinds written."""
    from pathlib import Path

    from autotune.store.store import Store

    with Store.open(url, readonly=True) as store:
        frame = store.measurements(device=device)
        device_id = store.device_id(device)
        times = store.baseline_times(device_id)
    kinds = [k for k in dict.fromkeys(frame["kind"]) if k != "gemm"]
    for kind in kinds:
        folder = Path(out) / kind if len(kinds) > 1 or (frame["kind"] == "gemm").any() else Path(out)
        folder.mkdir(parents=True, exist_ok=True)
        sizes = size_columns(frame, kind)
        base = baseline_frame(times, kind, sizes)
        summary(frame, kind, base).to_csv(folder / "summary.csv", index=False, float_format="%.6g")
        table = kind_table(frame, kind, base, tol, bk, library="baseline" if not base.empty else None)
        (folder / "dispatch.json").write_text(json.dumps(table, indent=1, default=str))
        (folder / "dispatch.py").write_text(python_module(table))
    return kinds
